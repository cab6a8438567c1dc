"""A wrong try says what is wrong with that answer (issue 36): every numeric drill names its
commonest wrong derivations (app.labkit.Mistake: an off-by-factor, the wrong bytes per
parameter, a ring's 2 forgotten), each computed from the figures its answer comes from; a try
that matches one gets that derivation's own feedback, never the answer, and any other wrong
try the drill's general hint."""

import re

import pytest

import app.main  # noqa: F401  (registers every lab view and its drills)
from app.labkit import DRILLS, Drill
from app.labkit.drills import check_drill, shown_answer

NUMERIC = sorted(i for i, (_, d) in DRILLS.items() if isinstance(d, Drill))
CASES = [(i, m.name) for i in NUMERIC for m in DRILLS[i][1].mistakes]


def _drill(drill_id: str) -> Drill:
    return DRILLS[drill_id][1]


def _mistake(drill_id: str, name: str):
    return next(m for m in _drill(drill_id).mistakes if m.name == name)


def _shows(text: str, figure: str) -> bool:
    """Whether ``text`` prints ``figure`` as a number of its own (not inside 2,048)."""
    figure = figure.rstrip("0").rstrip(".") if "." in figure else figure
    return re.search(r"(?<![\d.,])" + re.escape(figure) + r"(?![\d]|[.,]\d)", text) is not None


def test_every_numeric_drill_names_its_wrong_derivations():
    missing = [i for i in NUMERIC if not _drill(i).mistakes]
    # 27 since round 17 turned three substitution drills into choices (dp-crossover-pcie,
    # moe-expert-dp, failures-mtbi): the floor guards against the list emptying by mistake.
    assert len(NUMERIC) >= 27 and not missing, missing


@pytest.mark.parametrize(("drill_id", "name"), CASES, ids=[f"{i}:{n}" for i, n in CASES])
def test_a_wrong_derivation_gets_its_own_feedback(drill_id, name):
    drill, mistake = _drill(drill_id), _mistake(drill_id, name)
    value = mistake.value()
    # As the student would type it: to three significant figures.
    out = check_drill(drill, f"{value:.3g}", attempt=1, hide_answers=False)
    assert out["status"] == "hint" and out["answer"] is None, (drill_id, name, value)
    assert out["mistake"] == name, (drill_id, name, value, out["mistake"])
    assert out["message"] == "Not quite: " + mistake.why
    # The feedback never gives the answer.
    assert not _shows(mistake.why, shown_answer(drill.answer(), drill.rel_tol)), mistake.why


@pytest.mark.parametrize("drill_id", NUMERIC)
def test_the_wrong_derivations_are_told_apart(drill_id):
    """Each derivation's own figure is graded as that derivation, none as right."""
    drill = _drill(drill_id)
    names = [m.name for m in drill.mistakes]
    assert len(set(names)) == len(names)
    for mistake in drill.mistakes:
        out = check_drill(drill, repr(mistake.value()), attempt=1, hide_answers=True)
        assert (out["status"], out["mistake"]) == ("hint", mistake.name), (drill_id, mistake)


def test_another_wrong_try_gets_the_general_hint():
    drill = _drill("dp-allreduce-pcie")
    out = check_drill(drill, "1", attempt=1, hide_answers=False)
    assert out["mistake"] is None and out["message"].startswith("Not quite. Hint: ")


def test_the_ring_drills_name_the_forgotten_two():
    """The lesson's own examples: the datasheet's bandwidth and one pass of the ring (EP02),
    the tensor sent once (EP04), each its own message."""
    dp = _drill("dp-allreduce-pcie")
    one_pass = check_drill(dp, f"{_mistake('dp-allreduce-pcie', 'one-pass').value():.0f}", 1)
    assert "two passes" in one_pass["message"]
    sheet = check_drill(dp, f"{_mistake('dp-allreduce-pcie', 'datasheet').value():.0f}", 1)
    assert "datasheet" in sheet["message"]
    tp = check_drill(_drill("tp-allreduce-bytes"), "67.1", 1)
    assert tp["mistake"] == "tensor"


def test_the_reveal_names_the_wrong_derivation_too_and_hide_answers_never_reveals():
    drill = _drill("zero3-state-70b")
    mistake = _mistake("zero3-state-70b", "zero2")
    revealed = check_drill(drill, f"{mistake.value():.1f}", attempt=2, hide_answers=False)
    assert revealed["status"] == "revealed" and revealed["message"].startswith("The answer is ")
    assert revealed["message"].endswith("Your try: " + mistake.why)
    hidden = check_drill(drill, f"{mistake.value():.1f}", attempt=2, hide_answers=True)
    assert hidden["status"] == "hint" and hidden["answer"] is None
    assert hidden["message"] == "Not quite: " + mistake.why


def test_the_api_reports_the_mistake(client):
    mistake = _mistake("failures-young", "no-two")
    body = client.get("/api/drills/failures-young",
                      params={"answer": f"{mistake.value():.1f}"}).json()
    assert body["status"] == "hint" and body["mistake"] == "no-two"
    assert body["message"] == "Not quite: " + mistake.why
