"""The chart being worked stays in view while its controls move it (static/js/lab.js
keepInView), on a laptop (1280×800) and a phone (390×844, touch).

For every lesson, opened at its top: after each case button, the diagram the student was
looking at (the bench's first), or the one the case names as the chart it changes, must be at
least 90% visible and uncovered on the laptop and
60% on the phone; on the phone, opening the controls must leave the diagram as visible, above
the drawer; after a control is moved (a slider where the lesson has one), the chart that
control's group names must be as visible. "Visible and uncovered" is sampled: a 20×20 grid
over the chart's box, each point counted when it lies on screen and ``elementFromPoint``
there lands inside the chart (not on the drawer, the readouts or anything else above it)."""

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import VIEWS
from tests.browser.helpers import MOVED_BY, click_cases, sized_page, wait_drawn

SIZES = {"laptop-1280x800": (1280, 800, 0.9), "phone-390x844": (390, 844, 0.6)}
# Per lesson, a control and a new value: its main slider, or (EP07, which has none) a select.
MOVES = {
    "memory": ("micro_batch", "4"), "dp": ("nics_per_node", "2"), "zero": ("micro_batch", "2"),
    "tp": ("micro_batch", "2"), "pipeline": ("microbatches", "16"), "cp": ("tokens", "32"),
    "moe": ("capacity_factor", None), "recipe": ("micro_batch", "2"),
    "placement": ("prompts", "16"), "playground": ("micro_batch", "2"),
    "precision": ("micro_batch", "2"), "failures": ("interval", None),
}
DIAGRAMS = "#bench-view .chart, #bench-view figure.tp-split"

SHOWN = """(id) => {
    const el = document.getElementById(id);
    const r = el.getBoundingClientRect();
    const N = 20;
    let ok = 0;
    for (let i = 0; i < N; i++) for (let j = 0; j < N; j++) {
        const x = r.left + (i + .5) * r.width / N, y = r.top + (j + .5) * r.height / N;
        if (x < 0 || y < 0 || x >= innerWidth || y >= innerHeight) continue;
        const hit = document.elementFromPoint(x, y);
        if (hit && el.contains(hit)) ok++;
    }
    return ok / (N * N);
}"""

@pytest.fixture(params=list(SIZES), ids=list(SIZES))
def sized(request, browser, live_server):
    width, height, need = SIZES[request.param]
    with sized_page(browser, live_server, width, height, touch=True) as page:
        page.need = need  # type: ignore[attr-defined]
        yield page


def test_moves_are_counted_for_every_lesson():
    assert set(MOVES) == set(VIEWS)


def shown(page, chart_id: str, where: str) -> None:
    share = page.evaluate(SHOWN, chart_id)
    assert share >= page.need, f"{where}: #{chart_id} {share:.0%} visible and uncovered"


def wait_state(page, name: str, value: str) -> None:
    """Every chart redrawn, one of them with name=value in its state."""
    page.wait_for_function("""([name, value]) => [...document.querySelectorAll(
        'script.figure[data-target]')].some(s => new URLSearchParams(s.dataset.state)
        .get(name) === value)""", arg=[name, value])
    wait_drawn(page)


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_case_buttons_keep_the_chart_in_view(sized, name):
    """One walk per lesson and size (opened at its top, its good then its bad case) for three
    rules that each walked it on their own page load: the chart in view here; no label
    crowded or clipped (test_text_fits' rule, at the top and after each case); on the pages
    test_changed_in_view walks, a chart the case changed is in view (its rule)."""
    from tests.browser.test_changed_in_view import FIGURES, PAGES, assert_one_in_view, changed
    from tests.browser.test_text_fits import crowding

    page = sized
    view = VIEWS[name]
    page.goto(view.episode.path)
    wait_drawn(page)
    first = page.evaluate(f"document.querySelector({DIAGRAMS!r}).id")
    problems = crowding(page, "default")
    figures = {}

    def before_click(kind):  # the figures as the case finds them, once it is released
        figures[kind] = page.evaluate(FIGURES)

    for kind in click_cases(page, view, before_click if name in PAGES else None):
        # A case that names the chart it changes (EP04's efficiency) brings that one into view.
        case = view.good if kind == "good" else view.bad
        shown(page, case.diagram or first, f"{name} after the {kind} case")
        problems += crowding(page, f"{kind} case")
        if name in PAGES and (ids := changed(page, figures[kind])):
            assert_one_in_view(page, ids, f"{name} {kind} case")
    assert not problems, f"{name}: labels crowded or clipped: " + "\n".join(problems)


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_a_moved_control_keeps_its_chart_in_view(sized, name):
    page = sized
    view = VIEWS[name]
    page.goto(view.episode.path)
    wait_drawn(page)
    if page.phone:  # the controls opened at the top of the page: the diagram above them
        first = page.evaluate(f"document.querySelector({DIAGRAMS!r}).id")
        page.locator(".drawer-toggle").click()
        shown(page, first, f"{name} with the controls open")
    control, value = MOVES[name]
    field = page.locator(f'#drawer [name="{control}"]')
    target = field.evaluate(MOVED_BY)
    if value is None:  # a select: its next option
        value = field.evaluate("s => s.options[(s.selectedIndex + 1) % s.options.length].value")
        field.select_option(value)
    else:
        field.fill(value)
    wait_state(page, control, value)
    shown(page, target, f"{name} after {control}={value}")


def test_ep07s_dispatch_control_keeps_the_gpu_chart_in_view(sized):
    """EP07's "EP dispatch" moves only the GPU chart (its group names that chart, not the
    routing group's experts chart): selecting DeepEP keeps #moe-gpus in view."""
    page = sized
    page.goto("/episodes/experts?model=deepseek-v3&nodes=256&pp=16&ep=64")
    wait_drawn(page)
    if page.phone:
        page.locator(".drawer-toggle").click()
    field = page.locator('#drawer [name="ep_dispatch"]')
    assert field.evaluate(MOVED_BY) == "moe-gpus"
    field.select_option("deepep")
    wait_state(page, "ep_dispatch", "deepep")
    shown(page, "moe-gpus", "experts after ep_dispatch=deepep")
