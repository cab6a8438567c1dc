"""EP08 in real Chromium against the real server."""

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import (
    ANSWERED,
    answer_drill,
    api_json,
    commit_guess,
    follow,
    release,
    sized_page,
    wait_drawn,
)

PAGE = "/episodes/recipe-3d"


def step_ms(page) -> float:
    """The step bar's total, as drawn (ms)."""
    return page.evaluate(
        "() => document.querySelector('#recipe-step').data.reduce((s, t) => s + t.x[0], 0)")


def guessed(page, step: int) -> None:
    """Commit a guess in ``step``, whose answer the state gives, and wait for its figures."""
    commit_guess(page, step)
    wait_drawn(page)


def test_slider_changes_the_step_bar_audits_and_url(page, live_server):
    page.goto(PAGE)
    wait_drawn(page)
    seed = api_json(live_server, "recipe")
    assert step_ms(page) == pytest.approx(seed["step_s"] * 1e3, rel=1e-3)
    expect(page.locator("#recipe-audits")).to_have_attribute("data-passes", "true")
    page.locator("#input-microbatches").fill("4")
    page.wait_for_url("**microbatches=4**")
    wait_drawn(page)
    # 4 stages of 4 micro-batches answer step 3: its bubble waits for the guess, and a reload
    # forgets it (app/routers/recipe_keys.py).
    guessed(page, 3)
    m4 = api_json(live_server, "recipe", "microbatches=4")
    assert step_ms(page) == pytest.approx(m4["step_s"] * 1e3, rel=1e-3)
    expect(page.locator("#recipe-audits")).to_have_attribute("data-passes", "false")
    expect(page.locator("[data-testid=recipe-verdict]")).to_contain_text("Pipeline bubble")
    page.reload()
    wait_drawn(page)
    guessed(page, 3)
    assert step_ms(page) == pytest.approx(m4["step_s"] * 1e3, rel=1e-3)


def test_matmul_efficiency_control_redraws_the_step_at_that_rate(page, live_server):
    page.goto(PAGE)
    wait_drawn(page)
    # The A100's measured full-wave GEMM rate (258 TFLOP/s on the slowest GPU of a node).
    expect(page.locator("[data-testid=recipe-rate]")).to_contain_text("81.6%")
    page.locator("#input-matmul_efficiency").fill("0.6")
    page.locator("#input-matmul_efficiency").dispatch_event("input")
    page.wait_for_url("**matmul_efficiency=0.6**")
    wait_drawn(page)
    guessed(page, 1)  # the efficiency at 60% is step 1's answer
    slow = api_json(live_server, "recipe", "matmul_efficiency=0.6")
    assert step_ms(page) == pytest.approx(slow["step_s"] * 1e3, rel=1e-3)
    expect(page.locator("[data-testid=recipe-rate]")).to_contain_text(
        f"{100 * slow['matmul_efficiency']:.1f}%")
    expect(page.locator("[data-testid=recipe-verdict]")).to_contain_text(
        f"{100 * slow['efficiency']:.1f}% efficient")


def test_good_and_bad_cases(page):
    page.goto(PAGE)
    wait_drawn(page)
    follow(page.locator("[data-case=bad]"), "pp=8")
    expect(page.locator("[data-testid=recipe-verdict]")).to_contain_text("Pipeline bubble")
    follow(page.locator("[data-case=good]"), "tp=8")
    expect(page.locator("[data-testid=recipe-verdict]")).to_contain_text("Every audit passes")


