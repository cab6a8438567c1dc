"""A case button pressed at the end of a lesson, where the bench shows the last step's
diagram, brings the diagram the case changes into view (round-5 cold reading, EP02 item 9 and
EP05 item 6: from the last step EP02's cases redrew the scaling chart at y = -2,201 and EP05's
the Gantt chart at y = -1,611, out of view, while the chart in view did not change)."""

import pytest

from tests.browser.helpers import follow, release, wait_drawn
from tests.browser.test_bench_view import SHOWN
from tests.browser.test_bench_view import sized as sized  # the laptop and phone page fixture

# page, the last step whose link is followed first, the diagram the cases change
CASES = {"dp": ("/episodes/data-parallel", "step-10", "dp-scaling"),
         "pipeline": ("/episodes/pipeline", "step-6", "pipeline-gantt")}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_case_after_the_last_step_brings_its_diagram_into_view(sized, name):
    page = sized
    path, step, diagram = CASES[name]
    page.goto(path)
    wait_drawn(page)
    link = page.locator(f"#{step} a.try").first
    release(link)
    follow(link, link.get_attribute("href").split("?", 1)[1])
    for kind in ("good", "bad"):
        button = page.locator(f"#case-{kind}")
        follow(button, button.get_attribute("href").split("?", 1)[1])
        assert page.evaluate(SHOWN, diagram) >= page.need, (name, kind)
