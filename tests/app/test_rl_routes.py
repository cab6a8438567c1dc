"""EP09 routes in-process: /api/placement fields and figures, recipes, 422s, page and fragment."""

import re
from html import unescape

import pytest

from app.charts.units import fmt_gb2
from app.routers.rl_lesson import busiest, facts, train_sum
from labs.hardware.gpus import GPUS
from tests.app.test_parser import api_messages
from tests.labs.test_rl import TABLE  # the curriculum's recipe table


@pytest.mark.parametrize("preset", list(TABLE))
@pytest.mark.parametrize("placement", ["colocated", "separate", "separate-pd"])
def test_every_preset_passes_every_check(client, preset, placement):
    body = client.get("/api/placement", params={"preset": preset, "placement": placement}).json()
    n, tp, pp, cp, ep, e = TABLE[preset]
    assert (body["train_gpus"], body["tp"], body["pp"], body["cp"], body["ep"],
            body["engine_gpus"]) == (n, tp, pp, cp, ep, e)
    assert all(c["ok"] for c in body["checks"]), [c for c in body["checks"] if not c["ok"]]
    assert body["all_ok"] is True
    for pool in body["pools"]:
        assert {"role", "gpus", "memory_per_gpu_bytes", "fits"} <= set(pool) and pool["fits"]
    roles = [g["role"] for g in body["gpus"]]
    assert len(roles) % 8 == 0  # whole nodes
    in_pools = sum(p["gpus"] for p in body["pools"])
    assert in_pools + roles.count("idle") == len(roles)
    for phase in body["timeline"]:
        assert 0 <= phase["start"] <= phase["end"]
    if placement == "colocated":
        (pool,) = body["pools"]
        assert pool["memory_per_gpu_bytes"] == pytest.approx(
            max(body["train_memory_bytes"], body["rollout_memory_bytes"])
            + body["transition_overhead_bytes"], abs=2)


def test_stand_in_presets_say_so(client):
    for preset, stand_in in (("glm-5.3", True), ("qwen3.8-27b", True), ("glm-4.7", False)):
        body = client.get("/api/placement", params={"preset": preset}).json()
        assert body["stand_in"] is stand_in
        assert any(n.startswith("stand-in shape") for n in body["notes"]) is stand_in
    html = client.get("/episodes/rl-placement", params={"preset": "glm-5.3"}).text
    assert "Stand-in shape" in html


def test_recipes_list_the_six_rows_with_sources(client):
    rows = client.get("/api/presets/recipes").json()
    assert [r["id"] for r in rows] == list(TABLE)
    for r in rows:
        assert (r["train_gpus"], r["tp"], r["pp"], r["cp"], r["ep"], r["engine_gpus"]) == \
            TABLE[r["id"]]
        assert r["source"]
    assert "curriculum" in rows[3]["source"] and "slime" in rows[4]["source"]


def test_overrides_break_the_recipe_where_it_fails(client):
    body = client.get("/api/placement", params={"preset": "glm-4.7", "train_gpus": 60,
                                                "placement": "separate"}).json()
    failed = {c["name"] for c in body["checks"] if not c["ok"]}
    assert {"world size", "expert grouping"} <= failed
    assert [g["role"] for g in body["gpus"]].count("unplaced") == 60
    assert body["pools"][0]["memory_per_gpu_bytes"] is None


@pytest.mark.parametrize(("params", "field"), [
    ({"preset": "gpt-9"}, "preset"), ({"placement": "mixed"}, "placement"),
    ({"train_gpus": 0}, "train_gpus"), ({"tp": 0}, "tp"), ({"engine_gpus": "two"}, "engine_gpus"),
    ({"response_len": 10**7}, "response_len"), ({"kv_dtype": "int3"}, "kv_dtype"),
    ({"gpu": "tpu"}, "gpu"), ({"prompts": 0}, "prompts"), ({"model": "gpt-9"}, "model"),
    ({"train_gpus": 2048, "placement": "separate", "engines": 1024, "engine_gpus": 64},
     "engines"),
])
def test_bad_input_is_a_422_naming_the_field(client, params, field):
    assert set(api_messages(client, "placement", params)) == {field}


def test_page_and_fragment(client):
    html = client.get("/episodes/rl-placement", params={"preset": "deepseek-r1",
                                                        "placement": "separate"}).text
    assert re.search(r'<option value="deepseek-r1"\s+selected', html)
    for chart in ("placement-cluster", "placement-memory", "placement-timeline"):
        assert f'data-target="{chart}"' in html
    assert 'data-check="world size" data-ok="true"' in html
    fragment = client.get("/episodes/rl-placement", params={"placement": "separate-pd"},
                          headers={"HX-Request": "true"}).text
    assert 'id="placement-diagram"' in fragment
    assert 'data-placement="separate-pd"' in fragment and "<html" not in fragment


def test_step_8_teaches_what_doubling_dp_frees_from_the_numbers_it_shows(client):
    """Issue 36: step 8 said 'more GPUs add replicas, not headroom' above a table showing
    43.5 -> 36.5 GB (GLM-4-9B, Adam on the GPU, its distributed optimizer sharded over DP).
    Now it says only the optimizer state shrinks, and only where it is on the GPU."""
    f = facts()
    gpu_adam, gpu_adam_16 = f["glm9"]["result"], f["glm9_16"]["result"]
    assert gpu_adam_16.train_memory_bytes < gpu_adam.train_memory_bytes - 5e9
    freed = {k: gpu_adam.train_breakdown[k] - gpu_adam_16.train_breakdown[k]
             for k in gpu_adam.train_breakdown}
    assert freed["optimizer_moments"] > 0 and freed["weights"] == freed["activations"] == 0
    cpu_adam, cpu_adam_128 = f["glm47"]["result"], f["glm47_128"]["result"]
    assert cpu_adam.train_memory_bytes == cpu_adam_128.train_memory_bytes
    html = re.sub(r"\s+", " ", client.get("/episodes/rl-placement").text)
    step = html[html.index('id="step-8"'):html.index('id="step-9"')]
    assert "not headroom" not in step and "Only the optimizer state shrinks" in step
    six = html[html.index('id="step-6"'):html.index('id="step-7"')]
    assert "every rollout GPU receives the full bf16 weights" not in six
    assert "as slime runs it" in six and "not a requirement" in six


def test_every_gpu_of_the_list_times_a_rollout(client):
    """The rollout's decode reads the GPU preset's HBM bandwidth: the H800, offered in the GPU
    list, was refused once (EP09 kept its own table without it; issue 31)."""
    from labs.hardware.gpus import gpus

    for gpu_id in gpus():
        got = client.get("/api/placement", params={"gpu": gpu_id})
        assert got.status_code == 200, (gpu_id, got.text[:200])
    h100, h800 = (client.get("/api/placement", params={"gpu": g}).json()
                  for g in ("h100-sxm", "h800"))
    # Same HBM3 and compute: the same rollout; the H800's slower NVLink only moves the sync.
    assert h800["rollout_seconds"] == pytest.approx(h100["rollout_seconds"])


def test_round_2_cold_reading_ep09(client):
    """EP09's second cold reading: step 6 names the sync's rates (NDR's busBW 48 GB/s, not
    the datasheet's 50; NVLink's 367.6 GB/s and the PCIe switch), and each figure follows from
    them; step 1 asks DeepSeek-R1's DP, which the bench (open at GLM-4-9B) does not print;
    step 9 states GLM-5.3's degrees; the check table and the bad case's caption no longer give
    steps 8 and 7 their answers."""
    from html import unescape

    f = facts()
    page = client.get("/episodes/rl-placement").text
    page = re.sub(r'<span class="term-tip".*?</span>', "", page)  # the glossary's tips
    html = re.sub(r"\s+", " ", unescape(re.sub(r"<(?!section)[^>]+>", "", page)))
    six = html[html.index('id="step-6"'):html.index('id="step-7"')]
    sep, col = f["r1_sep"]["api"], f["r1"]["api"]
    assert sep["sync_rate"] == 48e9 and "at the bus bandwidth, 48 GB/s" in six
    # round 25 (reading F, finding 2): 1.342 TB / 48 GB/s = 27.96 s, as the step adds it
    assert f"{sep['sync_bytes_per_gpu'] / 48e9:.2f} s (not a requirement" in six
    gather = col["sync_bytes_per_gpu"] / col["sync_rate"]
    assert f"{col['sync_rate'] / 1e9:.1f} GB/s" in six and f"{gather:.2f} s" in six
    assert f"{col['sync_switch_seconds']:.2f} s" in six
    assert col["sync_seconds"] == pytest.approx(gather + col["sync_switch_seconds"])
    one = html[html.index('id="step-1"'):html.index('id="step-2"')]
    assert "DeepSeek-R1's recipe trains on 128 GPUs with TP 8, PP 4, CP 4" in one
    nine = html[html.index('id="step-9"'):]
    g53 = f["glm53"]["api"]
    assert f"TP {g53['tp']}, PP {g53['pp']}, CP {g53['cp']}, EP {g53['ep']}" in nine
    default = client.get("/api/placement").json()
    (check,) = [c for c in default["checks"] if c["name"] == "more GPUs add replicas"]
    assert "GB" not in check["detail"]
    bench = html[:html.index('id="step-1"')]
    assert "do not divide" not in bench and "= 64" not in bench


def test_step_4_drill_builds_a_phase_on_a_published_model_and_step_9_asks_what_a_stand_in_keeps(
        client):
    """Round-2 cold reading, item 9, and the first reading's item 14: step 4's derive drill
    gave both bills and asked for max + 1 GB (reading the why above it), on a stand-in model
    (Qwen3.8-27B). It now asks DeepSeek-R1 served by engines of 32 GPUs: the student builds
    the serving bill as step 3 does (671B x 2 B / 32 = 41.9 GB of weights, 0.18 GB of cache,
    0.49 GB of workspace: 42.6 GB), and it, not training's 35.3 GB, is the larger phase, so
    'training + 1 GB' is wrong. Step 9 no longer asks a stand-in's figure: it asks which of
    them hold whatever the shape (the replica count), and says the rest is the guessed part."""
    from app.routers.rl import DRILL_STATE, VIEW, T

    drill = next(d for d in VIEW.drills if d.id == "placement-colocated-r1")
    body = client.get("/api/placement", params=DRILL_STATE).json()
    sep = client.get("/api/placement", params={**DRILL_STATE, "placement": "separate"}).json()
    assert body["stand_in"] is False
    serve = next(p for p in sep["pools"] if p["role"] == "rollout")["breakdown"]
    assert T["weights"] == pytest.approx(serve["weights"], rel=1e-9)
    assert T["cache"] == pytest.approx(serve["kv_cache"], rel=1e-9)
    assert T["workspace"] == pytest.approx(serve["workspace"], rel=1e-6)
    assert body["rollout_memory_bytes"] > body["train_memory_bytes"]
    assert drill.answer() * 1e9 == pytest.approx(
        body["rollout_memory_bytes"] + body["transition_overhead_bytes"])
    assert "engines of 32 GPUs" in drill.question
    html = client.get("/episodes/rl-placement").text
    nine = html[html.index('id="step-9"'):]
    form = re.search(r'<form class="predict-form"[^>]*>', nine).group(0)
    assert 'data-right="degrees"' in form
    assert "heads by TP, layers by PP and experts by EP" in re.sub(r"\s+", " ", nine)
    # Round-2 item 5: step 7 asked about the bad case's 60 GPUs, which its button calls bad;
    # it now asks 96, which no caption names.
    seven = html[html.index('id="step-7"'):html.index('id="step-8"')]
    assert 'data-right="64"' in seven and "64 and 96 GPUs" in seven and "60 GPUs" not in seven
    assert not facts()["glm47_96"]["api"]["all_ok"]


def test_round_4_cold_reading_ep09_step_4(client):
    """Round-4 cold reading of EP09. Item 1: step 4's heading ('Colocation needs the larger
    phase, plus the switch') was its predict's right choice; the predict now asks a number on
    GLM-4.7 colocated (36.3 GB training, 24.3 GB rollout a GPU: 37.3 GB), a state the bench
    does not open at, and the heading asks. Item 2: the derive drill's 3% window let 42.6 GB
    (the serving bill without the 1 GB switch) pass; it now takes 0.5%. Item 3: the drill
    names the bf16 serving and the attention data parallelism its cache split assumes."""
    from app.labkit.drills import check_drill
    from app.routers.rl import VIEW, T

    g = client.get("/api/placement", params=facts()["glm47"]["params"]).json()
    assert g["placement"] == "colocated"
    expected = max(g["train_memory_bytes"], g["rollout_memory_bytes"]) \
        + g["transition_overhead_bytes"]
    assert g["colocated_bytes"] == expected
    html = client.get("/episodes/rl-placement").text
    four = re.sub(r"\s+", " ", html[html.index('id="step-4"'):html.index('id="step-5"')])
    heading = re.search(r"<h2>(.*?)</h2>", four).group(1)
    assert "larger" not in heading and "switch" not in heading
    form = re.search(r'<form class="predict-form"[^>]*>', four).group(0)
    answer = f"{expected / 1e9:.1f} GB"
    assert f'data-answer="{answer}"' in form and "data-right" not in form
    prompt = four[four.index("Predict."):four.index("</p>", four.index("Predict."))]
    assert f"{g['train_memory_bytes'] / 1e9:.1f} GB" in prompt
    assert f"{g['rollout_memory_bytes'] / 1e9:.1f} GB" in prompt
    assert answer not in re.sub(r"<[^>]+>", " ", four[:four.index('<details class="why"')])
    assert "offloading the other" not in four

    drill = next(d for d in VIEW.drills if d.id == "placement-colocated-r1")
    right = drill.answer()
    serve, train, switch = T["rollout"] / 1e9, T["train"] / 1e9, T["overhead"] / 1e9
    assert right == pytest.approx(serve + switch)

    def status(given: float) -> str:
        return check_drill(drill, f"{given:.1f}", attempt=1, hide_answers=True)["status"]

    assert status(right) == "right"
    for wrong in (serve, train + switch, serve + train + switch, right - 0.5, right + 0.5):
        assert status(wrong) != "right", wrong
    question = re.sub(r"\s+", " ", drill.question)
    assert "attention data parallelism" in question and "FP8" in question
    assert "8 groups of 4 GPUs" in question  # the engine of 32 keeps R1's --sglang-dp-size 8
    assert "plain TP" in drill.explanation


