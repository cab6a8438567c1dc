"""Grading a drill: the lab computes the answer; a numeric try is right within a relative
tolerance, a decide drill's choice is right when the lab judges it so."""

import math
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from app.labkit.view import VIEWS, Decide, Drill, Mistake, Option
from app.settings import SETTINGS


def check_drill(drill: Drill | Decide, answer: str, attempt: int,
                hide_answers: bool | None = None) -> dict[str, Any]:
    """Grade one try: right, or a hint after a wrong try; the reveal after two.
    An answer that is no finite number (text, nan, inf), or no choice of a decide drill, is
    ``invalid`` (and uses no try). With HIDE_ANSWERS (a class being graded) a wrong try never
    reveals: it gets the hint."""
    if hide_answers is None:
        hide_answers = SETTINGS.hide_answers
    if isinstance(drill, Decide):
        return _check_decide(drill, answer.strip(), attempt, hide_answers)
    expected = drill.answer()
    try:
        given = float(answer.replace(",", "").strip())
    except ValueError:
        given = math.nan
    if not math.isfinite(given):
        return {"status": "invalid", "attempt": attempt, "given": None, "answer": None,
                "message": "Enter a number, e.g. 12.5.", "feedback": []}
    if drill.band is not None:
        low, high = drill.band()
        right = low <= given <= high
    else:
        right = abs(given - expected) <= drill.rel_tol * abs(expected)
    status = _status(right, attempt, hide_answers)
    mistake = None if right else _mistake(drill, given)
    # A worked solution may be built from the lab's figures when asked (a callable).
    explained = drill.explanation() if callable(drill.explanation) else drill.explanation
    figure = shown_answer(expected, drill.rel_tol)
    wrong = f"Not quite: {mistake.why}" if mistake else "Not quite. Hint: " + _hint(drill)
    return {
        "status": status,
        "attempt": attempt,
        "given": given,
        "answer": expected if status in ("right", "revealed") else None,
        "message": {
            "right": "Right. " + explained.format(answer=figure),
            "hint": wrong,
            "revealed": "The answer is " + explained.format(answer=figure) + (
                f" Your try: {mistake.why}" if mistake else ""),
        }[status],
        "feedback": [],
        "mistake": mistake.name if mistake else None,
    }


def _mistake(drill: Drill, given: float) -> Mistake | None:
    """The known wrong derivation a wrong try matches (within the drill's tolerance, or 1% for a
    tighter one, so that a try rounded as a student would print it still matches), the nearest
    where two would."""
    def off(m: Mistake) -> float:
        return abs(given - m.value()) / max(abs(m.value()), 1e-300)

    near = [m for m in drill.mistakes if off(m) <= max(drill.rel_tol, 0.01)]
    return min(near, key=off, default=None)


def shown_answer(value: float, rel_tol: float) -> str:
    """The answer as the worked solution prints it: a whole number as the lab prints counts,
    with its separators and no decimals (round-15 cold reading of EP06, 13b: "Right. 122.0:
    29 + 30 + …" for a count of pairs); else to one decimal, or to as many more as keep the
    printed figure within half the drill's tolerance, so that a student who types back what
    the page printed is right (EP10's r = 2.169 at 1% printed "2.2", 1.4% off, and was told
    "Not quite"; it now prints 2.17)."""
    if value == round(value):
        return f"{round(value):,}"
    for places in range(1, 7):
        text = f"{value:,.{places}f}"
        if abs(float(text.replace(",", "")) - value) <= rel_tol / 2 * abs(value):
            break
    return text


def _hint(drill: Drill) -> str:
    """A numeric drill's hint: a function where it quotes the lab's figures."""
    return drill.hint() if callable(drill.hint) else drill.hint


def _status(right: bool, attempt: int, hide_answers: bool) -> str:
    if right:
        return "right"
    return "revealed" if attempt >= 2 and not hide_answers else "hint"


