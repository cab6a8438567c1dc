"""The lesson's controls, history, theme, accessibility (axe-core) and no-JS fallback."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.helpers import wait_drawn

AXE = Path(__file__).resolve().parents[2] / "static/vendor/node_modules/axe-core/axe.min.js"
PAGES = ["/", "/episodes/memory", "/episodes/pipeline?stages=8&microbatches=32&tp=8",
         "/embed/memory?model=mixtral-8x7b&dp=8&zero=3", "/embed/pipeline?schedule=zb-h1"]
PAGES += ["/episodes/tensor-parallel?tp=4&sp=false", "/embed/tp/split"]  # EP04, light only
PAGES += ["/episodes/zero", "/embed/zero?offload=true"]  # EP03
PAGES += ["/episodes/data-parallel?gpus=64&link=eth-100g&overlap=bucketed", "/embed/dp/scaling"]
PAGES += ["/episodes/experts?skew=0.5&capacity_factor=1.25",  # EP07
          "/embed/moe/ranks?model=deepseek-v3&nodes=256&pp=16&ep=64"]
PAGES += ["/episodes/context-parallel?tokens=16&cp=4&layout=ulysses", "/embed/cp?layout=zigzag"]
PAGES += ["/episodes/recipe-3d?replan_nodes=6", "/embed/recipe?tp=3",  # EP08
          "/episodes/recipe-3d/validation"]
PAGES += ["/episodes/rl-placement?preset=deepseek-r1&placement=separate-pd",
          "/embed/placement/cluster?preset=glm-4.7"]
PAGES += ["/episodes/low-precision?recipe=mxfp8&gpu=b200&offload=40",  # EP10
          "/embed/precision/finetune?rank=64"]
PAGES += ["/episodes/playground", "/episodes/playground/cheatsheet",  # EP12
          "/episodes/playground/compare?a=tp%3D1%26pp%3D1%26dp%3D32", "/embed/playground"]


def serious_violations(page) -> list[str]:
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("""async () => {
        const r = await axe.run(document, {resultTypes: ['violations']});
        return r.violations.filter(v => ['serious', 'critical'].includes(v.impact))
            .map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).slice(0, 3).join(', '));
    }""")
    return found


@pytest.mark.parametrize("path,scheme", [(p, "light") for p in PAGES]
                         + [(p, "dark") for p in PAGES[:3]])
def test_no_serious_accessibility_violations(page, path, scheme):
    page.emulate_media(color_scheme=scheme)
    page.goto(path)
    if page.locator("script.figure").count():
        wait_drawn(page)
    assert serious_violations(page) == []


def test_slider_replaces_the_url_and_a_select_pushes(page):
    page.goto("/episodes/pipeline?stages=4&microbatches=8")
    wait_drawn(page)
    length = page.evaluate("history.length")
    page.locator("#input-microbatches").fill("16")
    page.wait_for_url("**microbatches=16**")
    wait_drawn(page)
    assert page.evaluate("history.length") == length  # replaced
    slider = page.locator("#input-microbatches")
    assert slider.get_attribute("aria-valuetext") == "16 micro-batches"
    page.locator("#input-schedule").focus()
    page.locator("#input-schedule").select_option("gpipe")
    page.wait_for_url("**schedule=gpipe**")
    wait_drawn(page)
    assert page.evaluate("history.length") == length + 1  # pushed
    assert page.evaluate("document.activeElement.id") == "input-schedule"
    page.evaluate("window.__sameDocument = true")
    page.go_back()
    page.wait_for_url(lambda url: "gpipe" not in url)
    page.wait_for_function(
        "() => !document.querySelector('#pipeline-schedule').dataset.state.includes('gpipe')")
    wait_drawn(page)
    assert page.evaluate("window.__sameDocument") is True  # restored in place, not reloaded
    assert page.locator("#input-schedule").input_value() == "1f1b"
    assert page.locator("#pipeline-gantt .main-svg").count() >= 1


def test_fractional_cost_is_sent(page):
    page.goto("/episodes/pipeline?stages=4&microbatches=8")
    wait_drawn(page)
    page.locator("#more-controls > summary").click()  # the costs: under "More controls"
    page.locator("#input-f").fill("1.33")
    page.wait_for_url("**f=1.33**")
    wait_drawn(page)
    expect(page.locator("#error-f")).to_be_empty()


def test_controls_that_do_nothing_are_disabled_with_the_reason(page):
    page.goto("/episodes/pipeline?schedule=1f1b")
    wait_drawn(page)
    assert page.locator("#input-virtual").is_disabled()
    expect(page.locator("#reason-virtual")).to_be_visible()
    page.locator("#input-schedule").select_option("interleaved-1f1b")
    assert page.locator("#input-virtual").is_enabled()
    expect(page.locator("#reason-virtual")).to_be_hidden()

    page.goto("/episodes/memory")
    wait_drawn(page)
    assert page.locator("#input-offload").is_enabled()
    page.locator("input[name=mode][value=infer]").check()
    assert page.locator("#input-offload").is_disabled()
    assert page.locator("input[name=zero]").first.is_disabled()
    # Since aaa54c1 ZeRO sits in EP01's "More controls" disclosure, closed at the defaults:
    # its reason shows once the student opens it to look.
    expect(page.locator("#reason-zero")).to_be_hidden()
    page.locator("#more-controls > summary").click()
    expect(page.locator("#reason-zero")).to_be_visible()
    expect(page.locator("#reason-offload")).to_be_visible()


def test_chart_config_has_no_cloud_link_and_theme_toggle_recolours(page):
    page.goto("/episodes/memory")
    wait_drawn(page)
    context = "document.getElementById('memory-chart')._context"
    assert page.evaluate(f"{context}.showSendToCloud") is False
    titles = page.locator("#memory-chart .modebar-btn").evaluate_all(
        "els => els.map(b => b.getAttribute('data-title'))")
    assert "Download plot as a PNG" in titles or "Download plot as a png" in titles
    assert not [t for t in titles if "Cloud" in t or "Chart Studio" in t]
    assert page.locator("#memory-chart a[href^=http]").count() == 0
    assert page.locator("#memory-chart").get_attribute("role") == "figure"
    assert page.locator("#lab-status").inner_text() != ""
    font = "document.getElementById('memory-chart')._fullLayout.shapes[0].line.color"
    light = page.evaluate(font)
    page.locator("#theme-toggle").click()
    page.wait_for_function(f"{font} !== '{light}'")
    assert page.evaluate("localStorage.getItem('lab-theme')") == "dark"
    page.reload()
    wait_drawn(page)
    assert page.evaluate(font) != light  # the choice is kept


def test_without_javascript_a_chart_shows_its_summary(browser, live_server):
    context = browser.new_context(java_script_enabled=False, base_url=live_server)
    page = context.new_page()
    # A state no step asks about: a training bill's summary waits for step 1's guess, and
    # its label says so (app/routers/memory_keys.py bench_keys).
    page.goto("/episodes/memory?model=llama-3.1-8b&mode=infer")
    summary = page.evaluate(
        "getComputedStyle(document.getElementById('memory-chart'), '::before').content")
    assert "GB" in summary
    expect(page.locator("table.ledger")).to_be_visible()
    context.close()
