"""One way to serve every lab: the same data as a page, an htmx swap, an iframe embed (the
whole lab or one diagram) and JSON.

A lab builds a :class:`LabView` and calls :func:`register`, which adds

- ``GET /episodes/<slug>``: the lesson page. With ``HX-Request`` it answers only the diagram
  partial (or the whole bench, controls included, when the target is ``#bench``), plus
  out-of-band error slots, so a slider move swaps one fragment and the chart updates in place.
- ``GET /embed/<name>`` and ``GET /embed/<name>/<diagram>``: for an iframe.
- ``GET /episodes/<slug>/<diagram>`` for each lazy diagram (``Diagram.lazy_template``): a
  diagram too dear to draw with every answer, which the lesson fetches as it comes into view.
- ``GET /api/<name>``: JSON; its query names are the page's control names.

Modules: ``view`` (what a lab registers, the registry), ``parsing`` (one parser and the result
cache), ``render`` (templates), ``routes`` (handlers), ``drills`` (grading).
Bad input never costs a 500: a bad control is a 422 with a plain message naming it (JSON), or
that message by the control with the nearest good chart drawn (page).
"""

from app.labkit.drills import check_drill, decide, lab_value, predict
from app.labkit.parsing import State, parse, parse_with_fallback
from app.labkit.routes import DiagramInfo, diagram_list, register
from app.labkit.view import (
    DRILLS,
    FORM,
    VIEWS,
    Case,
    Decide,
    Diagram,
    Drill,
    LabView,
    Mistake,
    Option,
    lesson_state,
)

__all__ = [
    "DRILLS", "FORM", "VIEWS", "Case", "Decide", "Diagram", "DiagramInfo", "Drill", "LabView",
    "Mistake", "Option", "State", "decide", "lab_value", "predict",
    "check_drill", "diagram_list", "lesson_state", "parse", "parse_with_fallback", "register",
]
