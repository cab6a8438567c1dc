"""A numeric drill accepts the figure its own worked solution prints (issue 36, round 5).

EP10's ``precision-fp8-speedup`` accepted 2.15-2.19 while its solution printed "2.2×", and
EP11's ``failures-young`` printed 34.6 min and rejected 35, the same figure to the minute. For
every numeric drill (the lesson drills of app/lesson_drills and each lab's derive drills), the
figure the revealed solution prints, typed back as printed and without its thousands commas,
is right; and where a drill has a near wrong derivation (NEAREST_WRONG, read from the numbers
its question states), the tolerance still rejects it.
"""

import re

import pytest

import app.main  # noqa: F401  (registers every lab view and its drills)
from app.labkit import DRILLS, Drill
from app.labkit.drills import check_drill
from tests.app.test_drills import N, num

NUMERIC = sorted(i for i, (_, d) in DRILLS.items() if isinstance(d, Drill))


def printed_answer(drill: Drill) -> str:
    """The figure the revealed solution prints where its explanation puts ``{answer}``."""
    explained = drill.explanation() if callable(drill.explanation) else drill.explanation
    assert "{answer}" in explained, f"{drill.id}: its worked solution prints no answer"
    before = explained.split("{answer}")[0]
    message = check_drill(drill, "-1e300", attempt=2, hide_answers=False)["message"]
    prefix = "The answer is " + before
    assert message.startswith(prefix), (drill.id, message)
    match = re.match(r"-?[\d,]+(?:\.\d+)?", message[len(prefix):])
    assert match, (drill.id, message)
    return match.group(0)


@pytest.mark.parametrize("drill_id", NUMERIC)
def test_the_figure_the_solution_prints_is_accepted_as_typed(drill_id):
    _view, drill = DRILLS[drill_id]
    figure = printed_answer(drill)
    for typed in {figure, figure.replace(",", "")}:
        result = check_drill(drill, typed, attempt=1, hide_answers=True)
        assert result["status"] == "right", (drill_id, typed, drill.answer(), drill.rel_tol)


def _fp8_without_casts(q: str) -> float:
    share, target = num(q, r"GEMMs take " + N + "%") / 100, num(q, r"to be " + N + "×")
    return share / (1 / target - (1 - share))  # the casts' c left out


def _young_without_the_two(q: str) -> float:
    save, mtbf = num(q, r"stops training for " + N + " s"), num(q, r"every " + N + " hours")
    return (save * mtbf * 3600) ** 0.5 / 60  # √(δ·M): the 2 of √(2δM) dropped


def _dispatch_without_the_share(q: str) -> float:
    hidden, topk = num(q, r"hidden " + N), num(q, r"top-" + N)
    return num(q, N + " tokens per GPU") * topk * hidden * 2 / 1e6  # the copies kept home too


def _lora_v_as_square(q: str) -> float:
    r, layers, h = num(q, r"r = " + N), num(q, N + " layers"), num(q, r"q maps " + N)
    return layers * r * 4 * h / 1e6  # v taken as h x h, its 8 KV heads missed


def _bubble_papers_form(q: str) -> float:
    p, m, v = num(q, N + " stages"), num(q, N + " micro-batches"), num(q, r"v = " + N)
    return 100 * (p - 1) / (v * m)  # bubble over the ideal time, not the step's share


def _dsv3_even_split(q: str) -> float:
    return num(q, r"\(" + N + "B parameters") / num(q, r"EP = " + N)  # shared weights split too


NEAREST_WRONG = {
    "precision-fp8-speedup": _fp8_without_casts,
    "failures-young": _young_without_the_two,
    "moe-dispatch-mb": _dispatch_without_the_share,
    "precision-lora-params": _lora_v_as_square,
    "pipeline-bubble": _bubble_papers_form,
    "moe-predict-params-dsv3": _dsv3_even_split,
    "precision-bytes-delayed": lambda q: 16 * num(q, N + "B parameters"),  # no FP8 copies
}


@pytest.mark.parametrize("drill_id", sorted(NEAREST_WRONG))
def test_the_tolerance_still_rejects_the_nearest_wrong_derivation(drill_id):
    _view, drill = DRILLS[drill_id]
    wrong = NEAREST_WRONG[drill_id](re.sub(r"\s+", " ", drill.question))
    result = check_drill(drill, f"{wrong:.6g}", attempt=1, hide_answers=True)
    assert result["status"] == "hint", (drill_id, wrong, drill.answer(), drill.rel_tol)


def test_the_fp8_gain_and_youngs_interval_take_the_rounded_figures():
    """The two cold-read cases: 2.2 (r = 2.169) and 35 min (34.64) are right, and the FP8
    drill's solution prints 2.17, not 2.2."""
    fp8, young = DRILLS["precision-fp8-speedup"][1], DRILLS["failures-young"][1]
    assert printed_answer(fp8) == "2.17"
    assert check_drill(fp8, "2.2", attempt=1, hide_answers=True)["status"] == "right"
    assert check_drill(young, "35", attempt=1, hide_answers=True)["status"] == "right"