def _check_decide(drill: Decide, key: str, attempt: int, hide_answers: bool) -> dict[str, Any]:
    """A choice: the chosen option's why (right or wrong) at once, a wrong one as the message
    itself (its own reason and figure, not a hint shared by every wrong option); every
    option's why and the worked solution once it is right or revealed."""
    labels = dict(drill.choices)
    if key not in labels:
        return {"status": "invalid", "attempt": attempt, "given": None, "answer": None,
                "message": "Pick one of the choices.", "feedback": []}
    options = {o.key: o for o in drill.judge()}
    best = next(o for o in options.values() if o.right)
    status = _status(options[key].right, attempt, hide_answers)
    shown = drill.choices if status != "hint" else [(key, labels[key])]
    feedback = [{"key": k, "label": label, "right": options[k].right, "why": options[k].why}
                for k, label in shown]
    message = {"right": "Right. " + drill.solution(),
               "hint": "Not that one. " + options[key].why,
               "revealed": f"The answer is “{labels[best.key]}”. " + drill.solution()}[status]
    return {"status": status, "attempt": attempt, "given": key,
            "answer": best.key if status in ("right", "revealed") else None,
            "message": message, "feedback": feedback}


# ---- Making predict and decide drills from a lab's own answers ----------------------------

@lru_cache(maxsize=256)
def _answer(view_name: str, params: tuple) -> dict:
    view = VIEWS[view_name]
    return view.to_api(view.run(view.query_model(**dict(params))))


Path = str | Callable[[dict], Any]


def lab_value(view_name: str, params: Mapping[str, Any], path: Path) -> Any:
    """One field of a lab's JSON answer (GET /api/<view_name>?params), by a dotted path (or a
    function of the answer): the same query model, run and ``to_api`` as the API, so a drill's
    answer is the lab's."""
    found: Any = _answer(view_name, tuple(sorted(params.items())))
    if callable(path):
        return path(found)
    for part in path.split("."):
        found = found[int(part)] if isinstance(found, list) else found[part]
    return found


def predict(id: str, question: str, view: str, params: Mapping[str, Any], path: Path, *,
            unit: str, hint: str, explanation: str | Callable[[], str], scale: float = 1.0,
            rel_tol: float = 0.1,
            band: Callable[[], tuple[float, float]] | None = None,
            mistakes: Sequence[Mistake] = ()) -> Drill:
    """Predict what the lab gives for a state the page does not show (``params``): a guess
    within ``rel_tol`` counts (or within ``band``, see Drill); the answer links to that
    state."""
    return Drill(id=id, question=question, answer=lambda: scale * lab_value(view, params, path),
                 unit=unit, hint=hint, explanation=explanation, rel_tol=rel_tol,
                 kind="predict", see=dict(params), band=band, mistakes=tuple(mistakes))


Why = str | Callable[[dict], str]


def decide(id: str, question: str, view: str, path: Path | Mapping[str, Path],
           choices: Sequence[tuple[str, str, Mapping[str, Any], Why]], *, best: str,
           fmt: Callable[[float], str], solution: str | Callable[[dict[str, float]], str],
           reveals: Sequence[str] = ()) -> Decide:
    """Pick the choice whose state gives the lowest (``best="min"``) or highest value at
    ``path`` of the lab's answer. Each choice is (key, label, the state's params, why: its
    own one-line reason, right or wrong, formatted with ``{value}``, the lab's figure for it;
    or a function of that state's whole answer returning it, where the reasoning quotes more
    of the lab's figures). A why says nothing of the other choices' figures: a wrong try is
    told only its own. ``solution`` is formatted
    with each choice's figure by key and ``best`` (the right choice's label); or it is a
    function of the choices' raw figures by key returning that text, where the solution works
    a figure from several of them (a gap between two). ``path`` may be
    one per choice key, where the choices read different fields of one answer. ``reveals``:
    the phrases of the right choice's why or the solution that state the answer in words."""
    pick = {"min": min, "max": max}[best]
    paths = path if isinstance(path, Mapping) else {key: path for key, *_ in choices}

    def values() -> dict[str, float]:
        return {key: lab_value(view, params, paths[key]) for key, _, params, _ in choices}

    def judge() -> tuple[Option, ...]:
        found = values()
        top = pick(found.values())
        def text(params: Mapping[str, Any], why: Why) -> str:
            return why(lab_value(view, params, lambda answer: answer)) if callable(why) else why

        return tuple(Option(key, found[key] == top,
                            text(params, why).format(value=fmt(found[key])), fmt(found[key]))
                     for key, _, params, why in choices)

    def worked() -> str:
        found = values()
        top = pick(found, key=found.__getitem__)
        labels = {key: label for key, label, _, _ in choices}
        text = solution(found) if callable(solution) else solution
        return text.format(best=labels[top], **{k: fmt(v) for k, v in found.items()})

    return Decide(id=id, question=question, choices=tuple((k, label) for k, label, _, _ in choices),
                  judge=judge, solution=worked, reveals=tuple(reveals))
