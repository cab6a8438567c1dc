"""Every episode's drills teach (issue 36, item 3): each has a predict and a decide drill, no
drill's answer is on its page before it is answered (not in the prose, a table, a chart's
labels or a neighbouring drill), a decide drill's verdicts come from the lab, and grading
reveals them only once the drill is answered."""

import re

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import VIEWS, Decide, check_drill
from app.lesson_drills import LESSON_DRILLS

LESSONS = sorted(VIEWS)


def number_shown(value: float, html: str) -> str | None:
    """The answer as a page would print it (one or two decimals, or whole), found as a number of its
    own in the page's text: every tag's text and the charts' JSON (labels, hover text), not
    the tags' attributes. A whole answer is looked for whole only from 10 up: a small count
    (2 expert-DP groups) is on every page as some degree or another. Else None."""
    text = re.sub(r"<[^>]+>", " ", html)
    # Two decimals too: a chart prints 6.82M where one decimal (6.8) is not on the page.
    forms = [f"{value:,.1f}", f"{value:,.2f}"] + (
        [f"{value:,.0f}"] if value == round(value) >= 10 else [])
    for form in forms:
        if re.search(rf"(?<![\d.,]){re.escape(form)}(?![\d]|,\d|\.\d)", text):
            return form
    return None


@pytest.mark.parametrize("name", LESSONS)
def test_every_episode_has_predict_and_decide_drills(name):
    """By what each drill asks (its role), not by how it is graded: a choice that predicts a
    state (``Decide.predicts``) is a prediction, so each episode still has a real decide."""
    kinds = {drill.role for drill in VIEWS[name].drills}
    assert {"predict", "decide"} <= kinds, (name, kinds)


@pytest.mark.parametrize("name", LESSONS)
def test_a_drills_heading_says_what_it_asks(client, name):
    """Round-18 cold reading E / issue 36 (round 19): EP11's failures-interval-4x asks what
    Young's interval becomes at 4 times the GPUs, a prediction, but was headed "Decide", as
    every choice drill was. A drill's heading is its role: "Predict" for a choice that
    predicts, "Decide" only for a pick among plans, changes or causes."""
    html = client.get(VIEWS[name].episode.path).text
    for drill in VIEWS[name].drills:
        form = html.split(f'id="drill-{drill.id}"')[1].split("</form>")[0]
        heading = re.search(r"<h3>(.*?)</h3>", form)[1]
        assert heading == drill.role.title(), (drill.id, heading, drill.role)


# The choice drills that predict a state rather than pick a plan, a change or a cause (the
# round-19 audit of every episode's decide drills): each is headed "Predict".
PREDICTING_CHOICES = {"failures-interval-4x"}


def test_the_choice_drills_that_predict_are_the_audited_ones():
    found = {
        d.id
        for view in VIEWS.values()
        for d in view.drills
        if isinstance(d, Decide) and d.role == "predict"
    }
    assert found == PREDICTING_CHOICES


@pytest.mark.parametrize("name", LESSONS)
def test_no_answer_is_on_the_page_before_the_drill_is_answered(client, name):
    view = VIEWS[name]
    html = client.get(view.episode.path).text
    for drill in view.drills:
        assert f'id="drill-{drill.id}"' in html, drill.id
        if isinstance(drill, Decide):
            form = html.split(f'id="drill-{drill.id}"')[1].split("</form>")[0]
            assert 'class="choice right' not in form and 'class="why"' not in form
            assert drill.solution() not in html, drill.id
            for option in drill.judge():
                assert option.why not in html, (drill.id, option.key)
            # Nor the right choice's figure with its unit: a chart or a step printing it
            # answers the drill (EP10's old decide drill asked which fine-tuning method holds
            # the fewest bytes while its chart and step 10 showed all three).
            right = next(o for o in drill.judge() if o.right)
            # (A choice whose figure has no such unit, EP07's 'expert-DP 3': the figure.)
            figure = (re.findall(r"\d[\d,]*(?:\.\d+)?(?:%| GB| MB| ms| samples/s| days|×)",
                                 right.why) or [right.figure])[-1]
            text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
            assert not re.search(rf"(?<![\d.,]){re.escape(figure)}", text), (drill.id, figure)
            # Nor the words that state it (its reveals): a step's why or a table saying "TP cuts
            # every weight matrix" answers EP01's drill without its figure.
            shown = [p for p in drill.reveals if p.lower() in text.lower()]
            assert not shown, (drill.id, shown)
        else:
            assert number_shown(drill.answer(), html) is None, (drill.id, drill.answer())