def test_round_4_item_5_step_7_names_where_its_expert_groups_come_from(client):
    """Round-4 cold reading, item 5: 'and as many expert groups' now says a stage's GPUs over
    EP, the check table's rule: 96 / PP 4 = 24 GPUs a stage, / EP 16 = 1.5."""
    g = client.get("/api/placement", params=facts()["glm47_96"]["params"]).json()
    html = client.get("/episodes/rl-placement").text
    seven = re.sub(r"\s+", " ", html[html.index('id="step-7"'):html.index('id="step-8"')])
    stage = g["train_gpus"] // g["pp"]
    assert f"each stage's {stage} GPUs ÷ EP {g['ep']} = {stage / g['ep']:.1f} expert groups" \
        in seven


def test_round_4_item_7_the_recipe_list_marks_the_stand_ins(client):
    """Round-4 cold reading of EP09, item 7: the Recipe control listed GLM-5.3 and
    Qwen3.8-27B as if published; every stand-in preset's option now says so, no other does."""
    presets = client.get("/api/presets/recipes").json()
    html = client.get("/episodes/rl-placement").text
    select = re.search(r'<select[^>]*name="preset".*?</select>', html, re.S).group(0)
    assert any(p["stand_in"] for p in presets)
    for p in presets:
        option = re.search(rf'<option value="{re.escape(p["id"])}"[^>]*>([^<]*)<', select)
        assert ("stand-in" in option.group(1)) == p["stand_in"], option.group(1)


def test_round_4_item_4_step_9_moves_the_shape_under_the_recipe(client):
    """Round-4 cold reading of EP09, item 4: step 9's links were one stand-in and one published
    model, so no move varied the guessed shape. Its second link now puts DeepSeek-V3's shape
    under GLM-5.3's recipe (the model control: a preset in place of the recipe's): the replica
    count stays, what rests on the shape (memory, heads by TP, the step) moves; the why quotes
    both from /api/placement."""
    from app.routers.rl_lesson import facts

    f = facts()
    a, b = f["glm53"]["api"], f["glm53_v3"]["api"]
    assert f["glm53_v3"]["params"]["model"] == "deepseek-v3" and b["model"] == "deepseek-v3"
    assert a["model"] == "glm-5.3" and a["stand_in"] and not b["stand_in"]
    assert (b["tp"], b["pp"], b["cp"], b["ep"], b["train_gpus"]) == (
        a["tp"], a["pp"], a["cp"], a["ep"], a["train_gpus"])
    assert a["dp"] == b["dp"] == a["train_gpus"] // (a["tp"] * a["pp"] * a["cp"])
    assert b["train_memory_bytes"] != a["train_memory_bytes"]
    assert b["step_seconds"] != a["step_seconds"]
    heads = {c["name"]: c for c in a["checks"]}["heads by TP"]
    assert heads != {c["name"]: c for c in b["checks"]}["heads by TP"]
    html = client.get("/episodes/rl-placement").text
    nine = re.sub(r"<[^>]+>", " ", html[html.index('id="step-9"'):])
    nine = re.sub(r"\s+", " ", nine)
    assert "the same recipe, DeepSeek-V3's shape" in nine
    why = nine.split("Why: show me")[1]
    assert (f"keeps its {b['dp']} replica, while the memory chart moves to "
            f"{b['train_memory_bytes'] / 1e9:.1f} GB") in why
    assert f"{b['step_seconds']:.1f} s against {a['step_seconds']:.1f} s" in why
    # The control: the recipe's own model until a state sets another, then under
    # "more controls", open.
    page = client.get("/episodes/rl-placement", params=f["glm53_v3"]["params"]).text
    assert re.search(r'<option value="deepseek-v3"\s+selected', page)
    assert re.search(r'<details class="more-controls wide" id="more-controls" open>', page)
    plain = client.get("/episodes/rl-placement", params={"preset": "glm-5.3",
                                                         "model": "glm-5.3"}).text
    assert not re.search(r'id="more-controls" open', plain)


def test_round_5b_the_rollout_drill_rejects_doubling_only_the_cache(client):
    """Round-5b cold reading of EP09, item 6: placement-predict-rollout-2x took 17.7 to 19.6 s
    against 18.0 s, so step 6's split with only the cache doubled was marked right. From the
    split the page prints (prefill, weights read, cache read), weights + 2 x (prefill + cache)
    is right; weights + prefill + 2 x cache is not."""
    import re

    from app.labkit.drills import check_drill
    from app.labkit.view import DRILLS

    drill = DRILLS["placement-predict-rollout-2x"][1]
    page = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", client.get(
        "/episodes/rl-placement").text))
    five = page[page.index("Where the rollout's time goes"):]
    split = re.search(r"(\d+\.\d+) \+ (\d+\.\d+) \+ (\d+\.\d+) = (\d+\.\d+) s",
                      five[five.index("The opening state, GLM-4-9B"):])
    prefill, weights, cache = (float(split[i]) for i in (1, 2, 3))
    assert check_drill(drill, f"{weights + 2 * (prefill + cache):.2f}", 1)["status"] == "right"
    assert check_drill(drill, f"{weights + prefill + 2 * cache:.2f}", 1)["status"] != "right"


def test_round_5b_step_4_states_the_switchs_overhead_its_answer_adds(client):
    """Round-5b cold reading of EP09, item 2: step 4's predict gave only the two phases'
    memory (36.3 and 24.3 GB) and revealed 37.3 GB, the larger + the switch's 1 GB, which only
    the why stated. The prompt now states the overhead from the engine, so larger + overhead is
    derivable before the guess."""
    import html
    import re

    raw = client.get("/episodes/rl-placement").text
    step = raw[raw.index('id="step-4"'):raw.index('id="step-5"')]
    prompt = html.unescape(re.search(r'<p class="predict">(.*?)</p>', step, re.S)[1])
    shown = [float(v) for v in re.findall(r"(\d+(?:\.\d+)?) GB", prompt)]
    answer = float(re.search(r'data-answer="([\d.]+) GB"', step)[1])
    train, rollout, overhead = shown
    assert abs(max(train, rollout) + overhead - answer) <= 0.051, (shown, answer)


def test_round_5b_step_6_bounds_how_fast_the_colocated_sync_errs(client):
    """Round-5b cold reading of EP09, item 1: step 6's limit said the colocated sync 'errs
    fast' for R1 (EP 32 over 4 nodes) without saying by how much. It now bounds it from the
    API: the whole gather over the NDR port at the separate sync's rate, and the step that
    gives, against separate pools' step."""
    import html
    import re

    col = client.get("/api/placement", params={"preset": "deepseek-r1"}).json()
    sep = client.get("/api/placement", params={"preset": "deepseek-r1",
                                               "placement": "separate"}).json()
    nvl = col["sync_bytes_per_gpu"] / col["sync_rate"]
    ib = col["sync_bytes_per_gpu"] / sep["sync_rate"]
    worst = col["step_seconds"] - nvl + ib
    page = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", client.get(
        "/episodes/rl-placement").text)))
    assert (f"at {sep['sync_rate'] / 1e9:.0f} GB/s, {ib:.1f} s, not {nvl:.2f} s: a step of "
            f"{worst:.1f} s, still faster than separate pools' {sep['step_seconds']:.1f} s") in page
    assert ib > 5 * nvl and worst < sep["step_seconds"]


def test_round_14_step_6s_guess_draws_the_rollout_and_its_limit_quotes_no_step(client):
    """Round-14 cold reading of EP09: at step 6's link (R1, separate) its guess drew the
    training and the sync but held the rollout, its answer, and the step on step 5's and step
    2's guesses (finding 1); its Limit, shown before the guess, gave both step times, whose
    difference less the table's sync is max(rollout, training) (finding 3). Every time at
    step 6's states now waits for step 6 alone (chart owners and table cells), while step 5's
    own states keep the rollout on step 5; the bound sits in the why."""
    import json

    from app.charts.rl import timeline_keys

    f = facts()
    for name in ("r1", "r1_sep"):
        keys = timeline_keys(f[name]["result"])
        assert set(keys) == {"rollout", "train", "weight_sync", "step"}
        assert all(k == ("step-6",) for k in keys.values()), (name, keys)
        body = client.get("/episodes/rl-placement", params=f[name]["params"]).text
        fig = re.search(r'data-target="placement-timeline"[^>]*>(.*?)</script>', body, re.S)
        owners = json.loads(fig.group(1))["layout"]["meta"]["owners"]
        assert [o["step"] for o in owners] == ["step-6"], owners
        row = re.search(r'<th scope="row">Rollout</th><td><span class="answer-mask" '
                        r'data-after-guess="([^"]+)"', body)
        assert row.group(1) == "step-6"
    for name in ("r1_sep4", "r1_pd"):
        assert timeline_keys(f[name]["result"])["rollout"] == ("step-5",)
    six = _steps(client)[6]
    limit = six[six.index("Limit."):]
    why = six[:six.index("Limit.")]
    step = f"{f['r1_sep']['api']['step_seconds']:.1f} s"
    assert step not in limit and " s," not in limit and step in why


def test_round_6_step_8_derives_the_freed_memory_through_tp(client):
    """Round-6 cold reading of EP09, item 3: step 8's why split GLM-4-9B's 12 B of optimizer
    state a parameter 4 and 8 ways and left out TP 2, so a student following it got 14.1 GB,
    twice the 7.05 GB asked. The prompt now states 9.4B parameters, TP 2 and CP 2; the why
    takes TP's shard first: 12 B x 4.70B = 56.4 GB, / (DP x CP) = 4 -> 14.1 GB, / 8 -> 7.05 GB.
    Its links are separate pools' training GPUs, whose memory the bench shows alone."""
    f = facts()
    b8, b16 = f["glm9_sep"]["result"].train_breakdown, f["glm9_16"]["result"].train_breakdown
    shard = b8["weights"] / 2  # bf16 weights of one TP rank
    api8, api16 = f["glm9_sep"]["api"], f["glm9_16"]["api"]
    assert api8["tp"] == api16["tp"] == 2 and api8["train_gpus"] == 8
    opt8 = b8["master_weights"] + b8["optimizer_moments"]
    opt16 = b16["master_weights"] + b16["optimizer_moments"]
    assert opt8 == pytest.approx(12 * shard / (api8["dp"] * api8["cp"]))
    assert opt16 == pytest.approx(12 * shard / (api16["dp"] * api16["cp"]))
    freed = api8["train_memory_bytes"] - api16["train_memory_bytes"]
    assert freed == pytest.approx(opt8 - opt16)
    html = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", client.get("/episodes/rl-placement").text))
    step = html[html.index("8. More GPUs"):html.index("9. Six recipes")]
    assert "9.4B parameters, TP 2, CP 2" in step
    assert (f"12 B × {shard / 1e9:.2f}B = {12 * shard / 1e9:.1f} GB per TP rank" in step)
    assert f"{opt8 / 1e9:.1f} GB" in step and f"{(opt8 - opt16) / 1e9:.2f} GB comes free" in step


def test_round_6_the_throughput_decide_is_a_size_step_2_did_not_draw(client):
    """Round-6 cold reading of EP09, item 2: the decide's right plan at 16 GPUs was step 2's
    own 8 + 8. At 24 GPUs, four plans. Round-24 cold reading B, finding 16: at 192 samples a
    step (every plan's DP divides them), three times step 2's, the training triples while the
    rollout barely grows: 16 + 8 wins, its training hidden behind the rollout, where 8 + 16's
    training now sets the step; 4 + 20 starves the trainer; each option's feedback quotes its
    pools' times."""
    from app.lesson_drills.rl import DECIDE, DRILLS
    drill = next(d for d in DRILLS if d.id == "placement-decide-throughput")
    judged = {o.key: o for o in drill.judge()}
    assert len(judged) == 4 and [k for k, o in judged.items() if o.right] == ["train-heavy"]

    def plan(train: int, engines: int) -> dict:
        return client.get("/api/placement", params={**DECIDE, "placement": "separate",
                                                     "train_gpus": train,
                                                     "engines": engines}).json()

    best, heavy, starved = plan(16, 4), plan(8, 8), plan(4, 10)
    assert sum(p["gpus"] for p in best["pools"]) == sum(p["gpus"] for p in starved["pools"]) == 24
    assert best["train_seconds"] < best["rollout_seconds"]
    assert heavy["train_seconds"] > heavy["rollout_seconds"]
    assert starved["train_seconds"] > starved["rollout_seconds"]
    assert f"max({heavy['rollout_seconds']:.2f}, {heavy['train_seconds']:.2f})" in \
        judged["rollout-heavy"].why
    steps = client.get("/episodes/rl-placement").text
    assert "24 H100s" not in steps.split('id="drill-placement-decide-throughput"')[0]


def test_round_24_every_throughput_plan_runs_and_its_sums_check(client):
    """Round-24 cold reading B, finding 16: the colocated option trained 64 samples on DP 6, a
    batch slime refuses. Every option's DP now divides the decide's samples, and each step
    its feedback sums checks at the digits printed (max(19.85, 15.65) + 0.39 would print
    20.25)."""
    import re as regex

    from app.labkit.drills import lab_value
    from app.lesson_drills.rl import DECIDE, DRILLS

    drill = next(d for d in DRILLS if d.id == "placement-decide-throughput")
    plans = {"colocated": {"placement": "colocated", "train_gpus": 24, "engines": 12},
             "rollout-heavy": {"placement": "separate", "train_gpus": 8, "engines": 8},
             "train-heavy": {"placement": "separate", "train_gpus": 16, "engines": 4},
             "trainer-starved": {"placement": "separate", "train_gpus": 4, "engines": 10}}
    assert set(plans) == {key for key, _ in drill.choices}
    for key, params in plans.items():
        a = lab_value("placement", {**DECIDE, **params}, lambda answer: answer)
        assert a["samples"] % a["dp"] == 0, key
    for option in drill.judge():
        found = regex.search(r"(?:max\()?([\d.]+),? (?:\+ )?([\d.]+)\)? \+ ([\d.]+) = "
                             r"([\d.]+) s", option.why)
        assert found, option.why
        r, t, y, step = (float(x) for x in found.groups())
        places = len(found[4].partition(".")[2])
        total = (max(r, t) if "max(" in option.why else r + t) + y
        assert round(total, places) == step, option.why


