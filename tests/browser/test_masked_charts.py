"""A masked chart (layout.meta.masked) shows no answer before its step's guess (issue 36).

The lab masked such a chart's labels until the guess (static/js/lab.js), but drew its bars and
lines at their real heights and kept its hover: EP06 step 2's last bar stood at 484 pairs on a
labelled axis and said so on hover, and EP06 step 6's hover gave the 6.04 GB its prediction
asks for. Before the guess the chart is drawn veiled: the plotted data (gd.data, gd.layout)
carries no value of the figure, the value axis has no ticks, and hovering shows nothing; after
the guess the real figure is drawn, its hover back."""

import html
import json
import re

import pytest

from app.charts.units import fmt_bytes
from labs.memory.lab import linear_weight_params
from labs.model.presets import get_model
from tests.app.test_answers_hidden import page as lesson_html
from tests.app.test_step_beats import steps
from tests.browser.helpers import api_json, commit_guess, look_at, try_href, wait_drawn

# Each test's page is this worker's reused tab (tests/conftest.py TabPool).
pytestmark = pytest.mark.reuse_tab

EP04, EP06 = "/episodes/tensor-parallel", "/episodes/context-parallel"

# (lesson, step, chart, the step's try link: the state its prediction is about)
MASKED = [
    (EP06, 2, "cp-pairs", "64 tokens, CP 8"),
    (EP06, 6, "cp-cost", "GPT-3, ring CP 16"),
    (EP06, 8, "cp-crossover", "Zigzag, CP 8, InfiniBand NDR"),
    (EP04, 6, "tp-crossover", "TP = 8 across InfiniBand NDR"),
]

# The chart as plotted (gd.data and gd.layout without its meta, the masked texts), and the
# figure the page holds for it (its script): what lab.js was given.
PLOTTED = """(id) => {
    const gd = document.getElementById(id);
    const layout = Object.assign({}, gd.layout); delete layout.meta;
    return JSON.stringify({data: gd.data, layout: layout});
}"""
FIGURE = """(id) => document.querySelector(`script.figure[data-target='${id}']`).textContent"""
HOVER = "(id) => document.getElementById(id).querySelectorAll('.hoverlayer .hovertext').length"
HOVERED = """(id) => [...document.getElementById(id).querySelectorAll('.hoverlayer .hovertext')]
    .map(h => h.textContent)"""