def test_broken_rules_are_listed_and_the_chart_kept(page):
    page.goto(PAGE)
    wait_drawn(page)
    before = step_ms(page)
    page.locator("#input-dp").fill("3")  # 8 x 4 x 3 = 96 GPUs on 64
    page.locator("#input-dp").dispatch_event("input")
    page.wait_for_url("**dp=3**")
    expect(page.locator("[data-testid=recipe-verdict]")).to_contain_text("rule")
    expect(page.locator(".audit.fail")).not_to_have_count(0)
    # The step chart keeps the last plan that ran.
    assert step_ms(page) == pytest.approx(before)
    # A degree moved: DP follows to what divides the rest (64 ÷ (16 x 4) = 1), as Megatron
    # sets it, and the plan runs, across two nodes.
    page.locator("#input-tp").select_option("16")
    page.wait_for_url("**tp=16**dp=1**")
    wait_drawn(page)
    guessed(page, 2)  # which audit fails for TP16 is step 2's answer
    expect(page.locator("[data-testid=recipe-verdict]")).to_contain_text("TP inside a node")


def test_a_chart_out_of_sight_draws_the_last_plan_that_ran_after_a_broken_one(page):
    """A chart out of sight waits, marked stale with the plan it will show; a broken plan next
    (1 node: TP 8 x PP 8 = 64 GPUs on 8) carries no figure, every chart keeping the last plan
    that could run. Scrolled into view, each stale chart draws that plan, the one its label
    already describes, not the one before it."""
    page.goto(PAGE)
    wait_drawn(page)
    page.locator("#input-seq_len").select_option("512")
    page.wait_for_url("**seq_len=512**")
    wait_drawn(page)
    stale = page.evaluate("[...document.querySelectorAll('.chart[data-stale]')]"
                          ".map(c => [c.id, c.dataset.stale])")
    assert stale, "every chart was redrawn: no chart out of sight to check"
    page.locator("#input-nodes").fill("1")
    page.wait_for_url("**nodes=1&**")
    page.wait_for_function(ANSWERED)
    expect(page.locator("[data-testid=recipe-verdict]")).to_contain_text("rule")
    assert page.locator("script.figure").count() == 0
    for chart, state in stale:
        page.locator(f"#{chart}").scroll_into_view_if_needed()
        expect(page.locator(f"#{chart}")).to_have_attribute("data-drawn", state)


def test_worked_plan_steps_and_replan_link(page):
    page.goto(PAGE)
    wait_drawn(page)
    for step, query in (("step-6", "pp=2"), ("step-9", "replan_nodes=6")):
        link = page.locator(f"#{step} a.try")
        release(link)
        follow(link, query)
        if step == "step-6":
            expect(page.locator("[data-testid=recipe-verdict]")).to_contain_text(
                "Pipeline bubble")
    follow(page.locator("[data-testid=replan] a.apply"), "nodes=6")
    expect(page.locator("#recipe-audits")).to_have_attribute("data-passes", "true")


def test_export_copy_buttons(page):
    page.goto(PAGE)
    wait_drawn(page)
    page.locator("[data-testid=exports] summary").click()
    text = page.locator("#export-megatron").input_value()
    assert "--tensor-model-parallel-size 8" in text
    expect(page.locator("[data-copy-target=export-deepspeed]")).to_be_visible()


def test_drill_checks_the_product(page, live_server):
    page.goto(PAGE)
    answer = 100 * api_json(live_server, "recipe", "microbatches=32")["efficiency"]
    answer_drill(page, "50", "Hint")
    answer_drill(page, f"{answer:.1f}", "Right")


@pytest.mark.parametrize("diagram", ["step", "memory"])
def test_each_diagram_embeds_alone(page, diagram):
    page.goto(f"/embed/recipe/{diagram}")
    wait_drawn(page)
    assert page.locator(f"#recipe-{diagram} .main-svg").count() >= 1


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)])
def test_try_links_draw_their_diagram_within_laptop_and_phone_width(browser, live_server,
                                                                    size):
    with sized_page(browser, live_server, *size) as page:
        page.goto(PAGE)
        wait_drawn(page)
        for step, chart in (("step-1", "recipe-step"), ("step-2", "recipe-memory")):
            link = page.locator(f"#{step} a.try").first
            release(link)
            follow(link, link.get_attribute("href").split("?", 1)[1])
            box = page.locator(f"#{chart}").bounding_box()
            assert box is not None and box["height"] > 50
            assert box["x"] >= 0 and box["x"] + box["width"] <= size[0] + 1


