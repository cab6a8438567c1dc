"""No step's prediction is answered on the screen before the guess (issue 36; TEACHING.md,
"Drills": a drill's answer never appears before it is answered, not in a table, a chart label
or a neighbouring step).

A step's prediction (templates/partials/_predict.html) knows its answer: the right choice
(`right`, whose label may carry a figure) and, where the step gives it, the figure it reveals
(`answer`, as the page prints it). Before the student guesses at step n, the screen holds the
whole page but the closed whys of step n and of the steps after it: the bench (readouts,
tables, charts' labels and hover text) at the page's opening state and, once the student has
followed step n-1's try links, at each of those states; every heading and question; the
whys of steps 1 to n-1, open by then. None of it may print step n's answer.

A whole number under 100 is looked for with its unit after it ("47 GPUs", "26 pairs"), so
an unrelated degree or count of the same value ("TP 8") is not taken for it; anything else
(a decimal, a percentage, a number of three digits or more) is looked for on its own."""

import functools
import re

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import VIEWS
from tests.app.test_step_beats import BEATS, steps

# The lessons whose every number prediction declares its `answer` (owners add theirs once
# they have): a number prediction there without one fails below.
DECLARED = ["memory", "dp", "zero", "tp", "pipeline", "cp", "moe", "recipe", "failures",
            "placement", "playground"]

# Phrases that print a step's answer figure as another quantity, each with why it is not the
# answer: struck from the screen's text for that step only, so the figure is still looked for
# everywhere else on the page.
COINCIDENCES = {
    ("zero", "step-4", "a 1.5× buffer factor"):
        "DeepSpeed's estimator pads its CPU figures by 1.5× (the chart note); step 4's 1.5× is "
        "ZeRO-3's traffic against plain DP's",
}

NUMBER = r"\d+(?:,\d{3})*(?:\.\d+)?"


def visible(html: str, step_ids: list[str], guessing: str) -> str:
    """The page's text a student sees at step `guessing` before its guess: tags stripped (the
    charts' JSON in <script> stays: its labels and hover text are on screen), without the
    whys of `guessing` and of the steps after it, nor its own choices."""
    later = step_ids[step_ids.index(guessing):]
    for step_id in later:
        html = re.sub(rf'(<section class="step" id="{step_id}".*?)'
                      r'<details class="why".*?</details>', r"\1", html, flags=re.S)
    html = re.sub(rf'(<section class="step" id="{guessing}".*?)<fieldset class="predict-choices">'
                  r".*?</fieldset>", r"\1", html, flags=re.S)
    # A chart's style and layout numbers ("width":1.5, "x0":1539.19) are not on the screen:
    # its strings (labels, hover text) and data arrays (what hover shows) are.
    html = re.sub(r'"[A-Za-z_0-9]+":-?\d+(?:\.\d+)?(?:e-?\d+)?(?=[,}])', " ", html)
    # Nor are an axis's round tick marks (0.5, 1.0, 1.5 TB) or a select's list of degrees
    # (1 2 4 … 128): scales and choices, not figures of the state.
    html = re.sub(r'"tick(?:text|vals)":\[[^\]]*\]', " ", html)
    html = re.sub(r"<option[^>]*>\s*[\d,.]+\s*</option>", " ", html)
    text = re.sub(r"<[^>]+>", " ", html)
    return re.sub(r"\s+", " ", text.replace("&nbsp;", " ").replace("\u00a0", " "))


def figures(text: str) -> list[tuple[str, str]]:
    """(number, unit) pairs in a printed answer: "36.1 GB" -> [("36.1", "GB")]."""
    return [(n, u) for n, u in re.findall(rf"({NUMBER})\s*(%|×|[A-Za-z]+)?", text)]


# Units a page prints after a number: a number followed by another of these is another
# quantity (450 GB/s is not a speedup of 450×).
UNITS = r"(?:%|×|PB|TB|GB/s|GB|MB|kB|Gb/s|TFLOP/s|ms|µs|s|min|h|days|years|B|M|k|T|GPUs|tokens)"


