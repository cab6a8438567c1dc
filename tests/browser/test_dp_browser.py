"""EP02 in real Chromium against the real server: controls -> chart and URL, cases, drill,
each diagram's embed, and the diagrams in view at laptop and phone sizes."""

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import (
    answer_drill,
    api_json,
    commit_guess,
    follow,
    release,
    sized_page,
    wait_drawn,
)

PAGE = "/episodes/data-parallel"
DIAGRAMS = ("dp-scaling", "dp-time", "dp-ratio", "dp-replica")


def open_lesson(page, query: str = ""):
    page.goto(PAGE + (f"?{query}" if query else ""))
    wait_drawn(page)


def speedup(page) -> float:
    return float(page.locator("#dp-diagram").get_attribute("data-speedup"))


def trace_y(page, name: str) -> list[float]:
    """The speedup curve of one link as plotly holds it."""
    return page.evaluate(
        "(name) => document.querySelector('#dp-scaling').data"
        ".find(t => t.name === name && t.yaxis === 'y').y", name)


def test_first_load_is_the_good_case(page, live_server):
    open_lesson(page)
    assert speedup(page) == pytest.approx(7.6, abs=0.05)
    expect(page.locator("[data-testid=dp-verdict]")).to_contain_text("7.62×")
    for chart in DIAGRAMS:
        assert page.locator(f"#{chart} .main-svg").count() >= 1
    chosen = page.evaluate("() => document.querySelector('#dp-scaling').data"
                           ".find(t => t.name === 'Chosen').x")
    assert chosen == [8]


def test_slider_updates_chart_and_url_then_reload_and_back(page, live_server):
    # 32 GPUs: 64 on 8 ports is step 4's question, whose figures wait for its guess; on one
    # port a server its speedup waits for step 3's (round 21: speed_keys).
    open_lesson(page, "gpus=32&link=ib-ndr")
    commit_guess(page, 3)
    before, curve_before = speedup(page), trace_y(page, "IB NDR 400G, 1 port a server")
    page.locator("#input-nics_per_node").fill("8")
    page.wait_for_url("**nics_per_node=8**")
    wait_drawn(page)
    expected = api_json(live_server, "dp", "gpus=32&link=ib-ndr&nics_per_node=8")
    assert speedup(page) == pytest.approx(expected["speedup"], abs=0.005)
    assert speedup(page) > before
    curve_after = trace_y(page, "IB NDR 400G, 8 ports a server")  # the curve names its ports
    assert curve_after[-1] > curve_before[-1]  # the 1,024-GPU point lifts with 8 ports
    ib = [e["speedup"] for e in expected["curve"] if e["link"] == "ib-ndr"]
    assert curve_after == pytest.approx(ib, abs=0.01)

    page.reload()
    wait_drawn(page)
    assert page.locator("#input-nics_per_node").input_value() == "8"
    assert speedup(page) == pytest.approx(expected["speedup"], abs=0.005)
    # A choice pushes a history entry (a slider step only replaced the URL); back restores
    # the slider's state in place.
    page.locator("#input-link").select_option("eth-100g")
    page.wait_for_url("**link=eth-100g**")
    wait_drawn(page)
    page.evaluate("window.__sameDocument = true")
    page.go_back()
    page.wait_for_url(lambda url: "eth-100g" not in url)
    page.wait_for_function(
        "() => !document.querySelector('#dp-diagram').dataset.state.includes('eth-100g')")
    wait_drawn(page)
    assert page.evaluate("window.__sameDocument") is True
    assert speedup(page) == pytest.approx(expected["speedup"], abs=0.005)
    assert page.locator("#input-nics_per_node").input_value() == "8"
    assert before < expected["speedup"]