def test_round_6_step_6_says_which_way_its_syncs_err_and_the_checks_read(client):
    """Round-6 cold reading of EP09, items 6, 7 and 11: the PCIe switch at the datasheet's
    64 GB/s and slime's broadcast at the port's full rate both err fast (said, with the
    broadcast's source); the expert-grouping check read 'groups per stage x stage'."""
    html = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", client.get("/episodes/rl-placement").text))
    six = html[html.index("6. A step in time"):html.index("7. ")]
    pcie = client.get("/api/placement", params={"preset": "deepseek-r1"}).json()
    assert f"over {pcie['sync_switch_link']}: (" in six
    assert f"÷ {pcie['sync_switch_rate'] / 1e9:.0f} GB/s" in six
    assert "Both rates are ideals (the datasheet's PCIe; a pipelined broadcast" in six
    assert "update_weights_from_distributed): the lab errs fast" in six
    checks = client.get("/api/placement", params={"preset": "deepseek-r1"}).json()["checks"]
    grouping = next(c for c in checks if c["name"] == "expert grouping")["detail"]
    assert grouping.endswith("= 1 expert-data-parallel rank per stage"), grouping


def _step_places(a: dict) -> int:
    """The places a step's parts print at: the fewest (one at least) at which they add to
    the step as printed (round-26 reading B, finding 3)."""
    from app.routers.rl_lesson import step_places

    return step_places([a[f"{k}_seconds"] for k in ("rollout", "train", "sync")],
                       a["placement"] == "colocated", a["step_seconds"])


def _printed_step(a: dict) -> str:
    """A step's seconds as the page adds its printed parts (``_step_places`` each): rollout +
    training + sync colocated, max(rollout, training) + sync on separate pools (round-21 cold
    reading R, finding 12: the engine's unrounded sum printed 25.09 beside parts adding to
    25.10; round-26 B #3: 27.69 beside the engine's 27.685, now one place, 27.7)."""
    d = _step_places(a)
    r, t, sync = (round(a[f"{k}_seconds"], d) for k in ("rollout", "train", "sync"))
    total = (r + t if a["placement"] == "colocated" else max(r, t)) + sync
    assert f"{total:.{d}f}" == f"{a['step_seconds']:.{d}f}"  # one rounding per figure
    return f"{total:.{d}f}"


def _steps(client) -> dict[int, str]:
    """Each step's text (tags and the glossary's tips stripped, spaces folded), and its raw
    predict form under ``-n`` (its data-answer, data-reveals)."""
    from html import unescape

    page = client.get("/episodes/rl-placement").text
    page = re.sub(r'<span class="term-tip".*?</span>', "", page)
    out = {}
    for n in range(1, 10):
        start = page.index(f'id="step-{n}"')
        end = page.index(f'id="step-{n + 1}"') if n < 9 else len(page)
        raw = page[start:end]
        out[n] = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", raw)))
        form = re.search(r'<form class="predict-form"[^>]*>', raw)
        out[-n] = unescape(form.group(0)) if form else ""
        out[100 + n] = raw
    return out


def test_round_6_step_3_asks_the_busiest_gpus_cache_of_whole_requests(client):
    """Round-6 cold reading of EP09, items 4 and 8, and the serving layout of slime's
    run-deepseek-r1.sh (--sglang-dp-size 8 on engines of 64): step 3 asks the busiest GPU's
    cache as a share of its weights from the inputs it states (8 attention groups of 8 GPUs,
    34.7 GB of bf16 weights a GPU; MLA's 512 + 64 latent, 61 layers, 2 B; 32 requests of
    5,120 tokens). Each group keeps whole requests, ceil(32 / 8) = 4 on the busiest, and
    each of its GPUs their whole latent: 4 x 360 MB = 1.44 GB of 34.7 GB, 4.1% (not the GB,
    which the good case's bench prints). The why builds the 34.7 GB from SGLang's placement
    (not 671B x 2 / 64 = 21.0 GB) and prices plain TP from the same figures."""
    f = facts()["r1_sep"]["api"]
    serve = f["pools"][1]["breakdown"]
    per_token = (512 + 64) * 2 * 61
    assert serve["kv_cache"] == pytest.approx(4 * 5120 * per_token, abs=1)  # 4 requests
    steps = _steps(client)
    three, form = steps[3], steps[-3]
    answer = f"{100 * serve['kv_cache'] / serve['weights']:.1f}%"
    assert answer == "4.1%"
    assert f'data-answer="{answer}"' in form and "data-right" not in form
    prompt = three[three.index("Predict."):three.index("Your guess")]
    for given in ("64 GPUs", "8 groups of 8 GPUs", "34.7 GB of bf16 weights", "32 requests",
                  "5,120 tokens", "512 + 64", "61 layers", "2 bytes"):
        assert given in prompt, given
    assert answer not in prompt and "1.44 GB" not in prompt
    why = three[three.index("Why: show me"):]
    assert f"{per_token / 1e3:.1f} KB a token" in why
    assert f"{5120 * per_token / 1e6:.0f} MB a request" in why and "⌈32 ÷ 8⌉ = 4" in why
    assert f"1.44 GB ÷ 34.7 GB = {answer}." in why
    assert "17.35B × 2 bytes = 34.7 GB" in why and "671B × 2 ÷ 64 = 21.0 GB" in why
    assert f"32 × {5120 * per_token / 1e6:.0f} MB = {32 * 5120 * per_token / 1e9:.1f} GB" in why


def test_round_6_step_5_derives_the_split_and_holds_the_rollouts_parts(client):
    """Round-6 cold reading of EP09, items 5 and 10: step 5 gave 16.6 s against 13.4 s with
    'now 3 engines decode what 4 did', which neither figure derives from; and the rollout's
    parts (GLM-4-9B) and their drill sat in step 6, about DeepSeek-R1's sync. Step 5 now holds
    the parts and the drill, and builds both R1 rollouts from them: prefill + weight reads +
    cache reads for 4 engines; max(prefill, decode) + the KV move for the split, whose 3
    decode engines of 22 requests visit more of the experts (1 - (1 - 8/256)^c)."""
    f = facts()
    four, split = f["r1_sep4"]["api"], f["r1_pd"]["api"]
    a, b = four["rollout_parts"], split["rollout_parts"]
    steps = _steps(client)
    five, six = steps[5], steps[6]
    assert "Where the rollout's time goes" in five and "Where the rollout's time goes" not in six
    assert 'id="drill-placement-predict-rollout-2x"' in steps[105]
    assert "placement-predict-rollout-2x" not in steps[106]
    assert "decode what 4 did" not in five and "GLM-4-9B, separate" not in six
    for parts in (a, b):
        c = int(parts["decode_requests"])
        share = 1 - (1 - 8 / 256) ** c
        assert parts["experts_touched"] == pytest.approx(share)
        assert f"1 − (1 − 8/256) {c} = {100 * share:.1f}%" in five \
            or f"q = {100 * share:.1f}%" in five
    total = f"{four['rollout_seconds']:.3g} s"
    assert (f"{a['prefill_s']:.2f} + {a['decode_weights_s']:.2f} + {a['decode_kv_s']:.2f} = "
            f"{total}") in five
    printed = round(a["prefill_s"], 2) + round(a["decode_weights_s"], 2) \
        + round(a["decode_kv_s"], 2)
    assert f"{printed:.3g} s" == total
    assert (f"max({b['prefill_s']:.2f}, {b['decode_weights_s']:.2f} + {b['decode_kv_s']:.2f}) "
            f"+ {b['kv_move_s']:.4f} = {split['rollout_seconds']:.3g} s") in five
    printed = max(round(b["prefill_s"], 2), round(b["decode_weights_s"], 2)
                  + round(b["decode_kv_s"], 2)) + round(b["kv_move_s"], 4)
    assert f"{printed:.3g}" == f"{split['rollout_seconds']:.3g}"
    assert f"⌈64 ÷ 3⌉ = {int(b['decode_requests'])} requests" in five


def test_round_9_step_3_names_its_experiment_the_labs_and_how_slimes_cache_differs(client):
    """Round-9 cold reading of EP09, item 2: step 3 ran its 64 samples of 5,120 tokens "as
    slime's script runs SGLang", but slime's R1 run generates 128 x 8 = 1,024 samples of up
    to 32,768 tokens, and SGLang reserves --mem-fraction-static (0.7 there) of the GPU for
    cache up front. The step names the experiment as the lab's, says which way the lab errs,
    prices the reserved cache from the page's own weights and links slime's response length,
    whose cache it quotes from the API."""
    sep = facts()["r1_sep"]["api"]["pools"][1]
    long = client.get("/api/placement", params={"preset": "deepseek-r1",
                                                 "placement": "separate",
                                                 "response_len": 32768}).json()["pools"][1]
    b, lb = sep["breakdown"], long["breakdown"]
    three, raw = _steps(client)[3], _steps(client)[103]
    assert "run as slime's script runs SGLang" not in three
    assert "tokens are the lab's: slime's R1 script" in three
    assert "generates 1,024 samples of up to 32,768 response tokens" in three
    assert "Against slime's run the lab errs low on the cache" in three
    # Round 11, finding 4: slime loads R1's FP8 release, so the reserved cache is priced from
    # the FP8 weights, not the bf16 ones. Round 26 B #2: of the free memory at engine start,
    # at most what CUDA gives a process (79.1 GiB), not the driver's 81,559 MiB.
    reserved = 0.7 * GPUS.get("h100-sxm").cuda_memory_gib * 2**30
    fp8 = facts()["r1_sep"]["api"]["serving_weights"]["fp8_bytes"]
    assert f"= {reserved / 1e9:.2f} GB" in three  # round-27 reading B, finding 5: 2 places
    assert (f"FP8 release, {fp8 / 1e9:.2f} GB a GPU (slime loads it), leaves at most "
            f"{reserved / 1e9:.2f} GB − {fp8 / 1e9:.2f} GB = "
            f"{(reserved - fp8) / 1e9:.2f} GB of cache, {(reserved - fp8) / fp8:.1f}× its "
            "weights") in three
    assert f"{(reserved - b['weights']) / 1e9:.1f} GB of cache" not in three
    # Round 26 B #4: the lab's 4 requests at slime's length, named as the lab's, no share of
    # the weights mixing the two premises.
    busiest = round(lb["kv_cache"] / ((512 + 64) * 2 * 61 * (1024 + 32768)))
    assert (f"far more than {busiest} a group (the lab's {busiest} at that length: "
            f"{lb['kv_cache'] / 1e9:.2f} GB )") in three
    assert f"{100 * lb['kv_cache'] / lb['weights']:.1f}% of the weights" not in three
    assert "response_len=32768" in raw and "placement=separate" in raw


def test_round_9_step_3_derives_the_trainers_bill_from_its_heaviest_stage(client):
    """Round-9 cold reading of EP09, item 4: "35.3 GB per GPU: 11.7 GB of bf16 weights,
    23.4 GB of fp32 gradients" rested on a layout no step stated. The step states slime's
    layout and the lab's stage split, and derives the heaviest stage's parameters per GPU
    (experts over EP, the rest over TP) x 2 B, x 4 B, and the host RAM of CPU Adam (12 B,
    sharded as the distributed optimizer shards it), each figure the API's."""
    a = client.get("/api/placement", params={"preset": "deepseek-r1",
                                              "placement": "separate"}).json()
    st, pool = a["train_stage"], a["pools"][0]
    t = pool["breakdown"]
    held = st["dense_params_per_gpu"] + st["expert_params_per_gpu"]
    assert 2 * held == pytest.approx(t["weights"], abs=1)
    assert 4 * held == pytest.approx(t["gradients"], abs=1)
    host = st["host_bytes_per_param"] * (st["expert_params_per_gpu"] / st["expert_shard"]
                                         + st["dense_params_per_gpu"] / st["dense_shard"])
    assert host == pytest.approx(pool["host_bytes_per_gpu"], abs=1)
    assert st["expert_params_per_gpu"] == pytest.approx(st["expert_params"] / a["ep"])
    three = _steps(client)[4]  # a note under step 4's drill since round 11 (finding 8)
    layers = "/".join(str(n) for n in a["stage_layers"])
    assert f"TP 8, PP 4, CP 4, EP 32 on 128 GPUs. The lab splits the 61 layers {layers}" in three
    # Round 25 (reading F, finding 2): the parameters to the places at which each sum redoes
    # (app.routers.rl_lesson.stage_text; test_round_25_the_training_notes_add_up_as_printed).
    from app.routers.rl_lesson import stage_text

    pr = stage_text(a)
    assert float(pr["experts"][:-1]) == pytest.approx(st["expert_params_per_gpu"] / 1e9,
                                                      abs=0.005)
    assert f"{pr['stage']} ÷ 32 = {pr['experts']}" in three
    assert (f"{pr['held']} × 2 B = {fmt_gb2(t['weights'])}, its fp32 gradients × 4 B "
            f"= {fmt_gb2(t['gradients'])}") in three
    assert (f"{st['host_bytes_per_param']} B × ({pr['experts']} ÷ "
            f"{st['expert_shard']} + {pr['rest']} ÷ {st['dense_shard']}) = "
            f"{pool['host_bytes_per_gpu'] / 1e9:.1f} GB a GPU") in three