DECIDES = [d for view in VIEWS.values() for d in view.drills if isinstance(d, Decide)]


@pytest.mark.parametrize("drill", DECIDES, ids=lambda d: d.id)
def test_a_decide_drill_declares_the_words_that_reveal_it(drill):
    """Every decide drill names the phrases that state its answer (``reveals``), each one that
    answering prints (the right choice's why or the solution), so the page check above cannot
    pass by naming words that never appear, nor by naming none."""
    assert drill.reveals, (drill.id, "declare reveals=: the words that state the right choice")
    right = next(o for o in drill.judge() if o.right)
    shown = (right.why + " " + drill.solution()).lower()
    assert [p for p in drill.reveals if p.lower() not in shown] == [], drill.id


@pytest.mark.parametrize("drill", [d for drills in LESSON_DRILLS.values() for d in drills
                                   if isinstance(d, Decide)], ids=lambda d: d.id)
def test_a_decide_drill_has_one_right_choice_and_says_why_for_each(drill):
    options = drill.judge()
    assert [o.key for o in options] == [k for k, _ in drill.choices]
    assert sum(o.right for o in options) == 1, drill.id
    right = next(o.key for o in options if o.right)
    wrong = next(o.key for o in options if not o.right)
    graded = check_drill(drill, right, 1, hide_answers=False)
    assert graded["status"] == "right" and graded["answer"] == right
    assert {f["key"] for f in graded["feedback"]} == {k for k, _ in drill.choices}
    first = check_drill(drill, wrong, 1, hide_answers=False)
    assert first["status"] == "hint" and first["answer"] is None
    assert [f["key"] for f in first["feedback"]] == [wrong] and not first["feedback"][0]["right"]
    second = check_drill(drill, wrong, 2, hide_answers=False)
    assert second["status"] == "revealed" and second["answer"] == right
    assert check_drill(drill, wrong, 2, hide_answers=True)["answer"] is None
    assert check_drill(drill, "no-such-choice", 1)["status"] == "invalid"


@pytest.mark.parametrize("drill", [d for drills in LESSON_DRILLS.values() for d in drills
                                   if not isinstance(d, Decide)], ids=lambda d: d.id)
def test_a_predict_drill_links_its_state_only_once_answered(client, drill):
    view = next(v for v in VIEWS.values() if drill in v.drills)
    link = f'href="{view.episode.path}?'
    page = client.get(f"/drills/{drill.id}", params={"answer": "-1e30"},
                      headers={"HX-Request": "true"}).text
    assert "See it on the charts" not in page
    page = client.get(f"/drills/{drill.id}", params={"answer": f"{drill.answer():.6g}"},
                      headers={"HX-Request": "true"}).text
    assert "Right." in page and "See it on the charts" in page and link in page


# A printed figure with its unit, as a step or a table writes it ("6.49 TB", "101 GB").
FIGURE = re.compile(r"(?<![\d.,])(\d{1,3}(?:,\d{3})*(?:\.\d+)?) (TB|GB|MB)(?![A-Za-z])")
UNITS = {"TB": 1e3, "GB": 1.0, "MB": 1e-3}


def one_step_from(answer: float, html: str, question: str) -> list[str]:
    """The page's printed figures (GB) that give ``answer`` (GB) within 0.5% by one division
    or multiplication by a number the question states (2 and up): a drill asking it is a
    derive, whatever its label."""
    text = re.sub(r"<[^>]+>", " ", html)
    shown = {float(n.replace(",", "")) * UNITS[u] for n, u in FIGURE.findall(text)}
    given = {float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", question)}
    given = {n for n in given if n >= 2}
    return sorted(f"{f:g} GB {op} {n:g}" for f in shown for n in given for op, v in
                  (("÷", f / n), ("×", f * n)) if abs(v - answer) <= 0.005 * answer)


def test_ep01_has_a_predict_drill_that_is_not_a_derive(client):
    """Round-17 cold reading of EP01, finding 6: memory-predict-405b-h200 was labelled Predict
    but was a derive: step 2's why prints 405B's 6.49 TB, and ÷ 64 (its question's GPUs) is
    its 101 GB. EP01 keeps a predict drill whose answer no printed figure gives in one step
    by a number its question states."""
    view = VIEWS["memory"]
    html = client.get(view.episode.path).text
    real = []
    for drill in view.drills:
        if isinstance(drill, Decide) or drill.kind != "predict":
            continue
        if drill.unit == "GB" and not one_step_from(drill.answer(), html, drill.question):
            real.append(drill.id)
    assert real, "EP01 has no predict drill that is not a derive"