def gemm_bar_ms(page) -> float:
    """The GEMMs' bar of the by-cause chart, as drawn (ms per micro-batch)."""
    return page.evaluate("""() => { const t = document.querySelector('#recipe-causes').data[0];
        return t.x[t.y.indexOf('GEMMs')]; }""")


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800},
                                      {"width": 390, "height": 844}])
def test_why_mfu_step_link_redraws_the_by_cause_chart(page, live_server, viewport):
    page.set_viewport_size(viewport)
    page.goto(PAGE)
    wait_drawn(page)
    seed = api_json(live_server, "recipe")
    gemm = next(c for c in seed["micro_causes"] if c["name"] == "gemm")
    assert gemm_bar_ms(page) == pytest.approx(gemm["exposed_s"] * 1e3, rel=1e-3)
    link = page.locator("#step-11 a.try", has_text="full recomputation")
    release(link)
    follow(link, "recompute=full")
    full = api_json(live_server, "recipe", "recompute=full")
    grown = next(c for c in full["micro_causes"] if c["name"] == "gemm")["exposed_s"]
    assert grown > gemm["exposed_s"] * 1.2  # the forward runs again
    assert gemm_bar_ms(page) == pytest.approx(grown * 1e3, rel=1e-3)
    expect(page.locator("#recipe-causes")).to_be_in_viewport()


BATCHES_JS = """() => [...document.querySelectorAll('[data-testid=plan-link]')].map(a => {
    const q = new URL(a.href).searchParams;
    return q.get('micro_batch') * q.get('microbatches') * q.get('dp'); })"""


def test_search_again_plans_the_controls_as_they_are_now(page):
    """The planner loads for the page's state; after a control changes the global batch,
    "Search again" re-plans for it, in place."""
    page.goto(PAGE)
    wait_drawn(page)
    page.locator("#plan-search").scroll_into_view_if_needed()
    expect(page.locator("[data-testid=plan-link]").first).to_be_visible(timeout=60_000)
    assert set(page.evaluate(BATCHES_JS)) == {32}  # TP8 x PP4 x DP2, 16 micro-batches of 1
    page.locator("#input-microbatches").fill("64")
    page.wait_for_url("**microbatches=64**")
    wait_drawn(page)
    again = page.locator("[data-testid=plan-again]")
    again.scroll_into_view_if_needed()
    again.click()
    page.wait_for_function(f"() => {{ const b = ({BATCHES_JS})(); "
                           "return b.length > 0 && b.every(x => x === 128); }",
                           timeout=60_000)
    expect(page.locator("#plan-search-result")).to_be_in_viewport()


def test_choosing_a_gpu_moves_the_link_to_its_own_fabric(page, live_server):
    """The A100 default's NVLink 3 gives way to the H100's NVLink 4 when only the GPU changes
    (lab.js syncDependents, data-filter-by="gpu"): the step is timed, not refused."""
    page.goto(PAGE)
    wait_drawn(page)
    page.evaluate("() => document.querySelectorAll('form.controls details')"
                  ".forEach(d => { d.open = true; })")
    page.locator("#input-gpu").select_option("h100-sxm")
    page.wait_for_url("**gpu=h100-sxm**")
    wait_drawn(page)
    expect(page.locator("#input-intra_link")).to_have_value("nvlink-4")
    assert page.locator("#input-intra_link option[value=nvlink-3]").evaluate("o => o.hidden")
    guessed(page, 10)  # the seed plan's efficiency on H100s is step 10's answer
    h100 = api_json(live_server, "recipe", "gpu=h100-sxm&intra_link=nvlink-4")
    assert step_ms(page) == pytest.approx(h100["step_s"] * 1e3, rel=1e-3)
    expect(page.locator("#error-intra_link")).to_have_text("")