def test_round_9_step_3_predicts_from_what_it_needs_and_tables_the_weights(client):
    """Round-9 cold reading of EP09, items 5 and 6: the predict ran to about 110 words, the
    why opened on slime's flags and summed seven parameter counts in one paragraph, and the
    limit's "14.3 GB" went unnamed beside an even split it did not give. The predict keeps
    what the answer needs; the flags sit in a "where this comes from" note; the seven parts
    are a table (each the API's); the limit names the (7.13 - 0.93)B x 2 B a step reads of
    what a GPU holds (round 11, finding 2: the embedding is gathered by rows, not read) and
    the even split's figure, naming its 17.1B (finding 11c)."""
    from labs.model.presets import get_model

    a = facts()["r1_sep"]["api"]
    w, e = a["serving_weights"]["params"], a["engine_gpus"]
    steps = _steps(client)
    three, raw = steps[3], steps[103]
    prompt = three[three.index("Predict.") + 8:three.index("Your guess")]
    assert len(prompt.split()) < 90, len(prompt.split())
    assert "70.3 KB a token" in prompt and "slime" not in prompt
    note = re.search(r'<p class="chart-note"><strong>Where this comes from\.</strong>'
                     r"(.*?)</p>", raw, re.S)
    assert note and "--sglang-dp-size 8" in note[1] and "--sglang-enable-dp-lm-head" in note[1]
    why = three[three.index("Why: show me"):]
    # The answer's line and the cache lead, the flags' note after (round 16, finding 10).
    assert why.index("The KV cache") < why.index("Where this comes from")
    table = raw[raw.index('data-testid="r1-serving-weights"'):raw.index("</table>",
                                                                   raw.index("r1-serving"))]
    cells = re.findall(r"<td>([\d.]+)B</td>", table)
    parts = ("routed_experts", "attention", "head", "dense_mlp", "shared_experts", "router",
             "embedding")
    assert cells == [f"{w[k] / 1e9:.2f}" for k in parts] + [f"{sum(w.values()) / 1e9:.2f}"]
    rest = sum(w.values()) - w["routed_experts"]
    dense = get_model("deepseek-r1").dense_params
    # In a why (round 14, finding 9: the limit, shown before the guess, quoted the table's
    # 7.13B and 0.93B); the limit names none of the table's figures. Since round 21 (issue 36,
    # standard 4) what a decode step reads of the table is step 5's, whose rollout it times.
    limit = three[three.index("Limit."):]
    assert "What a decode step reads" not in three
    five = steps[5]
    reads = five[five.index("Why: show me"):five.index("Where this comes from")]
    read = rest - w["embedding"]
    assert (f"which reads what it holds (step 3's table). A GPU holds ({rest / 1e9:.2f} − "
            f"{w['embedding'] / 1e9:.2f})B × 2 B = {2 * read / 1e9:.1f} GB of attention, dense "
            "layers, shared experts and head; of the embedding a step gathers only its tokens' "
            "rows") in reads
    assert f"model's {dense / 1e9:.1f}B of weights outside the routed experts" in reads
    assert f"{dense / 1e9:.1f}B × 2 B ÷ {e} = {2 * dense / e / 1e6:.0f} MB a GPU" in reads
    assert not re.search(r"\d\.\d\dB", limit), limit
    assert f"{2 * read / 1e9:.1f} GB" not in limit


def test_round_9_step_5_times_rs_weight_reads_from_what_each_gpu_holds(client):
    """The decode's weight reads follow the memory chart (issue 36, s45): R1 on 4 engines
    reads, each step, what a GPU holds of attention, dense layers, shared experts and head
    (step 3's table, less the embedding: round 11, finding 2) and the busiest GPU's share of
    its routed experts, at one GPU's rate; step 5 builds the seconds from those figures, each
    the API's."""
    a = client.get("/api/placement", params={"preset": "deepseek-r1", "placement": "separate",
                                              "engines": 4}).json()
    parts, w = a["rollout_parts"], a["serving_weights"]["params"]
    routed = 2 * w["routed_experts"]
    held = 2 * sum(w.values()) - routed - 2 * w["embedding"]
    read = parts["decode_weight_bytes"]
    share = parts["busiest_experts"] / parts["experts_per_gpu"]
    assert read == pytest.approx(held + share * routed, rel=1e-9)
    rate = 0.8 * 3.35e12
    assert parts["decode_weights_s"] == pytest.approx(4096 * read / rate, rel=1e-9)
    five = _steps(client)[5]
    assert (f"= {held / 1e9:.1f} GB of attention, dense layers, shared experts and "
            "head") in five
    assert f"{routed / 1e9:.1f} GB of routed experts (653.9B × 2 B ÷ 64)" in five
    assert (f"{held / 1e9:.1f} GB + {parts['busiest_experts']:.2f}/4 × {routed / 1e9:.1f} GB = "
            f"{read / 1e9:.1f} GB") in five
    assert (f"4,096 × {read / 1e9:.1f} GB ÷ 2.68 TB/s = {parts['decode_weights_s']:.2f} s"
            in five)


def test_round_9_the_r1_drill_calls_the_switchs_gigabyte_an_estimate(client):
    """Round-9 cold reading of EP09, item 8: the drill's "the switch between the phases keeps
    1 GB" had lost step 4's "(the lab's round estimate)", so an expert read the 1 GB as
    measured."""
    from app.routers.rl import VIEW

    drill = next(d for d in VIEW.drills if d.id == "placement-colocated-r1")
    overhead = facts()["r1"]["api"]["transition_overhead_bytes"] / 1e9
    assert f"keeps {overhead:g} GB (the lab's round estimate" in drill.question
    assert "(the lab's round estimate" in _steps(client)[4]


def test_round_9_step_3_says_how_slimes_stage_split_moves_the_trainers_bill(client):
    """The lab splits R1's 61 layers 16/15/15/15 (the first stages one more), while slime's
    run-deepseek-r1.sh sets --decoder-last-pipeline-num-layers 13, leaving 16 MoE layers on a
    middle stage. Step 3 says which way its trainer's figure errs, and by how much, from the
    same ledger on slime's split."""
    from app.routers.rl_lesson import slime_split

    a = facts()["r1_sep"]["api"]
    alt = slime_split()
    assert alt["stage_layers"] == [16, 16, 16, 13] and a["stage_layers"] == [16, 15, 15, 15]
    own = a["pools"][0]["memory_per_gpu_bytes"]
    assert alt["total_bytes"] > own
    three = _steps(client)[4]  # a note under step 4's drill since round 11 (finding 8)
    assert (f"16/16/16/13 ( --decoder-last-pipeline-num-layers 13 ): its heaviest GPU, on stage "
            f"{alt['rank']} with {alt['moe_layers']} MoE layers, needs "  # 0-based: round 29 C #10
            f"{fmt_gb2(alt['total_bytes'])}, so here the lab errs low by "
            f"{fmt_gb2(alt['total_bytes'] - own)}") in three  # round 25: both at 2 places


def test_round_11_step_8s_predict_states_the_optimizers_sharding(client):
    """Round-11 cold reading of EP09-EP10, finding 5: step 8 asked how many GB per training GPU
    come free from 8 to 16 GPUs (7.05 GB) without saying the optimizer state is sharded, or
    over what: ZeRO-1 over DP alone gives 14.1 GB, no sharding 0. The predict, before its
    why, now states Megatron's distributed optimizer over DP x CP."""
    html = client.get("/episodes/rl-placement").text
    step = html[html.index('id="step-8"'):html.index('id="step-9"')]
    asked = re.sub(r"<[^>]+>", "", re.sub(r'<span class="term-tip".*?</span>', "",
                                          step[:step.index('class="why"')], flags=re.S))
    assert "Megatron's distributed optimizer (ZeRO-1, EP03)" in unescape(asked)
    assert "over the DP × CP ranks that hold the same weights" in unescape(asked)


def test_round_11_step_5_charges_the_busiest_gpu_and_draws_on_the_timeline(client):
    """Round-11 cold reading of EP09: step 5 said a step waits for the slowest GPU, then
    charged the average GPU's routed experts, 39.8% of 4 (finding 2); its link recoloured
    the cluster while the rollout it asks about was drawn by the timeline 1,833 px below
    (finding 6); and GLM's 41 KB a token rested on KV heads the page never gave (11a). The
    step now names the timeline, derives the busiest of 64 GPUs' visits from the chance of
    each count (their sum the API's), and derives GLM's bytes a token."""
    from labs.rl.serving import kv_bytes_per_token

    f = facts()
    four = f["r1_sep4"]["api"]["rollout_parts"]
    page = client.get("/episodes/rl-placement").text
    assert 'id="step-5" data-diagram="placement-timeline"' in page
    five = _steps(client)[5]
    odds = busiest()["r1_sep4"]
    assert sum(odds) == pytest.approx(four["busiest_experts"], rel=1e-12)
    # Round 19: the counts it visits almost surely are said once ("at least 3"), the rest
    # summed: 3 + 0.804 = 3.80.
    sure = sum(1 for t in odds if round(t, 3) == 1)
    terms = " + ".join([str(sure)] * bool(sure) + [f"{t:.3f}" for t in odds[sure:]])
    assert f"at least {sure} almost surely: {terms} = {four['busiest_experts']:.2f}" in five
    assert sum([sure, *odds[sure:]]) == pytest.approx(four["busiest_experts"], abs=5e-4)
    q = four["experts_touched"]
    assert f"all 4 with chance 1 − (1 − q 4 ) 64 = {100 * (1 - (1 - q ** 4) ** 64):.1f}%" in five
    m = f["glm9"]["result"].input.model
    per_token = m.layers * m.kv_heads * m.head_dim * 2 * 2
    assert per_token == kv_bytes_per_token(m, "bf16")
    assert "The opening state, GLM-4-9B" in five
    assert (f"{per_token / 1e3:.0f} KB a token ({m.layers} layers × {m.kv_heads} KV "
            f"heads × {m.head_dim} × 2 for keys and values × 2 B)") in five
    assert "DeepSeek-V3 report, arXiv:2412.19437, section 3.4" in five
    share = 100 * four["prefill_s"] / f["r1_sep4"]["api"]["rollout_seconds"]
    assert f"slower: prefill was {share:.1f}% of the rollout." in five


def test_round_11_step_3_prices_slimes_cache_from_its_fp8_weights(client):
    """Round-11 cold reading of EP09, finding 4: the "real engine" cache took the bf16
    weights (56.0 - 34.7 = 21.3 GB, 61% of them) though slime loads R1's FP8 release. The
    engine prices that release from the table's parts: the linear layers at 1 B and a 4 B
    scale a 128 x 128 block, the embedding, head, routers and norms (MLA's latent norms among
    them) in bf16: 18.5 GB a GPU, leaving 37.5 GB of cache, twice the weights."""
    from labs.model.presets import get_model

    a = facts()["r1_sep"]["api"]
    w, fp8 = a["serving_weights"]["params"], a["serving_weights"]["fp8_bytes"]
    m = get_model("deepseek-r1")
    norms = m.layers * (m.q_lora_rank + m.kv_lora_rank)
    linear = w["attention"] + w["dense_mlp"] + w["shared_experts"] + w["routed_experts"] - norms
    assert fp8 == pytest.approx(linear * (1 + 4 / 128 ** 2) + 2 * (sum(w.values()) - linear))
    assert fp8 / 1e9 == pytest.approx(18.5, abs=0.05)
    assert (0.7 * 80e9 - fp8) / 1e9 == pytest.approx(37.5, abs=0.05)
    three = _steps(client)[3]
    limit = three[three.index("Limit."):]
    assert f"slime's FP8 load holds {fp8 / 1e9:.2f} GB" in limit  # fixR #3: the note's digits
    assert "would take half" not in limit
    dense = client.get("/api/placement", params={"preset": "glm-4-9b"}).json()
    assert dense["serving_weights"]["fp8_bytes"] is None  # an even split: no parts to price


def test_round_11_step_3s_why_is_a_short_derivation(client):
    """Round-11 cold reading of EP09, finding 8: step 3's why ran to 566 words besides the
    table, its second half the trainer's bill, which only step 4's drill uses. The why keeps
    the cache, attention data parallelism and the lab's error against slime, under 280 words
    of prose besides the table and its notes; the trainer's derivation is a note in step 4,
    under the drill that states its figure."""
    page = client.get("/episodes/rl-placement").text
    page = re.sub(r'<span class="term-tip".*?</span>', "", page, flags=re.S)
    step = page[page.index('id="step-3"'):page.index('id="step-4"')]
    why = step[step.index('<details class="why"'):step.index("</details>",
                                                           step.index('<details class="why"'))]
    for cut in (r"<table.*?</table>", r'<p class="chart-note">.*?</p>',
                r'<div class="chart-note">.*?</div>', r"<summary>.*?</summary>"):
        why = re.sub(cut, "", why, flags=re.S)
    words = len(re.sub(r"<[^>]+>", " ", why).split())
    assert words < 280, words
    assert "Its trainer" not in step and "CPU Adam keeps" not in step
    four = _steps(client)[4]
    note = four[four.index("Where the drill's training figure comes from."):]
    assert four.index("does the colocated recipe need?") < four.index("Where the drill's training")
    assert "CPU Adam keeps the optimizer in host RAM" in note


def test_round_14_step_5_says_its_decode_leaves_out_the_all_to_all(client):
    """Round-14 cold reading of EP09, finding 5: step 5 said the experts' all-to-all holds a
    decode step together, but the lab times the step by its reads alone (labs/rl/serving_time.py).
    The why's note now says so, prices the left-out exchange from R1's MoE layers and
    DeepEP's measured latencies against the step's reads, and says which way the lab errs."""
    from labs.model.presets import get_model

    four = facts()["r1_sep4"]["api"]["rollout_parts"]
    m = get_model("deepseek-r1")
    from app.routers.rl_lesson import serving_terms

    t = serving_terms(facts()["glm9"]["result"])  # the rate step 5 quotes
    read_ms = four["decode_weight_bytes"] / (t["hbm_efficiency"] * t["hbm_bandwidth"]) * 1e3
    # Round-18 cold reading B, finding 3: "about 50 µs each" was under DeepEP's table's least
    # (77 µs); the engine's own EP row (EP64: 173 + 314 µs) bounds the error at about 3.4x.
    from labs.rl.serving_time import DEEPEP_LOW_LATENCY_US

    gpus = facts()["r1_sep4"]["api"]["engine_gpus"]
    dispatch, combine = DEEPEP_LOW_LATENCY_US[gpus]
    assert min(d for d, _ in DEEPEP_LOW_LATENCY_US.values()) == 77
    a2a_ms = m.moe_layers * (dispatch + combine) / 1e3
    five = _steps(client)[5]
    # Round 19: a side note of the why, it is the limit's now, without the reads' time (the
    # limit shows before the guess).
    limit = five[five.index("Limit."):]
    # The term's first use on the page is here now (round 19): its tag leaves a space.
    assert re.search(r"leaves out the all-to-all ?'s own time", limit)
    assert "50 µs" not in five
    assert (f"{dispatch} µs to dispatch and {combine} µs to combine at EP{gpus}") in limit
    # Round-21 cold reading R, finding 2: and by how much (the lab's own decode step, which
    # hints the answer, only in the why).
    assert (f"{m.moe_layers} × {dispatch + combine} µs ≈ {a2a_ms:.1f} ms a decode step, ") in limit
    assert "both err fast, the all-to-all by" in limit
    assert f"{read_ms:.1f} ms" not in limit
    assert 1 + a2a_ms / read_ms > 3


