"""tools/snapshot.py --generate lists each drill's right answer, read off its reveal: a decide
drill's too (a try of 0 is none of its choices, refused with a 422 and no answer)."""

from __future__ import annotations

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import DRILLS
from app.labkit.view import Decide
from tools.snapshot import right_answer

IDS = sorted(DRILLS)


def test_numeric_and_decide_drills_are_both_listed():
    kinds = {isinstance(drill, Decide) for _, drill in DRILLS.values()}
    assert kinds == {True, False}


@pytest.mark.parametrize("drill", IDS)
def test_the_listed_answer_of_each_drill_is_right(client, drill):
    answer = right_answer(client.get, drill)
    graded = client.get(f"/api/drills/{drill}?answer={answer}").json()
    assert graded["status"] == "right", (drill, answer, graded["message"])