def numbers(value) -> list[float]:
    """Every number in a JSON value."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    items = value.values() if isinstance(value, dict) else value
    return [n for item in items for n in numbers(item)]


def hover_everywhere(page, chart: str) -> str:
    """Move the mouse across the plot area (a grid of points): every hover label it raises."""
    box = page.locator(f"#{chart}").bounding_box()
    assert box, chart
    seen = []
    for fx in (0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95):
        for fy in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
            page.mouse.move(box["x"] + fx * box["width"], box["y"] + fy * box["height"])
            seen += page.evaluate(HOVERED, chart)
    return " | ".join(seen)


@pytest.mark.parametrize("lesson, step, chart, link", MASKED,
                         ids=[f"{c}-step{s}" for _, s, c, _ in MASKED])
def test_a_masked_chart_shows_no_value_until_the_guess(page, client, lesson, step, chart, link):
    href = try_href(client, lesson, step, link)
    page.goto(href)  # the step's state, opened by its URL before the guess
    wait_drawn(page)
    look_at(page, chart)
    real = json.loads(page.evaluate(FIGURE, chart))
    plotted = json.loads(page.evaluate(PLOTTED, chart))
    assert real["layout"]["meta"]["masked"], chart
    # Every value the figure's traces carry (bar heights, line points, their positions), and
    # every coordinate the veiled chart plots: its traces', its labels' places, its axes'.
    values = {round(v, 6) for t in real["data"] for v in numbers([t.get("x"), t.get("y")])
              if abs(v) > 1}
    assert values, chart
    layout = plotted["layout"]
    shown = numbers([[t.get("x"), t.get("y")] for t in plotted["data"]]
                    + [[a.get("x"), a.get("y")] for a in layout.get("annotations", [])]
                    + [[v.get("range"), v.get("tickvals")] for k, v in layout.items()
                       if k.startswith(("xaxis", "yaxis"))])
    assert not values & {round(v, 6) for v in shown}, f"#{chart} plots a value before the guess"
    for trace in plotted["data"]:
        assert set(trace.get("y", [])) <= {0.5, None}, (chart, trace.get("name"))  # flat
        assert not {"customdata", "hovertemplate", "hovertext", "text"} & trace.keys(), chart
        assert trace.get("hoverinfo") == "skip", chart
    answer = page.locator(f"#step-{step} form.predict-form").get_attribute("data-answer")
    if answer:
        assert answer.replace(",", "") not in json.dumps(plotted).replace(",", ""), answer
    assert page.evaluate(f"() => document.getElementById('{chart}')._fullLayout.hovermode") \
        is False
    assert page.locator(f"#{chart} .ytick").count() == 0  # the value axis: no ticks
    assert not hover_everywhere(page, chart), f"#{chart} hovers a value before the guess"
    assert page.locator(f"#{chart}").get_attribute("data-veiled") is not None

    # The step's guess, then those of the other steps that own a part of the chart (EP06's
    # cost: step 7's attention line; test_each_step_lifts_only_its_own_part below).
    owners = [int(key.removeprefix("step-"))
              for g in real["layout"]["meta"].get("owners", []) for key in g["step"].split()]
    for guessed in [step] + [s for s in owners if s != step]:
        commit_guess(page, guessed)
    page.wait_for_function(f"() => !document.getElementById('{chart}').hasAttribute('data-veiled')")
    after = json.loads(page.evaluate(PLOTTED, chart))
    for drawn, given in zip(after["data"], real["data"], strict=True):
        assert drawn.get("y") == given.get("y") and drawn.get("x") == given.get("x"), chart
    assert page.evaluate(f"() => document.getElementById('{chart}')._fullLayout.hovermode") \
        is not False
    assert page.locator(f"#{chart} .ytick").count() > 0


def point(page) -> None:
    """The mouse on the last bar's middle (plotly's drag layer above it takes the events)."""
    box = page.locator("#cp-pairs .bars .point path").last.bounding_box()
    assert box
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)


def test_the_pairs_hover_comes_back_with_the_guess(page, live_server):
    """Hovering EP06's last bar at 64 tokens over CP 8: nothing before step 2's guess, its
    pairs after it."""
    last = api_json(live_server, "cp", "tokens=64&cp=8")["ranks"][7]["causal_pairs"]
    page.goto(f"{EP06}?tokens=64&cp=8")
    wait_drawn(page)
    look_at(page, "cp-pairs")
    assert page.evaluate(HOVER, "cp-pairs") == 0
    point(page)
    assert page.evaluate(HOVER, "cp-pairs") == 0
    page.locator("#step-2 .predict-beat > details.why > summary").click()  # "show me"
    page.wait_for_function("() => !document.getElementById('cp-pairs').hasAttribute('data-veiled')")
    page.mouse.move(0, 0)
    point(page)
    page.wait_for_function(f"() => ({HOVER})('cp-pairs') > 0")
    assert f"{last:,}" in page.locator("#cp-pairs .hoverlayer").text_content()


# The state step 7's prediction is about (its try link), where step 6's guess drew the
# attention line that answers step 7: 512 tokens a rank on 25 Gb/s Ethernet.
SHORT_ETH = "tokens=64&cp=8&seq_len=4096&layout=zigzag&link=eth-25g"
VEILED = "(id) => document.getElementById(id).getAttribute('data-veiled')"
# What plotly keeps of the chart's meta (devtools show it: round-9 cold reading of EP09, item 7).
META = "(id) => JSON.stringify(document.getElementById(id).layout.meta || {})"


@pytest.mark.parametrize("order", [(4, 7), (7, 4)], ids=["4-then-7", "7-then-4"])
def test_each_step_lifts_only_its_own_part(page, live_server, order):
    """EP06's cost chart answers two steps: step 4 asks for the bytes the collectives send
    (their lines, the plan's mark and label; step 6 for a model without grouped-query
    attention, 255c619), step 7 whether the ring's sends hide behind
    attention (the attention line). The first guess lifted the whole chart, so at step 7's
    state step 6's guess drew the attention line, its hover and its figure in the caption
    before step 7 was guessed. Each part now waits for its own step's guess, in either
    order: until then no value of it in gd.data or gd.layout, no hover, no caption figure."""
    chart = "cp-cost"
    api = api_json(live_server, "cp", SHORT_ETH)
    page.goto(f"{EP06}?{SHORT_ETH}")
    wait_drawn(page)
    look_at(page, chart)
    real = json.loads(page.evaluate(FIGURE, chart))
    groups = {int(g["step"].removeprefix("step-")): g for g in real["layout"]["meta"]["owners"]}
    assert sorted(groups) == [4, 7]
    # Step 7's line is the attention's, at this state's time (the table's figure).
    attention = real["data"][groups[7]["traces"][0]]
    assert round(api["attention_s"] * 1e3, 6) in attention["y"], attention["name"]
    assert page.evaluate(VEILED, chart) == ""  # veiled whole before either guess
    caption = page.locator(f".chart-summary[data-chart={chart}]")
    first, second = order
    commit_guess(page, first)
    page.wait_for_function(f"() => ({VEILED})('{chart}') !== ''")  # no longer veiled whole
    look_at(page, chart)
    plotted = json.loads(page.evaluate(PLOTTED, chart))
    hidden = groups[second]
    shown = {round(v, 6) for v in numbers(plotted)}
    for i, (drawn, given) in enumerate(zip(plotted["data"], real["data"], strict=True)):
        if i in hidden["traces"]:  # the step still to guess: a legend entry, no value
            values = {round(v, 6) for v in numbers([given.get("y")])}
            assert values and not values & shown, f"{given['name']} plotted before its guess"
            assert drawn["y"] == [None] and drawn.get("hoverinfo") == "skip", given["name"]
            assert not {"customdata", "hovertemplate", "text"} & drawn.keys(), given["name"]
        else:  # the step guessed: its traces real
            assert drawn.get("y") == given.get("y") and drawn.get("x") == given.get("x"), i
    assert page.evaluate(VEILED, chart) == f"step-{second}"
    part, mask = hidden["summary"]
    assert part not in page.locator(f"#{chart}").get_attribute("aria-label")
    assert part not in caption.inner_text() and mask in caption.inner_text()
    hovers = hover_everywhere(page, chart)
    if second == 7:  # the collectives hover; attention does not
        assert "per GPU" in hovers and "attention" not in hovers, hovers
        assert f"{api['exposed_s'] * 1e3:.3g} ms" not in page.locator("#bench-view").inner_text()
    else:  # attention hovers; the collectives' bytes do not
        assert "attention at CP" in hovers and "per GPU" not in hovers, hovers
        assert f"{api['comm_bytes_per_gpu'] / 1e6:.3g} MB" not in json.dumps(plotted)
    commit_guess(page, second)
    page.wait_for_function(f"() => !document.getElementById('{chart}').hasAttribute('data-veiled')")
    after = json.loads(page.evaluate(PLOTTED, chart))
    for drawn, given in zip(after["data"], real["data"], strict=True):
        for key in ("x", "y", "customdata", "hovertemplate"):
            assert drawn.get(key) == given.get(key), (given["name"], key)
    assert hidden["summary"][0] in caption.inner_text()


def test_ep06s_crossover_waits_for_step_7s_guess_too(page, live_server):
    """EP06 step 8's crossover chart at step 7's state (512 tokens a rank on 25 Gb/s Ethernet,
    which the bench's controls reach before any guess) gives step 7's answer: attention ÷
    communication on its label and the bench. Step 8's guess alone lifted it; it
    now waits for step 7's too (one owner keyed to both steps), its bench figures as well."""
    chart = "cp-crossover"
    ratio = api_json(live_server, "cp", SHORT_ETH)["crossover"]["ratio"]
    page.goto(f"{EP06}?{SHORT_ETH}")
    wait_drawn(page)
    commit_guess(page, 8)
    look_at(page, chart)
    caption = page.locator(f".chart-summary[data-chart={chart}]")
    bench = page.locator("#bench-view")
    assert page.evaluate(VEILED, chart) == ""  # veiled whole
    assert "steps 7 and 8" in caption.inner_text()
    assert f"= {ratio:.3g}." not in bench.inner_text()
    assert f"communication = {ratio:.3g}" not in page.evaluate(PLOTTED, chart)
    assert not hover_everywhere(page, chart)
    commit_guess(page, 7)
    page.wait_for_function(f"() => !document.getElementById('{chart}').hasAttribute('data-veiled')")
    assert f"= {ratio:.3g}." in bench.inner_text()
    assert f"communication = {ratio:.3g}" in page.evaluate(PLOTTED, chart)


EP09 = "/episodes/rl-placement"
# Step 4's state (GLM-4.7 colocated) and step 8's (GLM-4-9B's training pool on 16 GPUs).
GLM47, GLM9_16 = "preset=glm-4.7", "preset=glm-4-9b&placement=separate&train_gpus=16"


def values_of(traces) -> set[float]:
    return {round(v, 6) for t in traces for v in numbers([t.get("y")]) if v}


def test_ep09s_memory_chart_waits_for_each_steps_guess(page, live_server):
    """EP09's memory chart serves steps 3, 4 and 8, and was not masked: at step 4's state its
    colocated need's bars (weights, gradients, activations, logits, the switch's 1 GB) added up
    to step 4's answer, and at step 8's the training pool's bar gave what step 8 asks comes
    free. Each part now waits for its own step's guess: the need for step 4's (whatever other
    step is guessed first), the training pool for step 8's, after step 4's too. The phases
    the need is built from, which step 4's question states, are drawn from the first screen
    (round-14 cold reading of EP09, finding 7: the chart was grey through steps 1-3)."""
    chart = "placement-memory"
    caption = page.locator(f".chart-summary[data-chart={chart}]")
    need = api_json(live_server, "placement", GLM47)["colocated_bytes"]
    page.goto(f"{EP09}?{GLM47}")
    wait_drawn(page)
    look_at(page, chart)
    real = json.loads(page.evaluate(FIGURE, chart))
    parts = [t for t in real["data"] if t["x"] == ["colocated need"]]
    assert abs(sum(t["y"][0] for t in parts) - need / 1e9) < 0.01  # the answer, in its parts
    answer = page.locator("#step-4 form.predict-form").get_attribute("data-answer") or \
        f"{need / 1e9:.1f} GB"
    need_text = next(g for g in real["layout"]["meta"]["owners"]
                     if g["step"] == "step-4")["summary"][0]
    for guessed in (None, 3, 8):  # nor does another step's guess draw them
        if guessed:
            commit_guess(page, guessed)
        look_at(page, chart)
        plotted = json.loads(page.evaluate(PLOTTED, chart))
        for drawn, given in zip(plotted["data"], real["data"], strict=True):
            if given["x"] == ["colocated need"]:  # the answer's bars: held
                assert drawn["y"] == [None] and drawn.get("hoverinfo") == "skip", guessed
            else:  # the phases step 4 states: drawn
                assert drawn.get("y") == given.get("y"), (given["x"], guessed)
        assert page.evaluate(VEILED, chart) == "step-4", guessed
        assert answer not in caption.inner_text(), guessed
        assert answer not in page.locator(f"#{chart}").get_attribute("aria-label"), guessed
        assert "colocated need" not in hover_everywhere(page, chart), guessed
        assert need_text not in page.evaluate(META, chart), guessed
    groups = {g["step"]: g for g in real["layout"]["meta"]["owners"]}
    assert list(groups) == ["step-4"] and [real["data"][i] for i in groups["step-4"]["traces"]] \
        == parts
    commit_guess(page, 4)
    page.wait_for_function(f"() => !document.getElementById('{chart}').hasAttribute('data-veiled')")
    after = json.loads(page.evaluate(PLOTTED, chart))
    for drawn, given in zip(after["data"], real["data"], strict=True):
        assert drawn.get("y") == given.get("y"), given["name"]
    assert answer in caption.inner_text()

    # Step 8's state: step 4's guess (and step 3's) leaves the training pool hidden.
    api = api_json(live_server, "placement", GLM9_16)
    page.goto(f"{EP09}?{GLM9_16}")
    wait_drawn(page)
    look_at(page, chart)
    real = json.loads(page.evaluate(FIGURE, chart))
    groups = {g["step"]: g for g in real["layout"]["meta"]["owners"]}
    assert sorted(groups) == ["step-3", "step-8"]
    training = [real["data"][i] for i in groups["step-8"]["traces"]]
    assert abs(sum(t["y"][0] for t in training) - api["train_memory_bytes"] / 1e9) < 0.01
    for guessed in (4, 3):
        commit_guess(page, guessed)
    page.wait_for_function(f"() => ({VEILED})('{chart}') === 'step-8'")
    look_at(page, chart)
    plotted = json.loads(page.evaluate(PLOTTED, chart))
    shown = {round(v, 6) for v in numbers(plotted)}
    for i, (drawn, given) in enumerate(zip(plotted["data"], real["data"], strict=True)):
        if i in groups["step-8"]["traces"]:
            assert drawn["y"] == [None] and drawn.get("hoverinfo") == "skip", given["name"]
        else:  # the rollout pool, step 3's: real, at its place
            assert drawn.get("y") == given.get("y"), given["name"]
    assert page.evaluate(f"() => document.getElementById('{chart}')._fullLayout.xaxis.type") \
        == "category"
    bars = f"""() => [...document.querySelectorAll('#{chart} .bars .point path')]
        .filter(p => p.getBBox().height > 0).length"""
    assert page.evaluate(bars) == len(groups["step-3"]["traces"])  # drawn: the rollout's alone
    # The training bars' values the rollout's (step 3's, drawn) do not share: none plotted.
    hidden = values_of(training) - values_of([real["data"][i] for i in groups["step-3"]["traces"]])
    assert hidden and not hidden & shown, hidden & shown
    part, mask = groups["step-8"]["summary"]
    assert part not in caption.inner_text() and mask in caption.inner_text()
    assert part not in page.locator(f"#{chart}").get_attribute("aria-label")
    assert part not in page.evaluate(META, chart) and mask in page.evaluate(META, chart)
    assert "training" not in hover_everywhere(page, chart)
    commit_guess(page, 8)
    page.wait_for_function(f"() => !document.getElementById('{chart}').hasAttribute('data-veiled')")
    assert part in caption.inner_text() and part in page.evaluate(META, chart)


EP10 = "/episodes/low-precision"
# Step 1's guess lifts its part of EP10's ledger; at 8,192 tokens its FP8 activations still
# wait for step 4's (round-17 cold reading of EP10, finding 6).
STEP_1_LIFTED = "(id) => !(document.getElementById(id).getAttribute('data-veiled') || '')" \
                ".split(' ').includes('step-1')"
LEDGER_CELLS = """() => [...document.querySelectorAll(
    "table.ledger[data-chart=precision-ledger] tr[data-component=fp8_weights] td:last-child, "
    + "table.ledger[data-chart=precision-ledger] tr[data-component=scaling_state] td:last-child, "
    + "table.ledger[data-chart=precision-ledger] tr.sub td:last-child")].map(td => td.innerText)"""


def test_ep10s_ledger_keeps_the_fp8_copies_until_step_1s_guess(page, live_server):
    """EP10 opens on FP8 delayed scaling against BF16 and step 1 asks whether an FP8 recipe
    keeps more or fewer than BF16's 16 bytes a parameter. The ledger beside the veiled bytes
    chart drew, hovered and tabled "FP8 weight copies 2.01 GB" next to 2.01 GB of 16-bit
    weights (and its FP8 weights and transposes, 1.00 GB each): 16 + 2 = 18 read before the
    guess. Those parts now wait for step 1's guess; the rest of the ledger stays drawn."""
    chart = "precision-ledger"
    caption = page.locator(f".chart-summary[data-chart={chart}]")
    ledger = api_json(live_server, "precision")["ledger"]
    page.goto(EP10)
    wait_drawn(page)
    look_at(page, chart)
    real = json.loads(page.evaluate(FIGURE, chart))
    owners = real["layout"]["meta"]["owners"]
    # The FP8 activations wait for step 4 at 8,192 tokens (round-17 cold reading of EP10,
    # finding 6: a quarter of its answer).
    assert [g["step"] for g in owners] == ["step-1", "step-4"]
    acts = owners[1]["points"]
    copies = [real["data"][i] for i in owners[0]["traces"]]
    assert {t["name"] for t in copies} == {"FP8 weight copies", "Scales and amax history"}
    fp8 = next(t for t in copies if t["name"] == "FP8 weight copies")
    assert abs(fp8["y"][-1] - ledger["parts"]["fp8_weights"] / 1e9) < 1e-3
    figures = [t["customdata"][-1] for t in copies]  # 1.74 GB and the scales'
    sub = [fmt_bytes(c["bytes"]) for c in ledger["copies"]]
    # 1 B for each of the 8B's linear-layer parameters over FSDP's 8 GPUs, each copy (round-17
    # cold reading of EP10, finding 5: not of the embedding, head and norms).
    one = fmt_bytes(linear_weight_params(get_model("llama-3.1-8b")) / 8)
    assert sub == [one, one], sub
    assert page.evaluate(VEILED, chart) == "step-1 step-4"
    plotted = json.loads(page.evaluate(PLOTTED, chart))
    for i, (drawn, given) in enumerate(zip(plotted["data"], real["data"], strict=True)):
        if [i, 1] in acts:
            assert drawn["y"] == [given["y"][0], None], given["name"]
        elif i in owners[0]["traces"]:
            assert drawn["y"] == [None] and drawn.get("hoverinfo") == "skip", given["name"]
            # Not its name: "FP8 weight copies" says what FP8 keeps besides BF16's 16 bytes
            # (round-11 cold reading of EP09-EP10, finding 3).
            assert drawn["name"] == "? (step 1)", given["name"]
            assert "customdata" not in drawn and "text" not in drawn
        elif [i, 1] in owners[0]["points"]:  # FP8's state: BF16's bar drawn, FP8's not
            assert drawn["y"] == [given["y"][0], None], given["name"]
        else:  # the rest of the ledger: real, at its place
            assert drawn.get("y") == given.get("y"), given["name"]
    text = page.locator("body").inner_text()
    hover = hover_everywhere(page, chart)
    assert hover and "FP8 weight copies" not in hover and "Scales" not in hover, hover
    assert page.evaluate(LEDGER_CELLS) == ["?"] * 4
    assert one not in text
    label = page.locator(f"#{chart}").get_attribute("aria-label")
    for figure in (*figures, *sub):
        assert figure not in caption.inner_text() and figure not in label, figure
    commit_guess(page, 1)
    page.wait_for_function(STEP_1_LIFTED, arg=chart)
    after = json.loads(page.evaluate(PLOTTED, chart))
    for i, (drawn, given) in enumerate(zip(after["data"], real["data"], strict=True)):
        if [i, 1] in acts:
            continue  # step 4's
        assert drawn.get("y") == given.get("y"), given["name"]
        assert drawn.get("customdata") == given.get("customdata"), given["name"]  # the hover's
    assert page.evaluate(LEDGER_CELLS) == [figures[0], figures[1], *sub]
    assert one in page.locator("body").inner_text()


# The recipe's state on the ledger, by the chart's names (EP10's table masks each row's FP8
# cell with the recipe's step).
STATE = ("16-bit weights", "Gradients", "FP32 master weights", "Adam moments")


def state_drawn(page, chart: str = "precision-ledger") -> dict[str, list]:
    """Each state trace's bar heights as plotted: [BF16's, the recipe's]."""
    plotted = json.loads(page.evaluate(PLOTTED, chart))
    return {t["name"]: t["y"] for t in plotted["data"] if t["name"] in STATE}


def hover_segments(page, chart: str, real: dict, bar: int) -> list[str]:
    """Hover the middle of each segment of stacked bar ``bar`` where the real figure draws
    it: every hover label raised."""
    box = page.locator(f"#{chart}").bounding_box()
    below, seen = 0.0, []
    for t in real["data"]:
        height = t["y"][bar]
        if not height:
            continue
        x, y = page.evaluate("""([id, i, y]) => { const l = document.getElementById(id)._fullLayout;
            return [l.xaxis._offset + l.xaxis.l2p(i), l.yaxis._offset + l.yaxis.l2p(y)]; }""",
                             [chart, bar, below + height / 2])
        below += height
        page.mouse.move(box["x"] + x, box["y"] + y)
        seen += page.evaluate(HOVERED, chart)
    return seen


def test_ep10s_ledger_hovers_no_fp8_state_before_step_1s_guess(page, live_server):
    """Issue 36 (after d1330f0): with the copies hidden, the FP8 bar still drew its 16-bit
    weights, gradients, master and moments, and hovering them read BF16's figures ("the
    same", a choice step 1 offers). They now wait with the table's masked cells: before the
    guess no hover on the FP8 bar names its state, BF16's bar hovers as before; after it the
    FP8 bar's state is the engine's."""
    chart = "precision-ledger"
    body = api_json(live_server, "precision")
    page.goto(EP10)
    wait_drawn(page)
    look_at(page, chart)
    real = json.loads(page.evaluate(FIGURE, chart))
    fp8 = real["data"][0]["x"][1]
    # A hover label reads the bar's name, then the part: "BF16Gradients: 8.03 GB".
    hover = hover_segments(page, chart, real, 0)
    assert [h for h in hover if h.startswith("BF16") and h[4:].startswith(STATE)], hover
    hover = hover_segments(page, chart, real, 1)
    said = [h for h in hover if h.startswith(fp8) and h[len(fp8):].startswith(STATE)]
    assert hover and not said, hover
    assert all(y[1] is None for y in state_drawn(page).values()), state_drawn(page)
    commit_guess(page, 1)
    page.wait_for_function(STEP_1_LIFTED, arg=chart)
    led = body["ledger"]["parts"]
    drawn = state_drawn(page)
    assert drawn["Gradients"][1] == pytest.approx(led["gradients"] / 1e9, abs=1e-4), drawn


def test_ep10s_ledger_holds_step_5s_state_until_its_guess(page, client, live_server):
    """Issue 36 (after d1330f0): at step 5's state (70B, DeepSeek-V3's recipe, TP 8, ZeRO-1)
    the table masked the recipe's gradients and moments but the chart drew them, 35.3 GB of
    fp32 gradients and 4.41 GB of bf16 moments beside BF16's 17.6 and 8.82 GB: step 5's
    4 + 2 + 2 of its bytes. They now wait for step 5's guess, and no product or quotient of
    two figures on the screen gives its answer."""
    chart = "precision-ledger"
    href = try_href(client, EP10, 5, "DeepSeek")
    query = href.split("?", 1)[1]
    body = api_json(live_server, "precision", query)
    led, answer = body["ledger"]["parts"], body["ledger"]["bytes_per_param"]
    page.goto(href)
    wait_drawn(page)
    look_at(page, chart)
    real = json.loads(page.evaluate(FIGURE, chart))
    assert [g["step"] for g in real["layout"]["meta"]["owners"]] == ["step-5"]
    drawn = state_drawn(page)
    assert set(drawn) == set(STATE) and all(y[1] is None for y in drawn.values()), drawn
    hover = hover_everywhere(page, chart)
    assert f"{led['gradients'] / 1e9:.3g} GB" not in hover, hover
    shown = sorted({v for v, _ in figures_shown(page)} | {
        v * 1e9 for t in json.loads(page.evaluate(PLOTTED, chart))["data"]
        for v in numbers(t.get("y"))})
    shown = [v for v in shown if v > 0]
    assert len(shown) > 10, shown
    # Bytes over bytes, and bytes over the parameters a GPU holds (the model's over TP, and
    # over TP x DP where ZeRO-1 shards), are what reads as bytes a parameter; a product of
    # two GB figures (GB squared) reads as nothing (2.24 x 6.71 = 15.0 is a coincidence). The
    # 70B run is TP 8 (the model over 8) with ZeRO-1 over DP 8 (over 64).
    counts = [body["params"] / n for n in (1, 8, 64)]
    made = [(a, b) for a in shown for b in [*shown, *counts] if f"{a / b:.3g}" == f"{answer:.3g}"]
    assert not made, made
    commit_guess(page, 5, value="1")
    page.wait_for_function(f"() => !document.getElementById('{chart}').hasAttribute('data-veiled')")
    drawn = state_drawn(page)
    assert drawn["Gradients"][1] == pytest.approx(led["gradients"] / 1e9, abs=1e-4), drawn
    assert drawn["Adam moments"][1] == pytest.approx(led["optimizer_moments"] / 1e9, abs=1e-4)


# A figure in GB, MB or TB as the page prints it ("56.9 GB", "906 MB").
PRINTED = re.compile(r"(?<![\d.,])(\d{1,3}(?:,\d{3})*(?:\.\d+)?) (TB|GB|MB)(?![A-Za-z])")
SCALE = {"TB": 1e12, "GB": 1e9, "MB": 1e6}
# Every figure the screen shows: the page's visible text (a select's list of GPUs aside: a
# closed select shows its choice), and what each chart plots as text (its hover's custom
# data, its labels).
SHOWN = """() => {
    const selects = [...document.querySelectorAll('select')];
    selects.forEach(s => { s.style.display = 'none'; });
    const text = document.body.innerText;
    selects.forEach(s => { s.style.display = ''; });
    return [text, ...[...document.querySelectorAll('.js-plotly-plot')].map(gd => JSON.stringify(
        [gd.data.map(t => [t.customdata, t.text, t.name]),
         (gd.layout.annotations || []).map(a => a.text)]))].join(' ');
}"""


def figures_shown(page) -> set[tuple[float, float]]:
    """Each figure on the screen in bytes, with half its last printed place (56.9 GB: 0.05 GB)."""
    for chart in ("precision-ledger", "precision-bytes", "precision-speed",
                  "precision-finetune", "precision-offload"):
        look_at(page, chart)
    found = set()
    for number, unit in PRINTED.findall(page.evaluate(SHOWN)):
        places = len(number.split(".")[1]) if "." in number else 0
        found.add((float(number.replace(",", "")) * SCALE[unit], SCALE[unit] * 10 ** -places / 2))
    return found


def differences(found, growth: float) -> list[str]:
    """Pairs of figures whose difference is ``growth`` to their printed places, where those
    places give it to within 5% (7.52 - 5.51 GB: 2.01 give or take 0.01): "48 GB" (step 11's
    GPU) less "46.8 GB" (the QLoRA bar), 1.2 GB give or take 0.55, or 46.8 less 45.0 GB,
    1.8 give or take 0.1, read as no 1.75 GB growth (round 17: FP8's copies on the linear
    layers alone made those match by chance). A printed 0 is exactly 0."""
    found = {(v, 0.0 if v == 0 else d) for v, d in found}
    return [f"{a / 1e9:g} GB - {b / 1e9:g} GB" for a, da in found for b, db in found
            if a != b and abs(a - b - growth) <= da + db <= 0.05 * growth]


def test_ep10s_opening_screen_does_not_subtract_to_step_1s_state_growth(page, live_server):
    """EP10 opened on "FP8 delayed scaling: 51.4 GB per GPU, 5.51 GB less than BF16's 56.9 GB",
    beside the activations it saves in FP8 (7.52 GB): 7.52 - 5.51 = 2.01 GB is the state FP8
    adds, the copies step 1 asks about (round-9 cold reading of EP09-EP10, finding 9). Its
    total waits for step 1's guess as its copies do, so before it no two figures on the screen
    differ by that growth; after it they do, and step 1's why says why the total fell."""
    body = api_json(live_server, "precision")
    led, base = body["ledger"]["parts"], body["baseline"]["parts"]
    growth = led["fp8_weights"] + led["scaling_state"]
    saved = base["activations"] - led["activations"] - led["activations_fp8"]
    assert body["extra_bytes"] == pytest.approx(growth - saved, rel=1e-9)  # all that moves
    page.goto(EP10)
    wait_drawn(page)
    # BF16's own state, P x 2, 4 and 8 bytes in both columns, differs by P x 2 B whatever FP8
    # adds (master weights less gradients): those rows are what the question states.
    state = {f"{base[k] / 1e9:.3g}" for k in ("weights", "gradients", "master_weights",
                                              "optimizer_moments")}
    def own(found):
        return {(v, d) for v, d in found if f"{v / 1e9:.3g}" not in state}

    before = own(figures_shown(page))
    assert len(before) > 10, before  # the ledger's activations, the fine-tunes, the offload
    assert not differences(before, growth), differences(before, growth)
    commit_guess(page, 1)
    wait_drawn(page)
    # Round 19 (cold reading Z, finding 9): step 1 quotes the ledger's FP8-copies row and the
    # scales apart, not their sum (1.75 GB beside the row's 1.74).
    why = page.locator("#why-precision-1").inner_text()
    assert (f"The state grew by 2 bytes a linear-layer parameter: "
            f"{led['fp8_weights'] / 1e9:.3g} GB of FP8 copies") in why, why
    assert differences({(0.0, 0.0), (growth, 0.0)}, growth)  # the check finds such a pair


def test_ep02s_ethernet_curves_wait_for_step_3s_guess(page, live_server):
    """Round-12 cold reading of EP02, finding 11: the opening scaling chart (8 GPUs on
    NVLink) drew the Ethernet curve to 1,024 GPUs, its hover at 64 GPUs "19.68×, 30.7%":
    what step 3 asks is left of the speedup over one 100 Gb/s port a server. The Ethernet
    traces now wait for step 3's guess (layout.meta.owners, partly: the other links stay)."""
    chart = "dp-scaling"
    bad = api_json(live_server, "dp", "gpus=64&link=eth-100g")
    page.goto("/episodes/data-parallel")
    wait_drawn(page)
    look_at(page, chart)
    real = json.loads(page.evaluate(FIGURE, chart))
    owners = real["layout"]["meta"]["owners"]
    assert {g["step"] for g in owners} == {"step-3"}
    eth = next(g["traces"] for g in owners if g["traces"])
    assert {real["data"][i]["legendgroup"] for i in eth} == {"eth-100g"}
    # Round-20 cold reading P, finding 5 (671c560): InfiniBand's points past 8 GPUs (one port
    # a server: step 3's answer) wait for the same guess, the rest of its curve drawn.
    held = {tuple(p) for g in owners for p in g.get("points", ())}
    assert held and {real["data"][t]["legendgroup"] for t, _ in held} == {"ib-ndr"}
    speed = next(real["data"][i] for i in eth if real["data"][i]["yaxis"] == "y")
    assert speed["y"][speed["x"].index(64)] == pytest.approx(bad["speedup"], abs=1e-3)
    assert set(page.evaluate(VEILED, chart).split()) == {"step-3"}
    plotted = json.loads(page.evaluate(PLOTTED, chart))
    for i, (drawn, given) in enumerate(zip(plotted["data"], real["data"], strict=True)):
        if i in eth:
            assert drawn["y"] == [None] and "customdata" not in drawn, given["name"]
        else:
            assert drawn.get("y") == [None if (i, j) in held else y
                                      for j, y in enumerate(given.get("y"))], given["name"]
    efficiency = f"{100 * bad['efficiency']:.1f}"
    assert efficiency not in hover_everywhere(page, chart)
    caption = page.locator(f".chart-summary[data-chart={chart}]").inner_text()
    assert "Ethernet 100 Gb/s at" not in caption and "after step 3's guess" in caption
    commit_guess(page, 3)
    page.wait_for_function(f"() => !document.getElementById('{chart}').hasAttribute('data-veiled')")
    after = json.loads(page.evaluate(PLOTTED, chart))
    for drawn, given in zip(after["data"], real["data"], strict=True):
        assert drawn.get("y") == given.get("y"), given["name"]
    assert "Ethernet 100 Gb/s at 8 GPUs" in page.locator(
        f".chart-summary[data-chart={chart}]").inner_text()


def test_ep02s_ethernet_bench_waits_for_step_3s_guess(page, live_server):
    """Issue 36 (s46): the bad case (64 GPUs on 100 Gb/s Ethernet, also step 1's try link)
    printed step 3's answer on its bench before the guess: the verdict '19.68× on 64 GPUs:
    30.7% efficiency', the chosen point's label, the time chart's 2,297.9 ms all-reduce and
    the crossover chart's compute ÷ all-reduce. In Chromium none of it is on the screen, in a
    plotted chart or a hover before step 3's guess; after it, the engine's figures are."""
    bad = api_json(live_server, "dp", "gpus=64&link=eth-100g")
    page.goto("/episodes/data-parallel?gpus=64&link=eth-100g")
    wait_drawn(page)
    answer = [f"{bad['speedup']:.2f}", f"{bad['speedup']:.1f}×",
              f"{100 * bad['efficiency']:.1f}%", f"{1e3 * bad['comm_s']:,.1f}"]
    bench = page.locator("#dp-diagram")
    assert not [a for a in answer if a in bench.inner_text()], bench.inner_text()
    for chart in ("dp-scaling", "dp-time", "dp-ratio"):
        look_at(page, chart)
        assert page.evaluate(VEILED, chart) is not None, chart
        plotted = page.evaluate(PLOTTED, chart)
        assert bad["speedup"] not in numbers(json.loads(plotted)), chart
        assert not [a for a in answer if a in plotted + hover_everywhere(page, chart)], chart
    commit_guess(page, 3)
    for chart in ("dp-scaling", "dp-time", "dp-ratio"):
        page.wait_for_function(
            f"() => !document.getElementById('{chart}').hasAttribute('data-veiled')")
    text = bench.inner_text()
    assert f"{bad['speedup']:.2f}× on 64 GPUs: {100 * bad['efficiency']:.1f}% efficiency" in text
    assert f"{1e3 * bad['comm_s']:,.1f} ms" in text
    label = json.loads(page.evaluate(PLOTTED, "dp-scaling"))["layout"]["annotations"][-1]
    assert f"{bad['speedup']:.1f}×" in label["text"], label


def test_ep02s_pcie_crossover_waits_for_step_8s_guess(page, live_server):
    """Issue 36 (s46): step 2's '8 × PCIe' link drew step 8's answer, the crossover T* on
    PCIe (chart label, note, table) and compute ÷ all-reduce beside the tokens. In Chromium
    none is on the screen or plotted before step 8's guess; after it the engine's T* is."""
    pcie = api_json(live_server, "dp", "gpus=8&link=pcie-4")["ratio"]
    t_star = f"{pcie['crossover_tokens']:,.0f}"
    page.goto("/episodes/data-parallel?gpus=8&link=pcie-4")
    wait_drawn(page)
    look_at(page, "dp-ratio")
    assert page.evaluate(VEILED, "dp-ratio") is not None
    shown = page.locator("#dp-diagram").inner_text() + page.evaluate(PLOTTED, "dp-ratio")
    assert t_star not in shown and f"{pcie['ratio']:.3g}" not in shown
    assert pcie["crossover_tokens"] not in numbers(json.loads(page.evaluate(PLOTTED, "dp-ratio")))
    commit_guess(page, 8)
    page.wait_for_function("() => !document.getElementById('dp-ratio').hasAttribute('data-veiled')")
    assert t_star in page.locator("[data-testid=crossover]").inner_text()


# EP10's later steps, each at its own try link (round-13 cold reading of EP10-EP11, findings
# 1-3): (step, its link, the chart its state answers on, what of it waits: "points", the LoRA
# and QLoRA bars' or the FP8 bar's activations, or "whole", the chart veiled).
EP10_LINKS = [
    (4, "The same at 32k tokens", "precision-ledger", "points"),
    (10, "GPT-3 175B", "precision-finetune", "points"),
    (11, "LLaMA 65B, QLoRA", "precision-finetune", "points"),
    (12, "offload everything", "precision-offload", "whole"),
]


@pytest.mark.parametrize("step, link, chart, held", EP10_LINKS)
def test_ep10s_later_steps_links_wait_for_their_guess(page, client, step, link, chart, held):
    """At the state its own try link sets, nothing on the screen (text, tables, what the
    charts plot and hover) prints the step's answer before its guess: step 4's 30.1 GB (FP8's
    activations at 32k tokens), step 10's 18.9M trainable parameters (the fine-tune table,
    the LoRA paper's box, the chart), step 11's 45.2 GB (QLoRA's total) and step 12's 63.7%
    (the offload readout, table and chart), with every step before it guessed. The step's
    guess shows it, the chart drawn."""
    answer = html.unescape(re.search(r'<form class="predict-form"[^>]* data-answer="([^"]*)"',
                                     dict(steps(lesson_html(client, EP10)))[f"step-{step}"])[1])
    page.goto(try_href(client, EP10, step, link))
    wait_drawn(page)
    for earlier in range(1, step):
        commit_guess(page, earlier)
    wait_drawn(page)
    look_at(page, chart)
    meta = json.loads(page.evaluate(META, chart))
    if held == "whole":
        assert page.evaluate(VEILED, chart) == "", meta  # veiled whole
    else:  # the held bars drawn without a value
        held_points = [p for g in meta["owners"] for p in g.get("points", [])
                       if f"step-{step}" in g["step"].split()]
        plotted = json.loads(page.evaluate(PLOTTED, chart))["data"]
        assert held_points and all(plotted[i]["y"][j] is None for i, j in held_points), meta
    assert answer not in page.evaluate(SHOWN), answer
    commit_guess(page, step)
    wait_drawn(page)
    assert answer in page.evaluate(SHOWN), answer
    assert page.evaluate(VEILED, chart) is None, chart


def test_ep06s_crossover_draws_its_attention_side_after_step_7s_guess(page, live_server):
    """Round-15 cold reading of EP06, finding 12's crossover part: the chart stayed veiled whole
    until steps 7 and 8 were both guessed, nothing to look at through step 7. Its hollow lab
    marks and lines are EP06's own answers (the transfers' side gives step 8's L* and, at
    step 7's state, its ratio), so they still wait; after step 7's guess, at step 8's state,
    the attention side is drawn (its line ∝ L², the lab's compute marks, this state's point)
    and the transfers, L* and the state's ratio wait for step 8's."""
    chart, query = "cp-crossover", "tokens=64&cp=8&seq_len=131072&layout=zigzag&link=ib-ndr"
    cross = api_json(live_server, "cp", query)["crossover"]
    page.goto(f"{EP06}?{query}")
    wait_drawn(page)
    commit_guess(page, 7)
    look_at(page, chart)
    plotted = json.loads(page.evaluate(PLOTTED, chart))
    # By position: a waiting trace's legend name is its short one (layout.meta.names).
    drawn = [[y for y in t["y"] if y is not None] for t in plotted["data"]]
    real = {t["name"]: (i, t["y"])
            for i, t in enumerate(json.loads(page.evaluate(FIGURE, chart))["data"])}
    # A ring's lines are per round (round-24 cold reading A, finding 1).
    for name in ("A round ∝ L²", "Lab: attention", "This state"):
        assert drawn[real[name][0]] == real[name][1], name
    for name in ("Lab: transfers", "A K/V send ∝ L"):
        assert drawn[real[name][0]] == [], name
    notes = " ".join(a["text"] for a in plotted["layout"].get("annotations", []))
    assert f"{cross['crossover']:,.0f}" not in notes and "L* = ?" in notes
    assert "communication = ?" in notes and f"{cross['ratio']:.3g}" not in notes
    commit_guess(page, 8)
    page.wait_for_function(f"() => !document.getElementById('{chart}').hasAttribute('data-veiled')")
    notes = " ".join(a["text"] for a in json.loads(page.evaluate(PLOTTED, chart))["layout"]
                     ["annotations"])
    assert f"L* = {cross['crossover']:,.0f}" in notes