def _screen(client, query: str, step: str) -> tuple[str, str]:
    """The page at ``query`` as lab.js shows it before ``step``'s guess (the steps before it
    guessed; tests/app/test_answers_hidden.py's model of the masks): its html and its text."""
    from tests.app.test_answers_hidden import masked, masked_keys, visible

    lesson = client.get("/episodes/rl-placement").text
    ids = re.findall(r'<section class="step" id="(step-\d+)"', lesson)
    html = masked(client.get(f"/episodes/rl-placement?{query}").text, masked_keys(lesson, step))
    return html, visible(html, ids, step)


def test_round_14_the_memory_chart_draws_what_answers_nothing(client):
    """Round-14 cold reading of EP09, finding 7: colocated, the memory chart was grey through
    steps 1-3 (every bar veiled) while only the need is step 4's answer, and the table under
    it printed the rollout phase. The chart veils only the need's bars; the phases step 4
    states are drawn, as the table prints them."""
    import json

    from tests.app.test_contracts import page_figures

    for query, name in (("", "glm9"), ("preset=glm-4.7", "glm47")):
        a = facts()[name]["api"]
        html, text = _screen(client, query, "step-1")
        fig = json.loads(re.search(r'data-target="placement-memory"[^>]*>(.*?)</script>', html,
                                   re.S).group(1))
        drawn = {t["x"][0] for t in fig["data"] if t.get("y")}
        assert drawn == {"training phase", "rollout phase"}, (name, drawn)
        full = page_figures(client.get(f"/episodes/rl-placement?{query}").text)["placement-memory"]
        for phase, total in (("training phase", a["train_memory_bytes"]),
                             ("rollout phase", a["rollout_memory_bytes"])):
            bars = sum(t["y"][0] for t in fig["data"] if t.get("x") == [phase])
            assert bars == pytest.approx(total / 1e9, abs=0.01)
            assert sum(t["y"][0] for t in full["data"] if t["x"] == [phase]) == bars
        assert f"{a['colocated_bytes'] / 1e9:.1f} GB" not in text  # step 4's answer
        for row in ("training phase", "rollout phase"):
            cell = re.search(rf'<th scope="row">{row}</th><td></td><td>(.*?)</td>', html)
            assert "answer-mask" not in cell.group(1) and "GB" in cell.group(1), (row, cell)


def test_round_14_a_layout_that_does_not_divide_says_so(client):
    """Round-14 cold reading of EP09, finding 8: GLM-4.7 on 96 GPUs printed "DP 1" against
    the check's 1.50 replicas, "even ()" for its layers, and marked every GPU "✗", which the
    legend reads as over memory. The readout prints 1.5 (not whole), the layers their even
    split, and the training GPUs a layout mark of their own."""
    import json

    bad = client.get("/episodes/rl-placement", params=facts()["glm47_96"]["params"]).text
    good = client.get("/episodes/rl-placement", params=facts()["glm47"]["params"]).text
    assert "96 · 8/4/2/16 · 1.5 (not whole)</dd>" in bad
    layers = re.search(r'data-check="layers by PP".*?</tr>', bad, re.S).group(0)
    assert "()" not in layers and "even (23 a stage)" in layers
    cells = json.loads(re.search(r'data-target="placement-cluster"[^>]*>(.*?)</script>', bad,
                                 re.S).group(1))["data"][0]["text"]
    marks = [c for row in cells for c in row if c]
    assert all(c.endswith("÷") for c in marks[:96]) and not any("✗" in c for c in marks)
    assert "÷ = the layout does not divide" in bad and "÷ = the layout" not in good
    assert "8/4/2/16 · 1</dd>" in good and "even (23 + 23 + 23 + 23)" in good
    body = client.get("/api/placement", params=facts()["glm47_96"]["params"]).json()
    assert all(g.get("divides") is False for g in body["gpus"][:96])


def test_round_14_step_1s_replicas_wait_for_its_guess_at_its_state(client):
    """Round-14 cold reading of EP09, finding 10: at the DeepSeek-R1 state (the Recipe menu,
    step 6's links) the readout's DP cell and the world-size check printed step 1's answer,
    1 replica, before its guess. There the DP, the checks that count replicas and the
    cluster (its shades are the replicas) wait for step 1; elsewhere they do not."""
    from app.charts.rl import replica_keys

    f = facts()
    assert replica_keys(f["r1"]["result"]) == ("step-1",)
    assert replica_keys(f["r1_sep"]["result"]) == ("step-1",)
    assert replica_keys(f["glm47"]["result"]) == replica_keys(f["glm9"]["result"]) == ()
    for query in ("preset=deepseek-r1", "preset=deepseek-r1&placement=separate"):
        html, text = _screen(client, query, "step-1")
        assert "128 · 8/4/4/32 · ?" in text and "= DP 1" not in text and "DP 2" not in text
        # Its replicas wait, the roles beneath them drawn (round 16, finding 9).
        assert [set(t) for t in _figure(html, "placement-cluster")["data"]][1] == {"name"}
        _, after = _screen(client, query, "step-2")
        assert "128 · 8/4/4/32 · 1" in after and "= DP 1" in after


def test_round_14_step_6s_sync_streams_and_step_5s_responses_run_to_the_limit(client):
    """Round-14 cold reading of EP09, finding 12: step 6's "1.34 TB each" and "336 GB per
    GPU" read as one GPU holding them (b): the sync streams in buckets, of the lab's own
    size; step 5 took every response to the 4,096-token limit without saying so (c)."""
    from labs.rl.lab import UPDATE_BUCKET_BYTES

    steps = _steps(client)
    assert UPDATE_BUCKET_BYTES < 1e9
    # Round 19: "streams", the bucket's size left to step 4's overhead.
    assert "the trainer streams the whole bf16 model" in steps[6]
    limit = steps[5][steps[5].index("Limit."):]
    assert "Every response runs to the 4,096-token limit, an upper bound: that errs slow" in limit


def _figure(html: str, chart: str) -> dict:
    import json

    return json.loads(re.search(rf'data-target="{chart}"[^>]*>(.*?)</script>', html,
                                re.S).group(1))


def test_round_16_step_2s_guess_draws_the_timeline_its_why_adds_up(client):
    """Round-16 cold reading of EP09, finding 1: after step 2's guess, at both its links, all
    13 timeline bars stayed veiled (each waited for step 5's or step 6's guess as well) and
    the table printed "Rollout ?", while the why said the training hides behind the rollout.
    At step 2's states every time now waits for step 2 alone, and the why derives both rates
    from the times the table then shows, the engine's own."""
    f = facts()
    for name, placement in (("glm9", "colocated"), ("glm9_sep", "separate")):
        a = f[name]["api"]
        query = "&".join(f"{k}={v}" for k, v in f[name]["params"].items())
        html, text = _screen(client, query, "step-3")  # steps 1 and 2 guessed
        fig = _figure(html, "placement-timeline")
        assert [t.get("x") for t in fig["data"]] == [
            [round(p["end"] - p["start"], 4)] for p in a["timeline"]], placement
        d = _step_places(a)
        assert f"Rollout {a['rollout_seconds']:.{d}f} s" in text
        assert f"Training {a['train_seconds']:.{d}f} s" in text
        assert f"{a['samples_per_second']:.2f}" in text
        before, _ = _screen(client, query, "step-2")
        assert _figure(before, "placement-timeline") != fig  # veiled before the guess
    col, sep = f["glm9"]["api"], f["glm9_sep"]["api"]
    two = re.sub(r"\( | (?=[,)])", lambda m: m.group(0).strip(), _steps(client)[2])
    c, d = _step_places(col), _step_places(sep)
    assert (f"rollout + training + sync = {col['rollout_seconds']:.{c}f} + "
            f"{col['train_seconds']:.{c}f} + {col['sync_seconds']:.{c}f} = "
            f"{_printed_step(col)} s, and {col['samples']} samples ÷ "
            f"{_printed_step(col)} s = {col['samples_per_second']:.2f} a "
            "second") in two
    assert (f"max({sep['rollout_seconds']:.{d}f}, {sep['train_seconds']:.{d}f}) + "
            f"{sep['sync_seconds']:.{d}f}") in two
    assert (f"{sep['samples']} ÷ {_printed_step(sep)} s = "
            f"{sep['samples_per_second']:.2f} a second") in two


def test_round_16_the_training_time_comes_from_ep08s_step_bar(client):
    """Round-16 cold reading of EP09, finding 2: step 6's why quoted R1's 12.3 s of training
    and step 2's GLM-4-9B's 8.24 s with nothing on the page saying where they come from, and
    step 6's predict never said its 2 engines of 32 requests (step 5 ran 4). Each is now
    derived from the engine's own parts: EP08's step on the layout, by its bar's segments,
    the log-probability forward's factor and CPU Adam's PCIe trip."""
    steps = _steps(client)
    for n, name in ((2, "glm9"), (6, "r1_sep")):
        a = facts()[name]["api"]
        p = a["train_parts"]
        assert p["segments"] and not p["estimated"]
        assert p["step_s"] == pytest.approx(sum(p["segments"].values()))
        assert p["seconds"] == pytest.approx(p["step_s"] * p["log_prob"] + p["offload_s"]
                                             + p["ref_swap_s"])
        assert p["seconds"] == pytest.approx(a["train_seconds"])
        text = steps[n]
        assert f"{p['microbatches']} micro-batches of one {p['seq_len']:,}-token sample" in text
        # Step 6 prints its parts at the places where the sum redoes (rl_lesson.train_sum).
        shown = (train_sum(p, f"{p['log_prob']:.3f}")["step"] if n == 6
                 else f"{p['step_s']:.2f}")
        assert (f"× {p['log_prob']:.3f} × {shown} s" in text
                or f"= {p['log_prob']:.3f}, times {shown} s" in text)
        assert f"{p['seconds']:.2f} s" in text
    g = facts()["glm9"]["api"]["train_parts"]
    assert f"{g['step_s']:.2f} s (compute {g['segments']['compute']:.2f} s" in steps[2]
    r1 = facts()["r1_sep"]["api"]
    p = r1["train_parts"]
    # Round 19: step 6 gives the step's compute and names the rest (step 2 lists the bar).
    # Round-27 reading B, finding 7: at train_sum's places, the step as the sum uses it.
    shown = train_sum(p, f"{p['log_prob']:.3f}")["step"]
    assert (f"sample: {shown} s, {p['segments']['compute']:.2f} s of it "
            "compute") in steps[6]
    assert f"adds {p['offload_s']:.2f} s: {p['seconds']:.2f} s" in steps[6]
    assert (f"{r1['engines']} engines of {r1['engine_gpus']} GPUs, "
            f"{r1['samples'] // r1['engines']} requests each") in steps[6].split("Commit")[0]


def test_round_16_step_3s_cache_waits_at_every_r1_state(client):
    """Round-16 cold reading of EP09, finding 3: colocated R1 (the good case, step 1's link,
    step 6's first) drew the rollout phase's KV cache, 1.44 GB, and printed the phase's
    36.6 GB, which less step 3's stated weights and workspace is the same: 1.44 ÷ 34.7 is
    step 3's answer. Both wait for step 3's guess there; the rest of the chart is drawn."""
    from app.charts.units import fmt_bytes

    r = facts()["r1"]["result"]
    cache = fmt_bytes(r.rollout_breakdown["kv_cache"])
    html, text = _screen(client, "preset=deepseek-r1", "step-3")
    # Round 25: the rollout phase's total (36.9 GB then) equalled by chance what the
    # 16/16/16/13 training split's heaviest GPU needs, which step 4's note states of training:
    # that sentence is not the answer, so it is left out of the search. Since round 26 B #1
    # (SGLang's workspace under DP attention) the rollout holds 36.2 GB and the two differ.
    text = re.sub(r"its heaviest GPU, on stage \d+ with \d+ MoE layers, needs [\d.]+ GB", "",
                  text)
    assert cache not in text and fmt_bytes(r.rollout_memory_bytes) not in text
    fig = _figure(html, "placement-memory")
    drawn = [t for t in fig["data"] if t.get("y")]
    assert any(t.get("x") == ["rollout phase"] and t["name"] == "Weights" for t in drawn)
    assert not any(t.get("x") == ["rollout phase"] and t["name"] == "KV cache" for t in drawn)
    _, after = _screen(client, "preset=deepseek-r1", "step-4")
    assert cache in after and fmt_bytes(r.rollout_memory_bytes) in after


def test_round_16_step_1s_state_draws_the_roles_before_the_guess(client):
    """Round-16 cold reading of EP09, finding 9: at R1's states before step 1's guess the
    cluster was one grey block (a phone's bench, between steps). The roles are drawn; only
    the replicas (the shades, each GPU's stage and replica) wait for the guess."""
    for query in ("preset=deepseek-r1", "preset=deepseek-r1&placement=separate"):
        html, text = _screen(client, query, "step-1")
        (roles, veiled) = _figure(html, "placement-cluster")["data"]
        cells = [c for row in roles["z"] for c in row]
        assert len(cells) == 128 * (1 if "separate" not in query else 2)
        assert len(set(cells)) == (1 if "separate" not in query else 2)  # a colour a role
        assert not any("replica" in h for row in roles["customdata"] for h in row)
        assert not any(t for row in roles["text"] for t in row if t.startswith("P"))
        assert "z" not in veiled
        html, _ = _screen(client, query, "step-2")
        shaded = _figure(html, "placement-cluster")["data"][1]
        assert any("replica 0" in h for row in shaded["customdata"] for h in row)


def test_round_16_a_failed_memory_check_shows_its_reason(client):
    """Round-16 cold reading of EP09, finding 11a: "colocated memory fits | FAIL | ?" where
    the layout does not divide; its reason has no figure to give away, so it shows."""
    _, text = _screen(client, "preset=glm-4.7&train_gpus=96", "step-1")
    assert "colocated memory fits FAIL the layout does not divide" in text
    _, text = _screen(client, "preset=glm-4.7", "step-1")
    assert "colocated memory fits pass ?" in text


def test_round_16_step_3s_why_leads_with_its_answer_and_step_8s_title_keeps_its_own(client):
    """Round-16 cold reading of EP09: step 3's why came to its answer's line second, after a
    table and a note (finding 10): it leads now. Step 8's title, "more replicas, a thinner
    optimizer shard", answered its question ("what comes free?") before the guess (11b)."""
    from app.charts.units import fmt_bytes

    b = facts()["r1_sep"]["api"]["pools"][1]["breakdown"]
    three = _steps(client)[3]
    why = three[three.index("Why: show me"):]
    line = (f"{fmt_bytes(b['kv_cache'])} ÷ {fmt_bytes(b['weights'])} = "
            f"{100 * b['kv_cache'] / b['weights']:.1f}%")
    assert line in why and why.index(line) < why.index("The KV cache:") < why.index("Routed")
    page = client.get("/episodes/rl-placement").text
    title = re.search(r'id="step-8".*?<h2>(.*?)</h2>', page, re.S).group(1)
    assert "shard" not in title and "replica" not in title and "free" not in title