def printed(number: str, unit: str, text: str) -> bool:
    """Whether `text` prints the figure: the number on its own, not followed by another unit.
    A whole number under 100 only with its unit after it."""
    start = rf"(?<![\d.,]){re.escape(number)}(?![\d]|,\d|\.\d)"
    small = "." not in number and int(number.replace(",", "")) < 100
    for hit in re.finditer(start, text):
        units = f"{re.escape(unit)}|{UNITS}" if unit else UNITS
        after = re.match(rf"\s?({units})(?![A-Za-z/])", text[hit.end():])
        if after and after.group(1) != (unit or ""):
            continue
        if small and not after:
            continue
        return True
    return False


def answers(step: str) -> list[tuple[str, str]]:
    """The figures that answer a step's prediction: its declared answer and the numbers on
    its right choice's label."""
    form = re.search(r'<form class="predict-form"[^>]*>', step)
    if not form:
        return []
    found = []
    declared = re.search(r'data-answer="([^"]*)"', form.group(0))
    if declared:
        found += figures(declared.group(1))
    right = re.search(r'data-right="([^"]*)"', form.group(0))
    if right:
        labels = {key: figures(re.sub(r"<[^>]+>", "", label)) for key, label in
                  re.findall(r'value="([^"]*)"> <span>(.*?)</span>', step, re.S)}
        assert right.group(1) in labels, ("no choice for data-right", right.group(1))
        # A figure every option or the prompt states is the question's input, not its answer.
        prompt = re.sub(r"<[^>]+>", "", re.search(r'<p class="predict">(.*?)</p>', step, re.S)[1])
        given = {f for key, figs in labels.items() if key != right.group(1) for f in figs}
        found += [f for f in labels[right.group(1)]
                  if f not in given and not printed(*f, prompt)]
    return found


@functools.cache
def page(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return response.text


def try_urls(step: str) -> list[str]:
    return [h.replace("&amp;", "&") for h in re.findall(r'<a class="try" href="([^"]+)"', step)]


@pytest.mark.parametrize("name", BEATS)
def test_no_step_prediction_is_answered_before_the_guess(client, name):
    path = VIEWS[name].episode.path
    html = page(client, path)
    found = steps(html)
    ids = [step_id for step_id, _ in found]
    shown = []
    for n, (step_id, step) in enumerate(found):
        figs = answers(step)
        if not figs:
            continue
        urls = [path] + (try_urls(found[n - 1][1]) if n else [])
        for url in urls:
            text = visible(page(client, url), ids, step_id)
            for (lesson, at, phrase), _why in COINCIDENCES.items():
                if (lesson, at) == (name, step_id):
                    assert phrase in text, ("a coincidence no longer on the page", phrase)
                    text = text.replace(phrase, " ")
            shown += [(step_id, url, f"{num} {unit}".strip()) for num, unit in figs
                      if printed(num, unit, text)]
    assert not shown, shown


@pytest.mark.parametrize("name", DECLARED)
def test_every_number_prediction_declares_its_answer(client, name):
    for step_id, step in steps(page(client, VIEWS[name].episode.path)):
        form = re.search(r'<form class="predict-form"[^>]*>', step)
        if form and "data-right" not in form.group(0):
            assert "data-answer" in form.group(0), step_id


def test_the_check_finds_a_printed_answer():
    """The check itself: a figure the bench prints is found, an unrelated count is not."""
    html = ('<article class="steps"><section class="step" id="step-1"><form class="predict-form" '
            'data-answer="26 pairs"></form><details class="why">26 pairs</details></section>'
            '<section class="step" id="step-2"></section></article><div id="bench">'
            '<td>TP 26</td></div>')
    text = visible(html, ["step-1", "step-2"], "step-1")
    assert "26 pairs" not in text
    assert [printed(n, u, text) for n, u in figures("26 pairs")] == [False]
    assert printed("1.13", "TB", "state 1.13 TB here") and not printed("1.13", "TB", "11.13 TB")
    assert printed("26", "pairs", "rank 1 computes 26 pairs")
    assert printed("17.9", "%", "idle 17.9%") and not printed("17.9", "%", "idle 17.95%")