TWOD_JS = """() => { const el = document.getElementById('recipe-twod');
    const lines = {};
    (el.data || []).forEach(t => { lines[t.name] = t.y; });
    return {drawn: el.dataset.drawn, place: el.closest('.lazy-diagram').dataset.state,
            lines: lines}; }"""


def two_d_lines(answer: dict) -> dict[str, list]:
    """Each family's tokens/s per GPU by cluster size, from /api/recipe's two_d, to the tenth
    the chart draws (app/charts/recipe.py two_d_figure); None where no plan passes."""
    from labs.recipe.two_d import NAMES

    return {name: [round(p["best"][key]["tokens_per_s_per_gpu"], 1) if p["best"][key] else None
                   for p in answer["two_d"]["points"]] for key, name in NAMES.items()}


def test_step_14s_chart_is_fetched_as_it_comes_into_view_and_follows_the_state(page,
                                                                             live_server):
    """Step 14's 2-D against 3-D sweep (fourteen planner searches) is no part of the page or
    of a control's answer: its place fetches GET /episodes/recipe-3d/twod when it comes into
    view, and again for the new state after a control changes the batch."""
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/recipe-3d/twod" in r.url else None)
    page.goto(PAGE)
    wait_drawn(page)
    assert page.locator("script.figure[data-target=recipe-twod]").count() == 0
    assert asked == []  # out of sight: not fetched
    link = page.locator("#step-14 a.try").first
    query = link.get_attribute("href").split("?", 1)[1]
    release(link)  # its why opened: the chart may be fetched once it comes into view
    assert asked == []
    follow(link, query)  # the step brings its chart into view: fetched, then drawn
    drawn = page.evaluate(TWOD_JS)
    assert drawn["drawn"] == drawn["place"] and len(asked) == 1
    want = two_d_lines(api_json(live_server, "recipe", query))
    assert {name: drawn["lines"][name] for name in want} == want
    page.locator("#input-microbatches").fill("64")
    page.wait_for_url("**microbatches=64**")
    page.locator("#recipe-twod").scroll_into_view_if_needed()
    wait_drawn(page)
    drawn = page.evaluate(TWOD_JS)
    assert "microbatches=64" in drawn["drawn"] and drawn["drawn"] == drawn["place"]
    again = two_d_lines(api_json(live_server, "recipe", page.url.split("?", 1)[1]))
    assert again != want and {name: drawn["lines"][name] for name in again} == again


def test_step_14s_chart_waits_for_its_guess(page, live_server):
    """Round-3 cold reading of EP08, item 3: at step 13's state (the same model, cluster and
    batch as step 14's first link) the bench's 2-D against 3-D chart answered step 14's
    prediction before the guess. Its place now waits, fetching nothing, until the student
    commits a guess in step 14 (or opens its why, or follows one of its links)."""
    from app.routers.recipe import LAYER

    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/recipe-3d/twod" in r.url else None)
    query = "&".join(f"{k}={v}" for k, v in LAYER.items())
    page.goto(f"{PAGE}?{query}")
    wait_drawn(page)
    page.locator("#recipe-twod-lazy").scroll_into_view_if_needed()
    expect(page.locator("#recipe-twod-lazy")).to_have_class("lazy-diagram awaiting-guess")
    wait_drawn(page)
    assert asked == [] and page.evaluate(TWOD_JS)["lines"] == {}
    step = page.locator("#step-14")
    step.scroll_into_view_if_needed()
    step.locator("form.predict-form input[name=guess]").first.check()
    step.locator("form.predict-form .predict-commit").click()
    page.locator("#recipe-twod").scroll_into_view_if_needed()
    expect(page.locator("#recipe-twod-lazy")).not_to_have_class("lazy-diagram awaiting-guess")
    wait_drawn(page)
    drawn = page.evaluate(TWOD_JS)
    assert len(asked) == 1 and drawn["drawn"] == drawn["place"] and drawn["lines"]