def test_round17_step_6_says_why_r1s_training_uses_so_little_of_the_gpus(client):
    """Round 17: R1's training step (10.09 s, its compute 4.06 s) uses 7.6% of the GPUs'
    peak, which the page never explained. Modelled right for the lab's one sample a
    micro-batch: the exposed CP, EP and TP communication takes most of the step, and in the
    compute each routed expert gets 160 tokens a micro-batch, so its weight gradients,
    added into fp32 (Megatron's main_grad), are bound by HBM. Step 6's note says so with the
    engine's figures, and that slime packs samples where the lab does not."""
    from labs.hardware.kernels import hbm_rate
    from labs.rl.timeline import train_step

    sep = facts()["r1_sep"]
    inp, parts = sep["result"].input, sep["api"]["train_parts"]
    step = train_step(inp)
    gpu, m = step.cluster.gpu, inp.model
    peak = step.plan.world_size * gpu.bf16_flops
    compute = step.segments["compute"]
    assert parts["mfu"] == pytest.approx(step.mfu) and 0.05 < step.mfu < 0.1
    assert parts["compute_hfu"] == pytest.approx(
        step.timing.hardware_flops_per_token * step.tokens_per_step / (compute * peak))
    # Uniform routing: each of the 256 experts takes seq_len x top_k / experts tokens.
    assert parts["expert_tokens"] == inp.seq_len * m.top_k // m.experts == 160
    stage = max(step.timing.stages, key=lambda st: st.forward + st.backward)
    wgrad = next(k for _, lt, *_ in stage.layers for k in lt.ops.backward.kernels
                 if k.name == "experts.fc1.wgrad")
    rows, cols, tokens, batch = wgrad.shape
    moved = batch * (2 * (rows * tokens + tokens * cols) + 8 * rows * cols)  # C in fp32, r+w
    assert wgrad.seconds == pytest.approx(moved / hbm_rate(gpu))  # bound by memory
    assert parts["expert_wgrad_flops"] == pytest.approx(wgrad.flops / wgrad.seconds)
    assert parts["expert_wgrad_flops"] < parts["matmul_flops"] / 4
    text = _steps(client)[6]
    # Round 19: a side note of the why, it is the limit's now, in short.
    limit = text[text.index("Limit."):]
    assert (f"R1's training uses only {100 * parts['mfu']:.1f}% of the GPUs' peak ( MFU ): with "
            f"one sample a micro-batch each routed expert gets 160 tokens (5,120 × {m.top_k} ÷ "
            f"{m.experts}), too few to keep its GEMMs busy") in limit
    assert "packs several samples into a micro-batch (--use-dynamic-batch-size)" in limit


def test_round_18_the_log_prob_factor_derives_from_the_steps_flops_a_parameter(client):
    """Round-18 cold reading B, finding 9: steps 2 and 6 gave "x 1.21 for the forward that
    recomputes the log-probabilities (2 FLOPs a parameter a token on top of the step's)"
    without the step's FLOPs a token, and printed R1's 1.185 as 1.19 (10.09 x 1.19 = 12.01,
    not 11.96). Each now states the step's FLOPs a parameter a token, the factor to three
    places, and that it scales the whole step, communication included. Round-21 cold reading
    R, findings 3 and 7: the forward's attention counted (2 + a third of the attention core's
    6·L·a·s·(d_qk + d_v), labs.model.flops.forward_flops_per_token), and the step's FLOPs
    split into their parts, R1's (step 6) too."""
    from labs.model.flops import attention_flops_per_token, matmul_params

    steps = _steps(client)
    for n, name in ((2, "glm9"), (6, "r1_sep")):
        r = facts()[name]["result"]
        p = facts()[name]["api"]["train_parts"]
        assert r.input.recompute == "full"
        m, n_params = r.input.model, matmul_params(r.input.model)
        attention = attention_flops_per_token(m, r.input.seq_len)
        h, f = p["flops_per_param"], p["forward_per_param"]
        # The forward: its matmuls' 2 and one forward's attention, a third of fwd + bwd's.
        assert f == pytest.approx(2 + attention / 3 / n_params, rel=1e-9)
        assert p["forward_attention_per_param"] == pytest.approx(f - 2)
        # The step's: 6 + the recomputed forward's matmuls + attention four forwards' worth.
        assert p["attention_per_param"] == pytest.approx(4 / 3 * attention / n_params, rel=1e-9)
        assert 6 + p["recompute_per_param"] + p["attention_per_param"] == pytest.approx(h)
        # Round-22 cold reading R, finding 1: slime's scripts run a KL loss (--use-kl-loss),
        # so a reference model's forward too.
        assert p["forwards"] == 2
        assert p["log_prob"] == pytest.approx((h + 2 * f) / h, rel=1e-9)
        text = steps[n]
        # Round-23 cold reading R, finding 8: the parts to 3 decimals, so that (h + 2f) / h as
        # printed gives the printed factor (9.39 and 2.38 gave 1.507 against 1.508).
        assert abs((round(h, 3) + 2 * round(f, 3)) / round(h, 3) - p["log_prob"]) < 5e-4
        # Round 25 (reading F, finding 2): the total is the sum of the printed parts
        # (app.routers.rl_lesson.flops_text), each the engine's to within a unit of the last place.
        from app.routers.rl_lesson import flops_text

        t = flops_text(p, facts()[name]["result"].input.model, worked=n == 2)
        for key, value in (("total", h), ("forward", f), ("recompute", p["recompute_per_param"]),
                           ("attention", p["attention_per_param"])):
            assert float(t[key]) == pytest.approx(value, abs=2.5 * 10 ** -len(t[key].split(".")[1]))
        h3, f3 = t["total"], t["forward"]
        parts = f"6 + {t['recompute']} recomputed + {t['attention']} attention"
        if n == 2:
            assert f"runs {h3} FLOPs a matmul parameter a token" in text
            assert (f"= {t['recompute']} for their recomputed forward, "
                    f"{t['attention']} of attention") in text
            assert (f"A forward adds {f3} (2 + "
                    f"{t['forward_attention']}), and slime runs two") in text
            assert f"({h3} + 2 × {f3}) ÷ {h3} = × {p['log_prob']:.3f}" in text
            assert "its exposed communication too" in text
        else:
            six = train_sum(p, f"{p['log_prob']:.3f}")
            assert (f"R1's step runs {h3} FLOPs an active matmul parameter "
                    f"({p['matmul_params'] / 1e9:.1f}B) a token ({parts}") in text
            assert (f"two forwards (the reference's too) add 2 × {f3} (2 + "
                    f"{t['forward_attention']}): ({h3} + 2 × {f3}) ÷ "
                    f"{h3} = {p['log_prob']:.3f}, times {six['step']} s") in text


def test_round_21_the_steps_sums_add_their_printed_parts(client):
    """Round-21 cold reading R, finding 12: step 2 printed "16.20 + 8.26 + 0.64 = 25.09 s",
    the engine's unrounded sum beside parts that add to 25.10. Steps 2 and 6 now print each
    step as its printed parts add."""
    steps = _steps(client)
    for n in (2, 6):
        text = re.sub(r"\( | (?=[,)])", lambda m: m.group(0).strip(), steps[n])
        sums = re.findall(r"= ([\d.]+) \+ ([\d.]+) \+ ([\d.]+) = ([\d.]+) s", text)
        maxes = re.findall(r"max\(([\d.]+), ([\d.]+)\) \+ ([\d.]+)(?: \([^)]*\))? = ([\d.]+) s",
                           text)
        assert sums and maxes, text
        for a, b, c, total in sums:  # round 26 B #3: at the total's own places
            assert f"{float(a) + float(b) + float(c):.{_places(total)}f}" == total
        for a, b, c, total in maxes:
            assert f"{max(float(a), float(b)) + float(c):.{_places(total)}f}" == total


def test_round_21_a_colocated_step_switches_twice(client):
    """Round-21 cold reading R, finding 4: a colocated step switches phases twice (rollout to
    training, training to rollout), but the 1.09 s counted one: the trainer's 35.2 GB down and
    the engine's 34.7 GB up, with nothing bringing the trainer's state back for training.
    Now, as slime's train.py runs it, the trainer's state goes down after training and comes
    back up before the next, and the engine's weights are refilled by the sync: 2 x 35.2 GB."""
    r1 = client.get("/api/placement", params={"preset": "deepseek-r1"}).json()
    bill = facts()["r1"]["result"].train_breakdown
    resident = bill["weights"] + bill["gradients"]
    down, up = r1["sync_switch_bytes"]
    assert down == up == pytest.approx(resident, rel=1e-6)
    assert r1["sync_switch_seconds"] == pytest.approx(2 * resident / 64e9, rel=1e-6)
    steps = _steps(client)
    assert ("A step switches twice: after training the trainer's state goes down to host "
            "memory over PCIe, and before the next training it comes back up") in steps[4]
    assert f"For DeepSeek-R1 that is {r1['sync_switch_seconds']:.2f} s a step" in steps[4]
    assert "Each switch copies the sleeping phase's state down" not in steps[4]
    assert ("The two switches move the trainer's weights and fp32 gradients") in steps[6]
    assert "to host after training and back before the next (the sync refills the engine's)" \
        in steps[6]


def test_round_21_step_2_says_why_rl_needs_the_log_probabilities(client):
    """Round-21 cold reading R, finding 17: step 2's extra forward recomputes "the samples'
    log-probabilities" with no word of why an RL step needs them."""
    two = _steps(client)[2]
    assert "log-probabilities adds to it (the update's importance ratio divides by them)" in two


def test_round_18_cpu_adams_trip_moves_the_gradients_in_the_dtype_the_bill_keeps(client):
    """Round-18 cold reading B, finding 10: step 4's bill keeps R1's GPU gradients in fp32
    (23.4 GB) and the switch moves them so, but CPU Adam's trip moved 'bf16 gradients', 2 x
    11.7 GB: two dtypes for one buffer. The trip now moves the bill's gradients down and the
    bf16 weights up, and step 6 says why the switch still moves the consumed gradients."""
    sep = facts()["r1_sep"]["api"]
    b = sep["pools"][0]["breakdown"]
    p = sep["train_parts"]
    assert b["gradients"] == pytest.approx(2 * b["weights"], rel=1e-6)  # fp32 against bf16
    assert p["offload_s"] == pytest.approx((b["gradients"] + b["weights"]) / p["offload_rate"])
    six = _steps(client)[6]
    assert "bf16 gradients down" not in six
    assert (f"({fmt_gb2(b['gradients'])} + {fmt_gb2(b['weights'])}) ÷ "
            f"{p['offload_rate'] / 1e9:.0f} GB/s") in six  # round 25: 2 places, as the switch
    assert f"adds {p['offload_s']:.2f} s: {p['seconds']:.2f} s" in six
    assert "fp32 gradients (Megatron's gradient buffer stays allocated)" in six


def test_round_19_step_7s_expert_rule_names_expert_tp_1(client):
    """Round-19 cold reading Z, finding 2: step 7 said the GPUs must divide by EP·PP, which
    holds only with expert tensor parallelism 1 (slime's --expert-tensor-parallel-size 1);
    Megatron's default ETP is the dense TP, and GLM-4.7's TP 8 then makes the expert grouping
    8 x 16 x 4 = 512, which 64 GPUs fail. The question and the why name ETP 1 and the default,
    and the check table's row divides by EP x expert-TP 1 x PP."""
    import re
    from html import unescape

    body = client.get("/api/placement", params={"preset": "glm-4.7"}).json()
    row = next(c for c in body["checks"] if c["name"] == "expert grouping")
    tp, ep, pp = body["tp"], body["ep"], body["pp"]
    assert f"(EP {ep} x expert-TP 1 x PP {pp} = {ep * pp})" in row["detail"]
    page = client.get("/episodes/rl-placement").text
    seven = page.split('id="step-7"')[1].split("</section>")[0]
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", seven)))
    assert "expert tensor parallelism (expert TP) 1 as slime runs it" in text
    assert "--expert-tensor-parallel-size 1" in text
    grouping = f"expert-TP·EP·PP = {tp} × {ep} × {pp} = {tp * ep * pp}"
    assert f"{grouping}, which 64 GPUs do not divide" in text


def test_round_19_step_5s_limit_leaves_the_answer_and_the_prefill_is_per_sample(client):
    """Round-19 cold reading Z, findings 1 and 3: step 5's limit, on screen before the guess,
    said the split pays for long prompts with short answers and that an RL rollout's answers
    are long (the answer, 'slower'); that is the why's now. The note said "prefill of the 64
    prompts" for 8 prompts x 8 responses: the lab prefills each sample's prompt on its own,
    with no prefix sharing (SGLang's), so it errs slow, and the rollout-2x drill says so."""
    from app.lesson_drills.rl import DRILLS

    five = _steps(client)[5]
    limit = five[five.index("Limit."):]
    assert "The split pays" not in limit and "thousands of tokens" not in limit
    why = five[:five.index("Limit.")]
    assert "The split pays where prefill is a large share: long prompts with short answers" in why
    g = facts()["glm9"]["api"]["rollout_parts"]
    saved = g["prefill_s"] * 7 / 8  # a prompt's 8 responses share one prefill (round-19 audit)
    assert ("prompts, each on its own (no prefix sharing, which SGLang can do: errs slow by up "
            f"to 7/8 of it, {saved:.2f} s)") in why
    drill = next(d for d in DRILLS if d.id == "placement-predict-rollout-2x")
    assert "no prefix sharing" in drill.question


