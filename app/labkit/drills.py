"""Grading a drill: the lab computes the answer; a try is right within a relative tolerance."""

import math
from typing import Any

from app.labkit.view import Drill
from app.settings import SETTINGS


def check_drill(drill: Drill, answer: str, attempt: int,
                hide_answers: bool | None = None) -> dict[str, Any]:
    """Grade one try: right within tolerance; a hint after a wrong try; the reveal after two.
    Anything that is not a finite number (text, nan, inf) is ``invalid`` (and uses no try).
    With HIDE_ANSWERS (a class being graded) a wrong try never reveals: it gets the hint."""
    if hide_answers is None:
        hide_answers = SETTINGS.hide_answers
    expected = drill.answer()
    try:
        given = float(answer.replace(",", "").strip())
    except ValueError:
        given = math.nan
    if not math.isfinite(given):
        return {"status": "invalid", "attempt": attempt, "given": None, "answer": None,
                "message": "Enter a number, e.g. 12.5."}
    right = abs(given - expected) <= drill.rel_tol * abs(expected)
    if right:
        status = "right"
    elif attempt >= 2 and not hide_answers:
        status = "revealed"
    else:
        status = "hint"
    return {
        "status": status,
        "attempt": attempt,
        "given": given,
        "answer": expected if status in ("right", "revealed") else None,
        "message": {
            "right": "Right. " + drill.explanation.format(answer=f"{expected:,.1f}"),
            "hint": "Not quite. Hint: " + drill.hint,
            "revealed": "The answer is " + drill.explanation.format(answer=f"{expected:,.1f}"),
        }[status],
    }