def test_gpu_count_and_overlap_swap_the_fragment(page, live_server):
    open_lesson(page, "link=eth-100g")
    commit_guess(page, 3)  # Ethernet's bench waits for step 3's guess
    commit_guess(page, 5)  # and 64 of them bucketed, step 5's question, for step 5's
    page.evaluate("window.__sameDocument = true")
    page.locator("#input-gpus").select_option("64")
    page.wait_for_url("**gpus=64**")
    wait_drawn(page)
    assert page.evaluate("window.__sameDocument") is True
    state = api_json(live_server, "dp", "gpus=64&link=eth-100g")
    assert speedup(page) == pytest.approx(state["speedup"], abs=0.005)
    expect(page.locator("[data-testid=flat-ring]")).to_contain_text(
        f"{state['flat_ring']['speedup']:.2f}×")
    # Overlap is taught in step 5: behind "More controls", closed at the defaults.
    more = page.locator("#dp-form details.more-controls")
    assert more.evaluate("d => d.open") is False
    more.locator("summary").click()
    page.locator("input[name=overlap][value=bucketed]").check()
    page.wait_for_url("**overlap=bucketed**")
    wait_drawn(page)
    expected = api_json(live_server, "dp", "gpus=64&link=eth-100g&overlap=bucketed")
    assert speedup(page) == pytest.approx(expected["speedup"], abs=0.005)
    hidden = page.evaluate("() => document.querySelector('#dp-time').data"
                           ".filter(t => t.name.includes('hidden')).map(t => t.x[0])")
    assert hidden == [pytest.approx(1e3 * expected["overlapped_comm_s"], rel=1e-4)]


def test_good_and_bad_case_buttons(page):
    open_lesson(page, "gpus=4&link=pcie-4")
    commit_guess(page, 3)  # the bad case's bench waits for step 3's guess
    follow(page.locator("[data-case=bad]"), "link=eth-100g")
    assert speedup(page) == pytest.approx(19.7, abs=0.05)
    expect(page.locator("[data-testid=efficiency]")).to_have_text("30.7%")
    follow(page.locator("[data-case=good]"), "link=nvlink-4")
    assert speedup(page) == pytest.approx(7.6, abs=0.05)
    assert page.locator("#input-gpus").input_value() == "8"


def test_strong_scaling_past_the_global_batch_keeps_the_last_chart(page):
    open_lesson(page, "gpus=64&link=ib-ndr&scaling=strong&global_batch=64")
    before = speedup(page)
    page.locator("#input-gpus").select_option("128")
    expect(page.locator("#error-gpus")).to_contain_text("global batch of 64")
    assert speedup(page) == before
    assert "gpus=128" not in page.url
    limit = page.evaluate("() => document.querySelector('#dp-scaling').layout.shapes"
                          ".filter(s => s.type === 'line').map(s => s.x0)")  # not the band
    assert limit == [64]


def test_drill_rejects_then_accepts(page, live_server):
    open_lesson(page)
    drill = page.locator("form#drill-dp-allreduce-pcie")
    drill.locator("input[name=answer]").fill("54")  # the NVLink answer, not PCIe's
    drill.locator("button").click()
    expect(drill.locator(".drill-feedback")).to_contain_text("Hint")
    from app.routers.data_parallel import drill_answer  # the lab's own all-reduce time

    answer_drill(page, f"{drill_answer():.1f}", "Right")


@pytest.mark.parametrize("name, chart", [("scaling", "dp-scaling"), ("time", "dp-time"),
                                         ("ratio", "dp-ratio"), ("replica", "dp-replica")])
def test_each_diagram_embeds_alone(page, name, chart):
    page.goto(f"/embed/dp/{name}?gpus=64&link=eth-100g")
    wait_drawn(page)
    assert page.locator(f"#{chart} .main-svg").count() >= 1
    others = [c for c in DIAGRAMS if c != chart]
    assert all(page.locator(f"#{c}").count() == 0 for c in others)
    assert page.locator("form.controls").count() == 0


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_each_steps_diagram_is_in_view_after_its_try_link(browser, live_server, width, height):
    with sized_page(browser, live_server, width, height) as page:
        page.goto(PAGE)
        wait_drawn(page)
        steps = page.locator("section.step[data-diagram]")
        for i in range(steps.count()):
            step = steps.nth(i)
            diagram = step.get_attribute("data-diagram")
            link = step.locator("a.try").first
            release(link)
            follow(link, link.get_attribute("href").split("?", 1)[1])
            chart = page.locator(f"#{diagram}")
            chart.scroll_into_view_if_needed()
            box = chart.bounding_box()
            assert box and box["width"] > 0.8 * min(width, 640) - 40, (diagram, box)
            assert box["height"] >= 150, (diagram, box)
            viewport = page.viewport_size
            assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"] + 1, diagram