def test_round_20_step_5_derives_the_prefill_and_step_6_the_switch(client):
    """Round-20 cold reading R, findings 9, 10, 14, 16: step 5's note gave the prefill's
    0.29 s with no FLOP count (it counts the matmul parameters, not the embedding); step 6's
    switch said "64 GB/s each way" where the lab adds the offload and the reload one after
    the other; the decide's solution ran its figures together; step 2's per-GPU rates read
    backwards. Each figure now follows from the API's own numbers."""
    from app.lesson_drills.rl import DRILLS
    from labs.model.flops import matmul_params
    from labs.model.presets import get_model

    steps = _steps(client)
    glm = client.get("/api/placement", params={"preset": "glm-4-9b"}).json()
    parts = glm["rollout_parts"]
    assert parts["prefill_matmul_params"] == pytest.approx(matmul_params(get_model("glm-4-9b")))
    five = steps[5]
    flops = 2 * parts["prefill_matmul_params"] * parts["prefill_tokens"]
    assert f"2 × {parts['prefill_matmul_params'] / 1e9:.2f}B matmul parameters" in five
    assert f"{parts['prefill_tokens']:,} tokens ÷ ({parts['prefill_gpus']} GPUs" in five
    rate = flops / parts["prefill_s"] / parts["prefill_gpus"]  # the half peak the note states
    assert f"{rate / 1e12:.1f} TFLOP/s, half the BF16 peak) = {parts['prefill_s']:.2f} s" in five
    r1 = client.get("/api/placement", params={"preset": "deepseek-r1"}).json()
    down, up = r1["sync_switch_bytes"]
    assert (down + up) / r1["sync_switch_rate"] == pytest.approx(r1["sync_switch_seconds"],
                                                                 rel=1e-6)
    six = steps[6]
    assert "each way" not in six and "after training and back before the next" in six
    assert f"{r1['sync_switch_seconds']:.2f} s" in six
    from html import unescape

    drill = next(d for d in DRILLS if d.id == "placement-decide-throughput")
    right = next(o for o in drill.judge() if o.right)
    page = unescape(client.get(f"/drills/{drill.id}", params={"answer": right.key}).text)
    assert re.search(r"8 \+ 16: [\d.]+ samples/s; 16 \+ 8: [\d.]+ samples/s; 4 \+ 20: "
                     r"[\d.]+ samples/s; all 24 colocated: [\d.]+ samples/s", page)
    assert re.search(r"per GPU, separate makes 0\.\d\d a second against colocated's 0\.\d\d",
                     steps[2])


def test_round_21_step_6s_pcie_rate_is_the_engines_preset_printed(client):
    """Issue 36 (round-21 review): step 6's template derived its PCIe rate as the switch's
    bytes ÷ its seconds, a constant back-computed on the page. The engine now reports the
    link it times the switch on and that link's rate (labs.rl.timeline.PCIE_LINK's preset),
    the page prints that preset's name and figure, and the sum it states gives its seconds."""
    from labs.hardware.links import get_link
    from labs.rl.timeline import PCIE_LINK

    pcie = get_link(PCIE_LINK)
    col = client.get("/api/placement", params={"preset": "deepseek-r1"}).json()
    sep = client.get("/api/placement", params={"preset": "deepseek-r1",
                                               "placement": "separate"}).json()
    assert (col["sync_switch_link"], col["sync_switch_rate"]) == (pcie.name, pcie.bandwidth)
    assert (sep["sync_switch_link"], sep["sync_switch_rate"]) == ("", 0.0)
    down, up = col["sync_switch_bytes"]
    assert (down + up) / pcie.bandwidth == pytest.approx(col["sync_switch_seconds"], rel=1e-9)
    six = _steps(client)[6]
    shown = re.search(rf"over {re.escape(pcie.name)}: \(([\d.]+) GB \+ ([\d.]+) GB\) ÷ "
                      r"(\d+) GB/s = ([\d.]+) s", six)
    assert shown, six
    a, b, rate, seconds = (float(g) for g in shown.groups())
    assert rate == pcie.bandwidth / 1e9
    assert f"{(a + b) / rate:.2f}" == f"{seconds:.2f}" == f"{col['sync_switch_seconds']:.2f}"


def test_round_21_glms_rollout_split_is_the_drills_closed_note(client):
    """Round 21 (issue 36, standard 4): step 5's why ran to 340 words, 126 of them GLM-4-9B's
    rollout split, which only the rollout-2x drill uses. The split is a closed note under the
    drill (its hint names it), not in the why, and stays closed before the guess: its parts
    (prefill a small share) would hint step 5's answer."""
    from app.lesson_drills.rl import DRILLS
    from tests.app.test_step_beats import why_block

    raw = _steps(client)[105]
    why = why_block(raw[raw.index("<h2>"):])
    assert "GLM-4-9B" not in why and "Where the drill's rollout" not in why
    note = re.search(r'<details class="sources chart-note"><summary>Where the drill\'s rollout '
                     r"comes from</summary>(.*?)</details>", raw, re.S)
    assert note and "The opening state, GLM-4-9B" in note[1]
    assert raw.index('id="drill-placement-predict-rollout-2x"') < note.start()
    drill = next(d for d in DRILLS if d.id == "placement-predict-rollout-2x")
    assert "note under this drill" in drill.hint


def test_round_21_the_bad_case_waits_for_step_7s_guess(client):
    """Round-21 cold reading R, finding 5: the bad case "GLM-4.7 on 60 GPUs" was live from
    load, and its check table printed 60 ÷ (TP 8 × PP 4 × CP 2 = 64) and 60 ÷ (EP 16 ×
    expert-TP 1 × PP 4 = 64), step 7's divisors at step 7's degrees, before step 7's guess
    ("64 and 96 / 64 only / neither"). Its button is held until that guess (lab.js), as
    EP03's and EP05's bad cases are; the good case is not."""
    html = client.get("/episodes/rl-placement").text
    bad = re.search(r'<a class="case bad"[^>]*>', html)[0]
    good = re.search(r'<a class="case good"[^>]*>', html)[0]
    assert 'data-held-until="step-7"' in bad and "draws step 7&#39;s answer" in bad
    assert "data-held-until" not in good
    # What it would have shown: step 7's divisor, 64, in both checks.
    checks = client.get("/api/placement", params={"preset": "glm-4.7", "train_gpus": 60,
                                                  "placement": "separate"}).json()["checks"]
    details = " ".join(c["detail"] for c in checks)
    assert "= 64)" in details


def _sum(formula: str) -> float:
    """A workspace formula as the page prints it, "(8,192 × (a + b) ÷ 8 + 8,192 × c) × 2 B",
    evaluated from its printed figures."""
    expr = formula.replace(",", "").replace("×", "*").replace("÷", "/").removesuffix(" B")
    assert re.fullmatch(r"[\d\s.()+*/]+", expr), formula
    return eval(expr)  # noqa: S307 (digits and operators only, checked above)


def test_round_21_the_workspace_is_named_an_estimate_with_its_formula(client):
    """Round-21 cold reading R, finding 9: step 3's "479 MB of workspace (one 8,192-token chunk
    of prefill)" and the cheat sheet's "activations of one 8,192-token prefill chunk ÷ 2 GPUs"
    gave a figure with no formula. Both now name it the lab's estimate and print its terms
    (labs.rl.serving.serving_workspace since round 25), which redo to the figure the API
    gives."""
    r1 = client.get("/api/placement", params={"preset": "deepseek-r1",
                                              "placement": "separate"}).json()
    work = r1["pools"][1]["breakdown"]["workspace"]
    three = _steps(client)[3]
    shown = re.search(r"The workspace is the lab's estimate of one layer's forward intermediates"
                      r", each part split as its weights are .*?: (\([\d,() ×÷+]+\) × 2 B) = "
                      r"([\d.]+) MB", three)
    assert shown, three
    assert _sum(shown[1]) == pytest.approx(work, rel=1e-9)
    assert _same(work / 1e6, shown[2])
    assert "(one 8,192-token chunk of prefill)" not in three
    lines = client.get("/api/cheatsheet").json()["lines"]
    line = next(x for x in lines if x["key"] == "serving")
    term = next(t for t in line["terms"] if t["symbol"] == "workspace")
    got = re.search(r"the lab's estimate of one layer's forward intermediates for one "
                    r"[\d,]+-token prefill chunk, each part split as its weights are .*?: "
                    r"(\([\d,() ×÷+]+\) × 2 B)", term["meaning"])
    assert got, term["meaning"]
    assert _sum(got[1]) == pytest.approx(term["value"], rel=1e-9)


def test_round_21_step_5_says_by_how_much_the_all_to_all_errs_and_writes_its_divisors(client):
    """Round-21 cold reading R, findings 2 and 8: step 5's limit left out DeepEP's all-to-all,
    58 × 487 µs ≈ 28 ms a decode step, more than twice the lab's own decode step, saying only
    "err fast"; and the drill's note printed "4,096 × 18.8 GB: 14.4 s" and the cache's
    seconds without their divisor, the engine's GPUs × 80% of HBM's 3.35 TB/s. The limit
    (shown before the guess) now gives the all-to-all's rollout, more than the whole rollout
    the lab times; the why (after it) sets it beside the lab's decode step."""
    from labs.rl.serving_time import DEEPEP_LOW_LATENCY_US

    steps = _steps(client)
    r1 = client.get("/api/placement", params=facts()["r1_sep4"]["params"]).json()
    parts, n = r1["rollout_parts"], facts()["r1_sep4"]["result"].input.response_len
    model = facts()["r1_sep4"]["result"].input.model
    a2a_ms = model.moe_layers * sum(DEEPEP_LOW_LATENCY_US[r1["engine_gpus"]]) / 1e3
    decode_ms = (parts["decode_weights_s"] + parts["decode_kv_s"]) * 1e3 / n
    assert a2a_ms > 2 * decode_ms and n * a2a_ms / 1e3 > r1["rollout_seconds"]
    limit = steps[5][steps[5].index("Where the lab errs"):]
    assert (f"{n:,} × {a2a_ms:.1f} ms = {n * a2a_ms / 1e3:.0f} s a rollout): both err fast, "
            "the all-to-all by more than the whole rollout the lab times") in limit
    assert f"{decode_ms:.1f} ms" not in limit  # the decode's time is the why's
    why = steps[5][:steps[5].index("Where the lab errs")]
    assert (f"The all-to-all the limit leaves out, {a2a_ms:.1f} ms a step, is "
            f"{a2a_ms / decode_ms:.1f}× this decode step, ({parts['decode_weights_s']:.2f} + "
            f"{parts['decode_kv_s']:.2f}) s ÷ {n:,} = {decode_ms:.2f} ms") in why
    glm = client.get("/api/placement", params={"preset": "glm-4-9b"}).json()
    g = glm["rollout_parts"]
    from app.routers.rl_lesson import serving_terms

    terms = serving_terms(facts()["glm9"]["result"])
    rate = terms["hbm_efficiency"] * terms["hbm_bandwidth"]
    divisor = (f"÷ ({glm['engine_gpus']} GPUs × {rate / 1e12:.2f} TB/s, "
               f"{100 * terms['hbm_efficiency']:.0f}% of {terms['hbm_bandwidth'] / 1e12:.2f})")
    note = steps[5][steps[5].index("The opening state, GLM-4-9B"):]
    assert (f"{n:,} × {terms['weight_bytes'] / 1e9:.1f} GB {divisor}: "
            f"{g['decode_weights_s']:.1f} s") in note
    assert f"a step, {n:,} steps {divisor}: {g['decode_kv_s']:.2f} s" in note
    assert n * terms["weight_bytes"] / (glm["engine_gpus"] * rate) == pytest.approx(
        g["decode_weights_s"], rel=1e-6)


def test_round_22_slimes_kl_loss_runs_the_reference_models_forward(client):
    """Round-22 cold reading R, finding 1: the lab counted one extra forward (the old
    policy's log-probabilities), but slime's GLM-4-9B and DeepSeek-R1 scripts pass
    --use-kl-loss with --ref-load, so train.py keeps a reference model and train_actor runs its
    forward too, its weights swapped in from host and the actor's back. The recipe says which
    run a KL loss (GLM-4.7's script comments it out); the engine counts two forwards and the
    swap; step 2 and step 6 derive them from the same parts."""
    from labs.hardware.links import get_link

    pcie = get_link("pcie-5").bandwidth
    for preset, ref in (("glm-4-9b", True), ("deepseek-r1", True), ("glm-4.7", False)):
        a = client.get("/api/placement", params={"preset": preset}).json()
        p = a["train_parts"]
        h, f = p["flops_per_param"], p["forward_per_param"]
        assert p["forwards"] == (2 if ref else 1)
        assert p["log_prob"] == pytest.approx((h + p["forwards"] * f) / h, rel=1e-9)
        swap = p["ref_swap_s"]
        assert swap == pytest.approx(2 * p["ref_swap_bytes"] / pcie if ref else 0.0)
        assert p["seconds"] == pytest.approx(p["compute_s"] + p["offload_s"] + swap)
        assert a["train_seconds"] == pytest.approx(p["seconds"])
        if ref:
            assert p["ref_swap_bytes"] == pytest.approx(
                facts()["glm9" if preset == "glm-4-9b" else "r1"]["result"]
                .train_breakdown["weights"])
        # Without the reference (a what-if), one forward and no swap: a shorter training.
        off = client.get("/api/placement", params={"preset": preset, "ref_model": False}).json()
        assert off["train_parts"]["forwards"] == 1 and off["train_parts"]["ref_swap_s"] == 0
        assert (off["train_seconds"] < a["train_seconds"]) == ref
    steps = _steps(client)
    g = facts()["glm9"]["api"]["train_parts"]
    assert "( --use-kl-loss , even at coefficient 0.00) the reference model's" in steps[2]
    assert (f"2 × {g['ref_swap_bytes'] / 1e9:.2f} GB (9.4B × 2 B ÷ TP 2) ÷ "
            f"{g['ref_swap_rate'] / 1e9:.0f} GB/s = "
            f"{g['ref_swap_s']:.2f} s: {g['seconds']:.2f} s") in steps[2]
    r = facts()["r1_sep"]["api"]["train_parts"]
    # round 25: each part to the places at which the sum redoes (rl_lesson.train_sum)
    swap = train_sum(r, f"{r['log_prob']:.3f}")["swap"]
    assert (f"the reference's swap, 2 × {fmt_gb2(r['ref_swap_bytes'])} ÷ "
            f"{r['ref_swap_rate'] / 1e9:.0f} GB/s, {swap} s;") in steps[6]
    assert f"adds {r['offload_s']:.2f} s: {r['seconds']:.2f} s" in steps[6]


def test_round_22_step_2s_flops_a_matmul_parameter_derive(client):
    """Round-22 cold reading R, finding 5: "9.39 FLOPs a parameter a token" divided by the
    matmul parameters (N less the embedding), which no step said, and gave neither the
    recomputed forward's 1.86 nor attention's 1.53 a formula. Step 2 now names N and writes
    each part's; step 6 names R1's active matmul parameters."""
    from labs.model.flops import layer_matmul_params, matmul_params

    steps = _steps(client)
    m = facts()["glm9"]["result"].input.model
    p = facts()["glm9"]["api"]["train_parts"]
    n = matmul_params(m)
    assert p["matmul_params"] == pytest.approx(n)
    assert (f"({n / 1e9:.2f}B: {m.params / 1e9:.1f}B less the embedding)") in steps[2]
    assert p["recompute_per_param"] == pytest.approx(2 * layer_matmul_params(m) / n)
    assert (f"2 × {layer_matmul_params(m) / 1e9:.2f}B of the layers' ÷ {n / 1e9:.2f}B = "
            f"{p['recompute_per_param']:.3f} for their recomputed forward") in steps[2]
    s = p["seq_len"]
    one = 2 * s * m.heads * (2 * m.head_dim) * m.layers / n
    assert p["forward_attention_per_param"] == pytest.approx(one)
    assert p["attention_per_param"] == pytest.approx(4 * one)
    assert (f"2 × {s:,} tokens × {m.heads} heads × ({m.head_dim} + {m.head_dim}) × "
            f"{m.layers} layers ÷ {n / 1e9:.2f}B = {one:.3f} a forward, 4 forwards' worth"
            ) in steps[2]
    r = facts()["r1_sep"]["api"]["train_parts"]
    assert f"an active matmul parameter ({r['matmul_params'] / 1e9:.1f}B)" in steps[6]


def _bench(client, **params) -> str:
    html = client.get("/episodes/rl-placement", params=params).text
    html = re.sub(r'<span class="term-tip".*?</span>', "", html)
    html = unescape(re.sub(r"<[^>]+>", " ", html[html.index("Phases of one step"):]))
    return re.sub(r"\s+", " ", html)


@pytest.mark.parametrize("preset", ["glm-4-9b", "deepseek-r1"])
def test_round_22_the_readout_derives_the_colocated_sync_and_adds_its_printed_parts(
        client, preset):
    """Round-22 cold reading R, findings 4 and 8: the readout gave the colocated sync, 0.93 s,
    beside a link that moves its 18.8 GB in 0.05 s (the two switches, 0.88 s, were on no
    step), and printed the engine's step, 25.66 s, where the why adds the printed parts to
    25.67 s. The readout now shows the gather and the switches, and the step as the parts
    add (the why's sum, ``_printed_step``)."""
    from app.charts.units import fmt_bytes

    a = client.get("/api/placement", params={"preset": preset}).json()
    bench = _bench(client, preset=preset)
    gather = a["sync_bytes_per_gpu"] / a["sync_rate"]
    d = _step_places(a)
    assert (f"{a['sync_seconds']:.{d}f} s: {fmt_bytes(a['sync_bytes_per_gpu'])} ÷ "
            f"{a['sync_rate'] / 1e9:.1f} GB/s = {gather:.2f} s, and two switches over PCIe, 2 × "
            f"{fmt_bytes(a['sync_switch_bytes'][0])} ÷ {a['sync_switch_rate'] / 1e9:.0f} GB/s = "
            f"{a['sync_switch_seconds']:.2f} s") in bench
    assert f"Step (in turn) {_printed_step(a)} s" in bench
    sep = client.get("/api/placement", params={"preset": preset, "placement": "separate"}).json()
    bench = _bench(client, preset=preset, placement="separate")
    assert f"overlapped, one step off-policy) {_printed_step(sep)} s" in bench


def test_round_22_an_h100_pcie_node_syncs_over_pcie(client):
    """Round-22 cold reading R, finding 11: on the H100 PCIe the colocated sync was named
    "NVLink (CUDA IPC)" at 52.5 GB/s, a PCIe rate; an 8-card PCIe server has no NVSwitch.
    The link's name follows the node's own scale-up link, as EP12's TP does."""
    sxm = client.get("/api/placement", params={"preset": "glm-4-9b"}).json()
    pcie = client.get("/api/placement", params={"preset": "glm-4-9b", "gpu": "h100-pcie"}).json()
    assert sxm["sync_link"] == "NVLink (CUDA IPC)"
    assert pcie["sync_link"] == "PCIe 5.0 x16 (CUDA IPC)"
    assert pcie["sync_rate"] < 64e9 < sxm["sync_rate"]


def test_round_22_two_batch_overlap_and_the_reference_model_have_glossary_tips(client):
    """Round-22 cold reading R, finding 13: step 5's limit named SGLang's "two-batch overlap"
    with no tip or clause; the reference model finding 1 brings in is a term too."""
    html = client.get("/episodes/rl-placement").text
    five = html[html.index('id="step-5"'):html.index('id="step-6"')]
    assert 'href="/glossary#two-batch-overlap"' in five
    assert 'href="/glossary#reference-model"' in html
    glossary = client.get("/glossary").text
    assert 'id="two-batch-overlap"' in glossary and 'id="reference-model"' in glossary


def test_round_23_step_3s_workspace_names_its_mlp_width(client):
    """Round-23 cold reading R, finding 4: step 3's limit multiplied by "2 × 18,432 ÷ 64" and
    never said what 18,432 is. Since round 25 it is R1's dense layers' MLP width, named, and
    kept whole as the step's table keeps those MLPs."""
    from labs.model.presets import get_model

    r1 = get_model("deepseek-r1")
    text = _steps(client)[3]
    assert f"a dense layer's MLP, 2 × its {r1.ffn:,} width, whole" in text
    assert f"128 × {2 * r1.ffn:,})" in text  # round 26 B #1: its GPU's 1,024 ÷ 8 tokens


def test_round_23_step_2s_links_bring_the_timeline_into_view(client):
    """Round-23 cold reading R, finding 10: step 2 asks what working at once buys in samples
    a second, which the timeline shows (the phases side by side or in turn), but its links
    brought the cluster map into view. The step names the timeline, which test_changed_in_view
    then checks is in view and changed after each link, at both sizes."""
    html = client.get("/episodes/rl-placement").text
    assert '<section class="step" id="step-2" data-diagram="placement-timeline">' in html


def test_round_25_step_3s_workspace_splits_each_part_as_its_weights(client):
    """Round-25 reading F, finding 1: step 3's workspace, "8,192 tokens × (4 × 7,168 + 2 ×
    18,432 ÷ 64) × 2 B = 479 MB", split the dense MLP and the shared expert 64 ways and kept
    attention's 4h whole, against the step's own table (dense MLPs and shared experts whole,
    attention ÷ 8); the cheat sheet's 8,192 × (4 × 4,096 + 2 × 13,696 ÷ 2) split GLM-4-9B's
    MLP by TP 2 but not its attention, and gave GQA's K and V the width h; and an SGLang
    engine's workspace was justified by vLLM. Each part is now split as its weights are, over
    the tokens the GPU runs (labs.rl.serving.serving_workspace, which the memory chart's bar
    and the cheat sheet read), and SGLang's --mem-fraction-static says what it leaves."""
    from labs.model.presets import get_model
    from labs.rl.serving import WEIGHT_BYTES, serving_weight_parts, serving_workspace

    r1 = get_model("deepseek-r1")
    inp = facts()["r1_sep"]["result"].input
    ws = serving_workspace(r1, inp.engine_gpus, inp.serving)
    parts = serving_weight_parts(r1, inp.engine_gpus, inp.serving)
    group = inp.engine_gpus // inp.serving.attn_dp
    # each part's split is its weights': the dense MLPs whole, attention over a group
    assert parts["dense_mlp"] * WEIGHT_BYTES == pytest.approx(
        r1.dense_layers * r1.dense_mlp_params * WEIGHT_BYTES)
    assert ws.attention.splits == (group,) * 4 and [p.name for p in ws.mlp] == ["dense MLP"]
    assert ws.mlp[0].splits == (1,) and ws.mlp[0].widths == (2 * r1.ffn,)
    api = client.get("/api/placement", params=facts()["r1_sep"]["params"]).json()
    assert api["pools"][1]["breakdown"]["workspace"] == pytest.approx(ws.bytes, rel=1e-12)
    three = _steps(client)[3]
    assert f"÷ {group} + 128 × {2 * r1.ffn:,}) × 2 B" in three  # round 26 B #1
    assert f"÷ {inp.engine_gpus})" not in three and "vLLM" not in three
    assert "--mem-fraction-static's share (weights and cache): at most (1 − 0.7) ×" in three
    # the cheat sheet: GLM-4-9B's K and V at 2 KV heads × 128, attention ÷ TP 2 like its MLP
    glm = get_model("glm-4-9b")
    line = next(x for x in client.get("/api/cheatsheet").json()["lines"]
                if x["key"] == "serving")
    term = next(t for t in line["terms"] if t["symbol"] == "workspace")
    kv = glm.kv_heads * glm.head_dim
    q = glm.heads * glm.head_dim
    assert (f"8,192 × ({q:,} + {kv:,} + {kv:,} + {q:,}) ÷ 2 + 8,192 × {2 * glm.ffn:,} ÷ 2"
            in term["meaning"]), term["meaning"]
    assert "vLLM" not in term["meaning"] and "--mem-fraction-static" in term["meaning"]


def _places(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def _same(value: float, printed: str) -> bool:
    """``value`` printed to ``printed``'s places is ``printed``."""
    return f"{value:,.{_places(printed)}f}" == printed


def test_round_25_the_training_notes_add_up_as_printed(client):
    """Round-25 reading F, finding 2: step 2's "9.387 FLOPs ... 6 + 1.859 + 1.529" added to
    9.388; step 6's "10.744 (6 + 1.949 recomputed + 2.794 attention)" to 10.743; step 4's
    "16 B × (5.28B ÷ 1 + 0.58B ÷ 4) = 86.9 GB" gave 86.8; step 6's "(23.4 GB + 11.7 GB) ÷ 64
    GB/s" made 35.1 GB where six lines later the same bytes were "35.2 GB"; and its why gave
    the sync as "28.0 s" against the "27.96" it adds. Every sum the notes write, redone from
    what they print, gives what they print."""
    text = " ".join(_steps(client).values())
    n = r"([\d,]+(?:\.\d+)?)"
    # step 2: GLM-4-9B's FLOPs a matmul parameter, and the log-probability factor
    two = re.search(
        rf"EP08's step runs {n} FLOPs a matmul parameter a token \({n}B: .*?6 for the forward "
        rf"and backward, 2 × {n}B of the layers' ÷ {n}B = {n} for their recomputed forward, "
        rf"{n} of attention \(.*?÷ {n}B = {n} a forward, (\d+) forwards' worth\)\. A forward "
        rf"adds {n} \(2 \+ {n}\).*?\({n} \+ 2 × {n}\) ÷ {n} = × {n},", text)
    assert two, "step 2's note"
    (h, n1, layers, n2, r, a, n3, fa, k, f, fa2, h2, f2, h3, x) = two.groups()
    assert n1 == n2 == n3 and h == h2 == h3 and f == f2 and fa == fa2
    assert _same(6 + float(r) + float(a), h) and _same(int(k) * float(fa), a)
    assert _same(2 * float(layers) / float(n1), r) and _same(2 + float(fa), f)
    assert _same((float(h) + 2 * float(f)) / float(h), x)
    # step 6: R1's
    six = re.search(
        rf"R1's step runs {n} FLOPs .*?\(6 \+ {n} recomputed \+ {n} attention\); two forwards "
        rf"\(the reference's too\) add 2 × {n} \(2 \+ {n}\): \({n} \+ 2 × {n}\) ÷ {n} = {n}, "
        rf"times {n} s; the reference's swap, 2 × {n} GB ÷ {n} GB/s, {n} s; CPU Adam's PCIe "
        rf"trip, \({n} GB \+ {n} GB\) ÷ {n} GB/s, adds {n} s: {n} s\..*?fp32 gradients "
        rf"\(Megatron's gradient buffer stays allocated\), {n} GB, .*?: \({n} GB \+ {n} GB\) ÷ "
        rf"{n} GB/s = {n} s", text)
    assert six, "step 6's note"
    (h, r, a, f, fa, h2, f2, h3, x, step, w, pcie, swap, g, w2, pcie2, off, train, switch,
     s1, s2, pcie3, switch_s) = six.groups()
    assert h == h2 == h3 and f == f2 and w == w2 and switch == s1 == s2
    assert _same(6 + float(r) + float(a), h) and _same(2 + float(fa), f)
    assert _same((float(h) + 2 * float(f)) / float(h), x)
    assert _same(2 * float(w) / float(pcie), swap)
    assert _same((float(g) + float(w)) / float(pcie2), off)
    assert _same(float(x) * float(step) + float(swap) + float(off), train)
    assert _same(float(g) + float(w), switch)  # the same weights and gradients
    assert _same(2 * float(switch) / float(pcie3), switch_s)
    # the sync: the model's bytes over the port, as the step adds it
    sync = re.search(rf"the whole bf16 model, {n} TB, to every rollout GPU over its NDR port "
                     rf"at the bus bandwidth , {n} GB/s \(EP02\): {n} s", text)
    assert sync, "step 6's sync"
    assert _same(float(sync[1]) * 1e3 / float(sync[2]), sync[3])
    assert f"+ {sync[3]} =" in text
    # step 4: R1's heaviest training GPU
    four = re.search(
        rf"{n}B ÷ (\d+) = {n}B, and the rest ÷ TP \d+ \(norms and routers whole\), {n}B: "
        rf"{n}B parameters\. Its bf16 weights are {n}B × 2 B = {n} GB, its fp32 gradients × 4 "
        rf"B = {n} GB, and with {n} MB of activations and logits .*? it needs {n} GB\..*?"
        rf"(\d+) B × \({n}B ÷ (\d+) \+ {n}B ÷ (\d+)\) = {n} GB a GPU", text)
    assert four, "step 4's note"
    (stage, ep, e, d, held, held2, wb, gb, act, need, per, e2, es, d2, ds, host) = four.groups()
    assert e == e2 and d == d2 and held == held2
    assert _same(float(stage) / int(ep), e) and _same(float(e) + float(d), held)
    assert _same(2 * float(held), wb) and _same(4 * float(held), gb)
    assert _same(float(wb) + float(gb) + float(act) / 1e3, need)
    assert _same(int(per) * (float(e) / int(es) + float(d) / int(ds)), host)
