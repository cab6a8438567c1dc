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

The screens before the guess are the page's opening state, the states its case buttons set
(one click away at any step) and the states step n-1's try links set.

A whole number under 100 is looked for only beside the noun the prediction asks about: its
unit after it ("47 GPUs", "26 pairs", "1 replica"), or before it, as a readout, a table's
column or a degree prints it ("DP 4", "Replicas 1", a "GPUs" column's 64), so an unrelated
degree or count of the same value ("TP 8") is not taken for it; a prediction whose answer is
such a count declares it with its noun. Anything else (a decimal, a percentage, a number of
three digits or more) is looked for on its own.

A choice whose answer is a word (faster, fits, the weight sync) carries no figure: it
declares the phrases that would state it (`reveals`, data-reveals), and none may be on the
screen before the guess. Each phrase must be one the page prints once the student has moved
(in the step's why, or on the bench at one of its try links), so a phrase list cannot pass by
naming text that never appears."""

import functools
import json
import re

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import VIEWS
from tests.app.test_step_beats import BEATS, steps, why_end

# The lessons whose every number prediction declares its `answer` (owners add theirs once
# they have): a number prediction there without one fails below.
DECLARED = ["memory", "dp", "zero", "tp", "pipeline", "cp", "moe", "recipe", "failures",
            "placement", "playground", "precision"]

# Phrases that print a step's answer figure as another quantity, each with why it is not the
# answer: struck from the screen's text for that step only, so the figure is still looked for
# everywhere else on the page.
COINCIDENCES: dict[tuple[str, str, str], str] = {  # (lesson, step, phrase) -> why
    ("moe", "step-6", "tiles of 256 × 128 or 128 × 256"):
        "step 4's note: cuBLAS's tile shapes, not step 6's DP 128",
    ("moe", "step-6", "28,672 C in 256 × 128 tiles"):
        "step 4's note: the up GEMM's tile, not step 6's DP 128",
    ("moe", "step-6", "4,096 in 256 × 128 tiles"):
        "step 4's note: the down GEMM's tile, not step 6's DP 128",
    ("moe", "step-10", "all four, about 4 times"):
        "step 7's choice: the 4:1 spine's slowdown, not the loss's gradient ratio",
    ("moe", "step-10", "each takes 4 times as long"):
        "step 7's why: 4 flows through one uplink, not the loss's gradient ratio",
}

NUMBER = r"\d+(?:,\d{3})*(?:\.\d+)?"


def visible(html: str, step_ids: list[str], guessing: str) -> str:
    """The page's text a student sees at step `guessing` before its guess: tags stripped (the
    charts' JSON in <script> stays: its labels and hover text are on screen), without the
    whys of `guessing` and of the steps after it, nor its own choices."""
    later = step_ids[step_ids.index(guessing):]
    for step_id in later:  # each why whole, its closed notes included (why_end)
        start = html.find(f'<section class="step" id="{step_id}"')
        end = html.find("</section>", start)
        at = html.find('<details class="why"', start, end)
        if start >= 0 and at >= 0:
            html = html[:at] + html[why_end(html, at):]
        # A predicting step's notes outside its why wait for its guess too (lab.js
        # maskAnswers holds them as it holds the limit: round-31 reading A, finding 1).
        end = html.find("</section>", start)
        while start >= 0 and '<div class="predict-beat"' in html[start:end]:
            at = html.find('<details class="sources', start, end)
            if at < 0:
                break
            html = html[:at] + html[why_end(html, at):]
            end = html.find("</section>", start)
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


def noun(unit: str, after: bool = True) -> str:
    """A unit as a word pattern, singular or plural: "replicas" -> "replicas?"; bytes after a
    number also as a recipe's label writes them ("18 B/param")."""
    stem = unit[:-1] if len(unit) > 3 and unit.endswith("s") else unit
    word = re.escape(stem) + ("s?" if stem != unit or stem.isalpha() and len(stem) > 2 else "")
    return f"(?:{word}|B/param)" if stem == "byte" and after else word


def is_small(number: str) -> bool:
    return "." not in number and int(number.replace(",", "")) < 100


def printed(number: str, unit: str, text: str, beside: bool = False) -> bool:
    """Whether `text` prints the figure: the number on its own, not followed by another unit.
    A whole number under 100 only beside its unit: after it ("2 replicas"), or before it, as
    a degree, a readout or a table's column prints it ("DP 4", "Replicas 1", "GPUs: 64");
    so is any number `beside` says is a count looked for with its noun alone."""
    start = rf"(?<![\d.,]){re.escape(number)}(?![\d]|,\d|\.\d)"
    small = beside or is_small(number)
    for hit in re.finditer(start, text):
        units = f"{noun(unit)}|{UNITS}" if unit else UNITS
        after = re.match(rf"\s?({units})(?![A-Za-z/])", text[hit.end():])
        if after and not re.fullmatch(noun(unit), after.group(1)):
            continue
        if after and after.group(1) == "×" and re.match(r"\s*[\d(√]", text[hit.end() + len(
                after.group(0)):]):
            continue  # "2 × 5.42 ms": a product, not a ratio
        if small and not after:
            if unit and unit not in "%×" and re.search(
                    rf"(?<![A-Za-z]){noun(unit, after=False)}\s*[:=]?\s*$", text[:hit.start()],
                    re.I):
                return True
            continue
        return True
    return False


def flat(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def tables(html: str) -> str:
    """Each table cell with its column's heading before it ("GPUs 64"), so a count a table
    prints under its noun reads as a readout does."""
    out = []
    for table in re.findall(r"<table.*?</table>", html, re.S):
        head = re.search(r"<thead.*?</thead>", table, re.S)
        if not head:
            continue
        names = [flat(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", head.group(0), re.S)]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table.replace(head.group(0), ""), re.S):
            cells = re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
            out += [f"{name} {flat(cell)} ;" for name, cell in zip(names, cells, strict=False)]
    return " ".join(out)


def reveals(step: str) -> list[str]:
    """The phrases a step's prediction declares would state its word answer."""
    form = re.search(r'<form class="predict-form"[^>]*>', step)
    found = form and re.search(r'data-reveals="([^"]*)"', form.group(0))
    return [p for p in found.group(1).split("|") if p] if found else []


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


def case_urls(html: str) -> list[str]:
    """The states the bench's case buttons set: one click away before any step's guess."""
    return [h.replace("&amp;", "&")
            for h in re.findall(r'<a class="case [a-z]+" id="case-[a-z]+" href="([^"]+)"', html)]


def masked_keys(lesson: str, guessing: str) -> set[str]:
    """The keys static/js/lab.js still masks before `guessing`'s guess, the steps before it
    guessed: a step's own id and its prediction's beat id, from `guessing` on, and a chart's,
    while no step before `guessing` that names it as its diagram is guessed."""
    found = steps(lesson)
    ids = [step_id for step_id, _ in found]
    diagram = {step_id: (re.match(r'\s*data-diagram="([^"]+)"', step) or [None, None])[1]
               for step_id, step in found}
    before = ids[:ids.index(guessing)]
    charts = {d for d in diagram.values() if d} - {diagram[s] for s in before}
    # A prediction's beat id keys its step's answers too (EP01's bench).
    beats = {b for step_id, step in found if step_id not in before
             for b in re.findall(r'<div class="predict-beat" id="([^"]+)"', step)}
    return set(ids[ids.index(guessing):]) | charts | beats


def masked(html: str, keys: set[str]) -> str:
    """The page as lab.js shows it while `keys` are masked: an .answer-mask element keyed by
    one shows its data-mask ("?"), and a chart with layout.meta.masked keyed by its id is
    drawn veiled: only its masked labels and the legend names it gives (tests/browser/
    test_answers_hidden_browser.py checks lab.js does so in Chromium); so is one whose
    meta.after names a key in `keys` (EP05's Gantt at a state a step asks about). A span
    with data-hidden-until-guess keyed by one is left out (EP06's filled-in L*). A chart
    whose meta names owners (a step each for its parts) is veiled whole while every owner's
    step is masked (unless meta.partly), and else without the parts of the steps still
    masked."""
    def mask(match: re.Match) -> str:
        tag = match.group(1)
        if not set(re.search(r'data-after-guess="([^"]+)"', tag)[1].split()) & keys:
            return match.group(0)
        shown = re.search(r'data-mask="([^"]*)"', tag)
        return tag + (shown[1] if shown else "?") + match.group(4)

    html = re.sub(r'(<(span|strong|p|td|th)\b[^>]*\banswer-mask\b[^>]*data-after-guess=[^>]*>)'
                  r"(.*?)(</\2>)", mask, html, flags=re.S)

    def hide(match: re.Match) -> str:  # a span lab.js hides while any of its keys is masked
        return "" if set(match.group(1).split()) & keys else match.group(0)

    html = re.sub(r'<span data-hidden-until-guess="([^"]+)">.*?</span>', hide, html, flags=re.S)

    def veil(match: re.Match) -> str:
        figure = json.loads(match.group(3))
        meta = figure.get("layout", {}).get("meta") or {}
        if "masked" not in meta:
            return match.group(0)
        owners = meta.get("owners") or []
        pending = [g for g in owners if set(g["step"].split()) & keys]  # several: any masks
        after = set(meta.get("after", "").split())  # veiled whole while any is masked
        whole = bool(after & keys) or (
            (not after and match.group(2) in keys) if not owners else (
                len(pending) == len(owners) and not meta.get("partly")))
        if whole:
            texts = [*meta["masked"].values(),  # the legend's title dropped (lab.js untitled)
                     *(n for n in meta.get("names", {}).values() if n)]
            return match.group(1) + json.dumps(texts) + "</script>"
        if not pending:
            return match.group(0)
        return match.group(1) + json.dumps(partly_veiled(figure, pending),
                                           separators=(",", ":")) + "</script>"

    return re.sub(r'(<script type="application/json" class="figure" data-target="([^"]+)"'
                  r"[^>]*>)(.*?)</script>", veil, html, flags=re.S)


def partly_veiled(figure: dict, pending: list[dict]) -> dict:
    """A chart with owners (layout.meta.owners), some of whose steps are still to be guessed,
    as lab.js partlyVeiled draws it: the pending steps' traces by name alone, their labels
    as their masked text or not at all, their shapes dropped, and the summary with each
    pending owner's text masked (lab.js summaryOf)."""
    layout, meta = figure["layout"], figure["layout"]["meta"]
    traces = {i for g in pending for i in g.get("traces", [])}
    notes = {i for g in pending for i in g.get("annotations", [])}
    shapes = {i for g in pending for i in g.get("shapes", [])}
    names = meta.get("names", {})  # a name that would give the answer, as veiled
    points: dict[int, set[int]] = {}  # [trace, point] pairs held (lab.js withoutPoints)
    point_names = {}  # a trace with points held, named while they wait (an owner's names)
    for g in pending:
        for i, j in g.get("points", []):
            points.setdefault(i, set()).add(j)
        point_names.update(g.get("names", {}))
    data = [{"name": names.get(str(i), t.get("name"))} if i in traces else
            {**without_points(t, points[i]), **({"name": point_names[str(i)]}
                                                if str(i) in point_names else {})}
            if i in points else t
            for i, t in enumerate(figure.get("data", []))]
    annotations = [a if i not in notes else {"text": meta["masked"][str(i)]}
                   for i, a in enumerate(layout.get("annotations", []))
                   if i not in notes or str(i) in meta["masked"]]
    summary = figure.get("summary", "")
    for g in pending:
        if g.get("summary"):
            summary = summary.replace(*g["summary"])
    kept = {k: v for k, v in layout.items() if k not in ("annotations", "shapes", "meta")}
    kept.update(meta.get("axes", {}))  # an axis's reach while the parts are hidden
    if "legend" in kept:  # with no title (lab.js untitled: it may print the hidden state)
        kept["legend"] = {k: v for k, v in kept["legend"].items() if k != "title"}
    return {"data": data, "summary": summary, "layout": {
        **kept, "annotations": annotations,
        "shapes": [s for i, s in enumerate(layout.get("shapes", [])) if i not in shapes]}}


def without_points(trace: dict, held: set[int]) -> dict:
    """A trace with some points held, as lab.js withoutPoints draws it: those points' value,
    label and hover text left out (EP10's ledger: the FP8 bar's state until its step)."""
    value = "x" if trace.get("type") == "bar" and trace.get("orientation") == "h" else "y"
    return {k: [None if j in held else x for j, x in enumerate(v)]
            if k in (value, "customdata", "text", "hovertext") and isinstance(v, list) else v
            for k, v in trace.items()}


def screen(client, url: str, ids: list[str], step_id: str, lesson: str = "") -> str:
    """What a student sees of `url` before step_id's guess, tables read by column: with the
    lesson's page (`lesson`), as lab.js masks it then."""
    html = page(client, url)
    if lesson:
        html = masked(html, masked_keys(lesson, step_id))
    return visible(html, ids, step_id) + " " + tables(html)


@pytest.mark.parametrize("name", BEATS)
def test_no_step_prediction_is_answered_before_the_guess(client, name):
    path = VIEWS[name].episode.path
    html = page(client, path)
    found = steps(html)
    ids = [step_id for step_id, _ in found]
    shown, struck = [], set()
    for n, (step_id, step) in enumerate(found):
        figs, words = answers(step), reveals(step)
        if not figs and not words:
            continue
        urls = [path] + case_urls(html) + (try_urls(found[n - 1][1]) if n else [])
        for url in urls:
            text = screen(client, url, ids, step_id, html)
            for (lesson, at, phrase), _why in COINCIDENCES.items():
                if (lesson, at) == (name, step_id) and phrase in text:
                    struck.add(phrase)
                    text = text.replace(phrase, " ")
            shown += [(step_id, url, f"{num} {unit}".strip()) for num, unit in figs
                      if printed(num, unit, text)]
            shown += [(step_id, url, phrase) for phrase in words
                      if phrase.lower() in text.lower()]
    assert not shown, shown
    gone = {p for (lesson, _, p) in COINCIDENCES if lesson == name} - struck
    assert not gone, ("a coincidence no longer on the page", gone)


def drill_figure(drill) -> tuple[str, str]:
    """A number drill's answer as a page would print it: a whole number with its separators,
    else to the places its worked solution prints."""
    from app.labkit.drills import shown_answer

    value = drill.answer()
    number = f"{round(value):,}" if abs(value - round(value)) < 1e-9 else shown_answer(
        value, drill.rel_tol)
    return number, drill.unit


def lesson_page(client, name: str) -> tuple[str, str, list[tuple[str, str]], list[str]]:
    """A lesson's path, its page, its steps (id, html) and their ids."""
    path = VIEWS[name].episode.path
    html = page(client, path)
    found = steps(html)
    return path, html, found, [step_id for step_id, _ in found]


def number_drills(name: str) -> list[tuple[str, str, str]]:
    """(id, answer, unit) of each number drill of a lesson, as drill_figure prints it."""
    return [(d.id, *drill_figure(d)) for d in VIEWS[name].drills
            if d.kind in ("predict", "derive")]


@pytest.mark.parametrize("name", BEATS)
def test_no_drill_answer_is_on_a_case_buttons_screen(client, name):
    """A case button is one click away at every step, and its state's screen stays up while
    the student answers the episode's drills: none of them may print a number drill's answer
    (round-5b cold reading of EP06, item 2: the bad case, 32 tokens contiguous over 8 ranks,
    printed cp-predict-busiest-32's 122 pairs in its table)."""
    path, html, found, ids = lesson_page(client, name)
    numbers = number_drills(name)
    shown = [(drill_id, url, f"{num} {unit}") for url in case_urls(html)
             for drill_id, num, unit in numbers
             if printed(num, unit, screen(client, url, ids, ids[-1]))]
    # A choice's answer is a word: the phrases that state it (a decide drill's `reveals`, a
    # step's data-reveals) are no more on a case button's screen, a step's while it is
    # masked as before that step's guess (round-10 cold reading of EP06, item 5: the good
    # case headlined zigzag "Balanced: every rank computes 260 …", imbalance 1.00, and the
    # Layout menu called it "load-balanced", all step 3's answer).
    for url in case_urls(html):
        unmasked = screen(client, url, ids, ids[-1]).lower()
        shown += [(d.id, url, p) for d in VIEWS[name].drills for p in getattr(d, "reveals", ())
                  if p.lower() in unmasked]
        for step_id, step in found:
            text = screen(client, url, ids, step_id, html).lower()
            shown += [(step_id, url, p) for p in reveals(step) if p.lower() in text]
    assert not shown, shown


# States the bench's own controls set (no try link or case button does: the checks above
# never see them) whose figures answer a step or a drill (round-12 cold reading of EP04-EP05,
# finding 1: EP05 masked nothing, so its sliders showed step 2's 33.3%, step 5's 6.8%, step
# 6's 111 GB and both number drills' answers, 29.4% and 137 GB, before they were asked).
# EP08's clusters of H100s and the models its steps run on them.
RECIPE_H100 = "gpu=h100-sxm&intra_link=nvlink-4&inter_link=ib-ndr"
RECIPE_70B = f"model=llama-3.1-70b&{RECIPE_H100}&seq_len=8192"
RECIPE_MIXTRAL = (f"model=mixtral-8x7b&{RECIPE_H100}&seq_len=4096&tp=2&pp=1&dp=32&ep=8"
                  "&microbatches=4")

BENCH_STATES = {
    # EP01 (round-13 cold reading of EP01-EP05, findings 1 and 4: it masked nothing): the
    # Model select at the 8B (step 1's ratio) and the 405B (step 2's 6.49 TB), the 8B at
    # 16,384 tokens with either fused bill (step 3's 73.0 GB), inference at 32 x 8,192 (step
    # 4's 85.9 GB of KV cache), the 405B in the 18-byte recipe (step 5's 92), the drill's
    # 405B over 64 H200s with ZeRO-3 (101.5 GB of state a GPU), Mixtral (step 6's 747 GB).
    "memory": ["model=llama-3.1-8b", "model=llama-3.1-405b",
               "model=llama-3.1-8b&recompute=flash&seq_len=16384",
               "model=llama-3.1-8b&seq_len=16384",
               "mode=infer&recipe=bf16&seq_len=8192&micro_batch=32",
               "model=llama-3.1-405b&recipe=adam18",
               "model=llama-3.1-405b&gpu=h200&dp=64&zero=3",
               "model=mixtral-8x7b"],
    "pipeline": ["stages=6&microbatches=10", "stages=6&microbatches=12",
                 "schedule=interleaved-1f1b&stages=6&microbatches=12&virtual=2",
                 "schedule=gpipe&stages=8&microbatches=1",
                 "schedule=zb-h1&stages=8&microbatches=32",
                 "schedule=zb-h1&stages=4&microbatches=8",
                 "schedule=gpipe&stages=4&microbatches=32",
                 "stages=8&microbatches=32&recompute=flash&seq_len=32768"],
    # Round-13 cold reading of EP04-EP09, findings 1, 2 and 4: EP04's SP control printed step
    # 5's "about the same" (16.29 + 2.11 against 17.28 + 1.16 ms) and one GPU a node on 25 Gb/s
    # Ethernet printed step 4's 78.6 ms; the 70B state is tp-predict-70b's.
    "tp": ["tp=8&sp=True", "tp=8&gpus_per_node=1&inter_link=eth-25g",
           "tp=8&gpus_per_node=1&inter_link=eth-100g",
           "tp=8&gpus_per_node=1&inter_link=ib-ndr", "model=llama-3.1-70b&tp=8",
           # Round-16 cold reading of EP04, findings 1 and 5: the Model select at 70B with TP
           # at 1, 2 or 4 printed the step time tp-predict-70b divides (one GPU's at t = 1),
           # and with SP on one reduce-scatter's 58.7 MB, half of tp-allreduce-bytes' answer.
           "model=llama-3.1-70b&tp=1", "model=llama-3.1-70b&tp=2", "model=llama-3.1-70b&tp=4",
           "model=llama-3.1-70b&tp=8&sp=True"],
    # EP09's states the reader checked by hand: kept so; and R1 colocated (the good case,
    # the Recipe menu's R1), whose rollout phase printed step 3's cache (round-16 cold
    # reading of EP09, finding 3).
    "placement": ["preset=deepseek-r1", "preset=glm-4-9b&placement=separate",
                  "preset=glm-4-9b&placement=separate&train_gpus=16",
                  "preset=deepseek-r1&placement=separate", "preset=glm-4.7",
                  "preset=deepseek-r1&placement=separate-pd&engines=4&prefill_engines=1"],
    # EP11's try links (round-13 cold reading of EP10-EP11, findings 4 and 5): the headline,
    # the wall-clock and interval charts and the scale chart's hover gave step 1's 2.06 days,
    # step 5's 2.6%, step 6's 54.0% and step 7's 97.9 and 121 days at their own links.
    # Round 16 (findings 4, 6, 7): the opening's rate line, the best interval at sync saves
    # and the goodput at a short interval, where it is nearly all restarts.
    # Round-20 cold reading R, finding 4: the links ask for interval=best, not its seconds.
    "failures": ["", "save=peer&interval=10", "gpus=1024", "save=sync", "save=sync&interval=best",
                 "save=sync&storage_bw=500000000000&interval=best", "interval=best",
                 "restart=300&interval=best", "restart=0&interval=best",
                 "restart=1800&interval=best",
                 "save=sync&storage_bw=20000000000&interval=10800",
                 "save=sync&storage_bw=20000000000&interval=best",
                 "save=sync&storage_bw=20000000000&gpus=32768&interval=best",
                 "save=sync&storage_bw=20000000000&gpus=65536&interval=best",
                 "gpus=65536&step_s=6.237&step_gpus=65536&steps=232458&save=sync"
                 "&storage_bw=20000000000&interval=best",
                 "save=peer&storage_bw=20000000000&gpus=131072&interval=best",
                 "save=sync&storage_bw=20000000000&gpus=131072&interval=best"],
    # EP03: the opening and each step's try-link states, all set by the bench's own selects
    # (round-13 cold reading of EP03, findings 1 and 2: 70B at 8,192 and at 16,384 tokens with
    # full recomputation printed steps 3 and 6's answers, 222 and 65.7 GB).
    "zero": ["", "model=llama-3.1-8b&dp=32&zero=0", "dp=32&zero=0",
             "model=llama-3.1-8b&dp=16&zero=2",
             "model=llama-3.1-405b&dp=32&zero=2", "dp=32&zero=1", "dp=32&zero=2",
             "dp=32&zero=2&recipe=adam18", "dp=32&zero=3&recipe=adam18",
             "model=qwen2.5-7b&dp=32&zero=3&seq_len=8192", "dp=32&zero=3&seq_len=8192",
             "model=gpt-3-175b&dp=32&zero=0", "model=gpt-3-175b&dp=32&zero=3",
             "link=eth-25g", "dp=32&zero=0&link=eth-25g",
             "model=glm-4-9b&zero=3&recompute=full&seq_len=16384", "recompute=full",
             "recompute=full&seq_len=16384", "model=llama-3.1-8b&dp=8&zero=3&recompute=full",
             "model=llama-3.1-8b&dp=1&zero=2&offload=true", "offload=true",
             "model=llama-3.1-405b", "offload=true&recompute=full", "seq_len=1024",
             "zero=0&seq_len=1280",
             "model=gpt-3-175b&gpu=a100-80gb&link=ib-hdr&seq_len=2048&dp=384&micro_batch=4"
             "&recompute=full",
             "model=gpt-3-175b&gpu=a100-80gb&link=ib-hdr&seq_len=2048&dp=1536&micro_batch=1"
             "&recompute=full"],
    # EP10's own try links: each step's state before its guess (round-13 cold reading of
    # EP10-EP11, findings 1-3: step 4's 30.1 GB, step 10's 18.9M, step 11's 45.2 GB and step
    # 12's 63.7% printed at the links that set them, before the guess).
    "precision": ["model=llama-3.1-8b&dp=8&zero=3&seq_len=32768&recipe=fp8-params",
                  "model=llama-3.1-8b&dp=8&zero=3&seq_len=32768&cp=2&recipe=fp8-params",
                  "model=gpt-3-175b&rank=4&modules=qv&seq_len=2048",
                  "model=L80.h8192.a64.f22016.v32000&rank=64&modules=all&seq_len=512"
                  "&recompute=full&ft_recipe=adam12&gpu=h100-sxm",
                  "model=llama-3.1-70b&tp=8&dp=8&zero=1&seq_len=4096&recipe=adam16&offload=100",
                  "model=llama-3.1-70b&tp=8&dp=8&zero=1&seq_len=4096&recipe=adam16&offload=40"],
    # EP02 (round-14 cold reading of EP02-EP05, findings 1 and 2): 16 GB of gradients on 8
    # GPUs over PCIe printed dp-allreduce-pcie's 1,067.2 ms; 16 GPUs on two NDR ports a server
    # dp-predict-16-ib's 12.62x; the 8B at one sequence of 8,192 step 10's 36.5 GB of
    # activations; 4 GPUs on PCIe, once step 8 is guessed, dp-crossover-pcie's 12,852 tokens.
    "dp": ["grad_bytes=16000000000&gpus=8&link=pcie-4", "model=custom&grad_bytes=16000000000"
           "&gpus=8&link=pcie-4", "gpus=16&link=ib-ndr&nics_per_node=2",
           "model=llama-3.1-8b&micro_batch=1&seq_len=8192",
           "model=llama-3.1-8b&micro_batch=1&seq_len=8192&gpus=1024&link=ib-ndr",
           "gpus=4&link=pcie-4", "gpus=16&link=eth-100g&nics_per_node=2",
           # Round-16 cold reading of EP01-EP02, finding 2: the bench's own controls printed
           # step 2's 6.66x (one sequence a GPU), step 4's 93.1% (8 NDR ports), step 6's
           # 250.64x and its tree (1 MiB buckets on 1,024; the tree at 25 MiB too), step 9's
           # 64.0% (4 micro-batches), and once step 3 was guessed step 5's hidden 680 ms and
           # step 7's 6.39x (strong scaling on 64 sequences; since round 17, 16 and 128 GPUs
           # on one batch of 256).
           "micro_batch=1", "gpus=64&link=ib-ndr&nics_per_node=8",
           "gpus=1024&link=ib-ndr&nics_per_node=8&overlap=bucketed&bucket_bytes=1048576",
           "gpus=1024&link=ib-ndr&nics_per_node=8&overlap=bucketed",
           "gpus=64&link=eth-100g&microbatches=4", "gpus=64&link=eth-100g&overlap=bucketed",
           "gpus=16&link=eth-100g&scaling=strong&global_batch=256",
           "gpus=128&link=eth-100g&scaling=strong&global_batch=256"],
    # EP07: the opening, each step's try-link states and the one-control moves that reach
    # them (round-14 cold reading of EP04-EP07, finding 1: the bench masked nothing, so the
    # model, EP, skew, capacity, tokens and network controls printed step 2's 24.2B, step
    # 3's 8.58 ms, step 4's 11.8 ms, step 5's 15.6%, step 6's DP 128, step 8's 1.12 ms, step
    # 10's 4.10x, step 11's f* = 2,378 and the drills' 8 and 27.3B before they were asked).
    "moe": ["", "model=deepseek-v3", "ep=2", "ep=4", "skew=0.5", "skew=1.0",
            "skew=0.5&capacity_factor=1.25", "capacity_factor=1.0", "tokens=1024",
            "tp=2&group=tp", "tp=2&group=ep",
            *(f"model=deepseek-v3&nodes=256&pp=16&link=hgx-h800&{q}" for q in (
                "ep=64", "ep=8", "ep=64&ep_dispatch=deepep", "ep=64&group=dp",
                "ep=64&leaf_nodes=4&oversubscription=4.0", "ep=64&oversubscription=4.0",
                "ep=64&leaf_nodes=4", "ep=64&leaf_nodes=2&oversubscription=7.0",
                "ep=64&leaf_nodes=384&oversubscription=7.0", "ep=4&tokens=1024",
                "ep=8&tokens=1024", "ep=64&tokens=1024", "ep=64&tokens=1024&tp=8&group=tp",
                "ep=64&skew=0.1")),
            "model=deepseek-v3&nodes=256&pp=16&ep=64", "model=deepseek-v3&nodes=256&pp=4&ep=64",
            "model=deepseek-v3&nodes=8&ep=64", "model=deepseek-v3&nodes=256&pp=16&ep=32"
            "&tokens=8192"],
    # EP12's try links loaded fresh (round-15 cold reading of EP06 and EP12, finding 6: the
    # playground masked nothing, so each printed its step's answer: 496 GB, 33.3%, 35.3 GB,
    # 6.44B, 50.5 GB), and the DP32 state whose EP03 chart drew step 4's 35.3 GB (finding 5).
    "playground": ["", "seq_len=16384", "tp=1&pp=1&dp=32&microbatches=1",
                   "microbatches=2", "tp=1&pp=1&dp=32&microbatches=1&zero=3",
                   "gpus_per_node=4&nodes=8&inter_link=eth-100g&show_tp=cost", "show_tp=cost",
                   "cp=4&pp=1&dp=1&cp_layout=contiguous&cp_tokens=16",
                   "model=mixtral-8x7b&tp=2&pp=1&dp=8&ep=8&nodes=2&show_tp=off&show_moe=params",
                   "tp=1&pp=1&dp=32&microbatches=1&zero=3&recompute=full"],
    # EP06 (same reading, findings 3 and 4): the crossover note printed a zigzag's ι = 1, step
    # 3's answer, and at step 7's and 8's links L*'s formula with every factor filled in.
    "cp": ["", "tokens=8&cp=2&layout=zigzag", "tokens=64&cp=8&layout=zigzag",
           "tokens=64&cp=8&seq_len=4096&layout=zigzag&link=eth-25g",
           "tokens=64&cp=8&seq_len=131072&layout=zigzag&link=ib-ndr",
           "tokens=64&cp=8&seq_len=131072&layout=zigzag&link=nvlink-4"],
    # EP08's try links, each step's state before its guess (round-14 cold reading of EP08 and
    # EP10, finding 4: EP08 masked nothing, so step 3's 42.9%, step 4's 496 GB, step 5's 85.1
    # GB, step 7's 5.9%, step 11's 59.2%, step 12's 3.68 ms, step 13's 0.52 ms and step 15's
    # 16.1 GB were on the bench at the links that set them, before the guess). The seed plan
    # (GPT-3 175B on 64 A100s) is the bench's opening state: its changes alone.
    "recipe": ["", "matmul_efficiency=0.6", "tp=1&pp=1&dp=64", "tp=16&pp=4&dp=1",
               "microbatches=4", "replan_nodes=6", "recompute=full", "schedule=zb-h1",
               "gpu=h100-sxm&intra_link=nvlink-4&inter_link=ib-ndr",
               *(f"{RECIPE_70B}&nodes=4&{q}" for q in (
                   "tp=1&pp=1&dp=32&microbatches=1", "tp=8&pp=1&dp=4&microbatches=1",
                   "tp=8&pp=2&dp=2&microbatches=2", "tp=8&pp=2&dp=2&microbatches=16")),
               *(f"{RECIPE_MIXTRAL}{q}" for q in (
                   "", "&tp_overlap=none", "&tp_overlap=all", "&dp_overlap=False", "&zero=3",
                   "&ep_overlap=True")),
               *(f"{RECIPE_70B}&nodes=8&tp=4&pp=1&dp=16&zero=3&recompute=flash"
                 f"&microbatches=8{q}" for q in (
                   "", "&tp_overlap=none", "&tp_overlap=all", "&fsdp_prefetch=False",
                   "&reshard_after_forward=False", "&dp_shard=2")),
               # Step 14's best plans as the planner finds them (the step links to its own).
               f"{RECIPE_70B}&nodes=8&tp=4&pp=4&dp=4&recompute=flash&microbatches=32",
               f"{RECIPE_70B}&nodes=8&zero=3&tp=4&pp=1&dp=16&recompute=flash&microbatches=8",
               f"{RECIPE_70B}&nodes=128&tp=8&pp=8&dp=16&recompute=flash"
               "&schedule=interleaved-1f1b&virtual=8&microbatches=8",
               *(f"model=llama-3.1-8b&{RECIPE_H100}&seq_len=8192&tp=2&pp=1&dp=32&zero=3"
                 f"&recompute=flash&microbatches=4{q}" for q in ("", "&dp_shard=4",
                                                                 "&dp_shard=8"))],
}


def sized(number: str) -> str:
    """A drill's answer as the bench prints a size or a share: three significant figures
    (app/charts/units.py: 136.5 GB reads "137 GB")."""
    value = float(number.replace(",", ""))
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}" if value >= 10 else f"{value:.2f}"


# Phrases a bench state prints that carry a step's (or a drill's) answer figure as another
# quantity, each with why it is not the answer: struck for that step at that state only.
BENCH_COINCIDENCES: dict[tuple[str, str, str, str], str] = {  # (lesson, query, step, phrase)
    ("zero", "model=llama-3.1-405b&dp=32&zero=2", "step-4", "brings it to 1.01 TB"):
        "405B's memory per GPU with full recomputation, not GPT-3 175B's ZeRO-3 traffic",
    ("zero", "model=llama-3.1-405b&dp=32&zero=2", "step-4", "1.01 TB (over)"):
        "the same, in the recompute table",
    **{("precision", f"model=llama-3.1-70b&tp=8&dp=8&zero=1&seq_len=4096&recipe=adam16"
        f"&offload={share}", "step-3", phrase): why for share in (100, 40)
       for phrase, why in (
           ("mixed-precision Adam, 16 B/param",
            "BF16's own bytes at step 12's BF16 state, the baseline the readout gives at every "
            "state ('BF16: 16'); step 3 asks what FP8 parameters keep"),
           ("Mixed-precision Adam, 16 B/param",
            "the same, in the speed chart's note on the optimizer step"))},
    ("recipe", "matmul_efficiency=0.6", "step-11", "a full-wave GEMM at 59.2%"):
        "the matmul efficiency step 1's link sets (60% of peak x the slowest GPU's 0.987), an "
        "input of the step, not ZB-H1's MFU",
    ("moe", "tokens=1024", "step-9", "compute \\u00f7 communication = 10.8"):
        "Mixtral's experts against its all-to-alls at 1,024 tokens (the crossover chart's "
        "label), not DeepSeek-V3's shared expert's share of its expert time",
    ("moe", "tokens=1024", "step-9", "compute ÷ communication = 10.8"):
        "the same, in the crossover's readout",
    ("moe", "model=deepseek-v3&nodes=256&pp=16&ep=32&tokens=8192", "moe-dispatch-mb", ",910,"):
        "rank 910 in the rank map's list of a group's ranks, not megabytes",
}


def parts(name: str, step_id: str) -> list[str]:
    """The figures a step's answer is the plain sum (or difference) of, as the bench prints
    them: a state that prints them gives the answer away by one addition (round-14 cold
    reading of EP02, finding 1: EP02 step 10's 165 GB is the 8B's 128 GB of state, which its
    question lets a student work out, and the 36.5 GB of activations the replica panel
    printed at 8,192 tokens)."""
    from app.charts.units import fmt_bytes

    if (name, step_id) == ("zero", "step-8"):
        # EP03 step 8 asks DeepSpeed's count less the lab's, which is step 2's formula: the
        # 405B's DeepSpeed cell gives it by one subtraction (round-15 cold reading, finding 2).
        from app.routers.zero import facts

        return [fmt_bytes(facts()["l405_z3"]["api"]["deepspeed"]["stage3"]["gpu_bytes"])]
    if (name, step_id) == ("placement", "step-3"):
        # EP09 step 3 asks R1's serving GPU's cache over its weights, which it states: the
        # cache, or the rollout phase's total less the weights and workspace, gives it
        # (round-16 cold reading of EP09, finding 3: colocated R1 printed both).
        from app.routers.rl_lesson import facts

        r = facts()["r1"]["result"]
        return [fmt_bytes(r.rollout_breakdown["kv_cache"]), fmt_bytes(r.rollout_memory_bytes)]
    if (name, step_id) != ("dp", "step-10"):
        return []
    from app.routers.data_parallel import facts

    return [fmt_bytes(facts()["l8_1024"]["api"]["replica"]["breakdown"]["activations"])]


def said(phrase: str, text: str) -> bool:
    """Whether `text` states a revealing phrase: a figure's not inside a larger one (step 7's
    "366 ms" is not said by a step of "12,366 ms")."""
    return bool(re.search(rf"(?<![\d.,]){re.escape(phrase.lower())}", text.lower()))


# A step whose answer is a count the bench prints as an index at its states (DeepSeek-V3's
# expert 128 of 256, rank 128 of 2,048): looked for beside its noun, as a small count is, and
# as the product its readout prints ("GPUs = TP·PP·CP·DP 2,048 = 1·16·1·128").
BENCH_COUNTS = {("moe", "step-6"): "DP"}


def counted(name: str, step_id: str, number: str, unit: str, text: str) -> bool:
    """Whether `text` prints a step's answer figure, a count of BENCH_COUNTS by its noun."""
    counts = BENCH_COUNTS.get((name, step_id))
    if not counts:
        return printed(number, unit, text)
    return printed(number, counts, text, beside=True) or said(f"·{number}", text)


def answers_shown(name: str, step_id: str, step: str, url: str, text: str) -> list[tuple]:
    """What of step ``step_id``'s answers ``text`` (a state's screen before that guess)
    prints: its answer figures, revealing phrases and parts, each as (step, url, what); the
    lesson's COINCIDENCES for that step struck first."""
    for (lesson_, at, phrase), _why in COINCIDENCES.items():
        if (lesson_, at) == (name, step_id):
            text = text.replace(phrase, " ")
    return ([(step_id, url, f"{n} {u}") for n, u in answers(step)
             if counted(name, step_id, n, u, text)]
            + [(step_id, url, p) for p in reveals(step) if said(p, text)]
            + [(step_id, url, p) for p in parts(name, step_id) if said(p, text)])


@pytest.mark.parametrize("name", sorted(BENCH_STATES))
def test_no_answer_at_a_state_the_benchs_controls_set(client, name):
    """At each state, before a step's guess (the steps before it guessed, every drill
    answered), none of that step's answers; with every step guessed but a drill unanswered,
    none of that drill's, as the solution or the bench would print it."""
    path, lesson, found, ids = lesson_page(client, name)
    numbers = number_drills(name)
    shown, struck = [], set()
    for query in BENCH_STATES[name]:
        url = f"{path}?{query}"
        bench = page(client, url)
        for step_id, step in found:
            text = screen(client, url, ids, step_id, lesson)
            for key in BENCH_COINCIDENCES:
                if key[:3] == (name, query, step_id) and key[3] in text:
                    struck.add(key)
                    text = text.replace(key[3], " ")
            shown += answers_shown(name, step_id, step, url, text)  # the lesson's, anywhere
        for drill_id, number, unit in numbers:
            html = masked(bench, {f"drill-{drill_id}"})
            text = visible(html, ids, ids[-1]) + " " + tables(html)
            for key in BENCH_COINCIDENCES:
                if key[:3] == (name, query, drill_id) and key[3] in text:
                    struck.add(key)
                    text = text.replace(key[3], " ")
            shown += [(drill_id, url, f"{n} {unit}") for n in {number, sized(number)}
                      if printed(n, unit, text)]
    assert not shown, shown
    gone = {key for key in BENCH_COINCIDENCES if key[0] == name} - struck
    assert not gone, ("a coincidence no longer on the page", gone)


@pytest.mark.parametrize("query", ["tp=1", "tp=2", "tp=4", "tp=8", "tp=8&sp=True"])
def test_the_70b_bench_holds_its_times_and_bytes_until_the_drills(client, query):
    """EP04's 70B drills ask its efficiency per step and one all-reduce's bytes, and the
    predict says the bench holds 70B's efficiency: at every TP degree (t = 1's step is one
    GPU's, so two steps' quotient was the answer) its readout's times wait for the predict,
    and one collective's bytes, any t and with SP (half the answer), for the derive (round-16
    cold reading of EP04, findings 1 and 5)."""
    html = page(client, f"{VIEWS['tp'].episode.path}?model=llama-3.1-70b&{query}")
    for drill, cells in (("drill-tp-predict-70b", ("compute-ms", "comm-ms", "step-ms")),
                         ("drill-tp-allreduce-bytes", ("collective", "comm-bytes"))):
        shown = masked(html, {drill})
        for cell in cells:
            text = flat(re.search(rf'<dd data-testid="{cell}">(.*?)</dd>', shown, re.S)[1])
            assert not re.search(r"\d", text), (query, drill, cell, text)


@pytest.mark.parametrize("name", BEATS)
def test_no_decide_feedback_prints_another_drills_answer(client, name):
    """A decide's feedback (each option's reason and the worked solution) is on the page its
    number drills are, and a student may answer it first: none prints another drill's answer
    (round-13 cold reading of EP04, finding 3: tp-decide-efficiency's two-node option read
    75.9%, tp-predict-70b's answer)."""
    from app.labkit.view import Decide

    numbers = number_drills(name)
    found = steps(page(client, VIEWS[name].episode.path))
    shown = []
    for drill in VIEWS[name].drills:
        if not isinstance(drill, Decide):
            continue
        text = " ".join([*(o.why for o in drill.judge()), drill.solution()])
        shown += [(drill.id, other, f"{n} {unit}") for other, number, unit in numbers
                  for n in {number, sized(number)} if printed(n, unit, text)]
        # Nor a step's predict (round-14 cold reading of EP04, finding 2: the SP option printed
        # step 5's 86.0%).
        # (With its unit: "ZeRO-1 on 128" GPUs is not EP03 step 1's 128 GB.)
        shown += [(drill.id, step_id, f"{n} {u}") for step_id, step in found
                  for n, u in answers(step) if printed(n, u, text) and re.search(
                      rf"(?<![\d.,]){re.escape(n)}\s?{noun(u)}" if u else re.escape(n), text)]
    assert not shown, shown


@pytest.mark.parametrize("name", BEATS)
def test_each_revealing_phrase_is_one_the_page_prints_after_the_move(client, name):
    """A `reveals` phrase that never appears could not catch anything: each is in the step's
    why or on the bench at one of the step's own try links."""
    html = page(client, VIEWS[name].episode.path)
    found = steps(html)
    ids = [step_id for step_id, _ in found]
    for step_id, step in found:
        after = [flat(step)]
        after += [screen(client, url, ids, ids[-1]) for url in try_urls(step)]
        for phrase in reveals(step):
            assert any(phrase.lower() in text.lower() for text in after), (step_id, phrase)


@pytest.mark.parametrize("name", BEATS)
def test_every_choice_prediction_declares_what_reveals_it(client, name):
    """Every lesson's choice predictions: a figure (`answer`) or the phrases that state its
    word (`reveals`), so the check above has something to look for."""
    for step_id, step in steps(page(client, VIEWS[name].episode.path)):
        form = re.search(r'<form class="predict-form"[^>]*>', step)
        if form and "data-right" in form.group(0):
            assert answers(step) or reveals(step), step_id


@pytest.mark.parametrize("name", BEATS)
def test_a_count_answer_names_its_noun(client, name):
    """A right choice whose label is a bare count ("1") can be looked for only with the noun
    it counts: the prediction declares it ("1 replica")."""
    for step_id, step in steps(page(client, VIEWS[name].episode.path)):
        form = re.search(r'<form class="predict-form"[^>]*>', step)
        right = form and re.search(r'data-right="([^"]*)"', form.group(0))
        if not right:
            continue
        label = dict(re.findall(r'value="([^"]*)"> <span>(.*?)</span>', step, re.S))[right[1]]
        if re.fullmatch(r"\s*\d+\s*", label) and is_small(label.strip()):
            declared = re.search(r'data-answer="([^"]*)"', form.group(0))
            assert declared and any(unit for _, unit in figures(declared[1])), (
                step_id, label, "declare answer= with the noun it counts")


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
    assert printed("2", "×", "twice: 2× as long") and not printed("2", "×", "√(2 × 5.42 ms)")
    assert printed("15", "bytes", "DeepSeek-V3, 15 B/param") and printed("15", "bytes", "15 bytes")
    assert not printed("15", "bytes", "15 B parameters")
    # A count beside its noun, either side, singular or plural; not beside another one, nor
    # inside a larger number or a list of degrees.
    assert printed("1", "replicas", "Replicas 1 Engines 4")
    assert printed("1", "replicas", "it trains 1 replica")
    assert printed("4", "DP", "TP 8 DP 4 PP 2") and printed("4", "DP", "DP=4")
    assert not printed("4", "DP", "TP 4, DP 8") and not printed("4", "DP", "DP 40")
    assert not printed("1", "replicas", "Engines 1") and not printed("2", "heads", "2 layers")
    cells = tables("<table><thead><tr><th>Pool</th><th>GPUs</th></tr></thead><tbody><tr>"
                   "<th>train</th><td>64</td></tr></tbody></table>")
    assert printed("64", "GPUs", cells) and not printed("64", "Pool", cells)


def test_the_playground_s_two_memory_audits_wait_for_step_1s_guess(client):
    """EP12 step 1 asks the bytes on the heaviest GPU at 16,384 tokens (round-16 cold reading
    of EP12, finding 1: it asked whether EP01's ledger agreed with EP08's audit, which its
    wording answered). At its link's state neither EP01's panel nor EP08's audit prints the
    total before the guess; at the opening state and its case buttons' states, whose totals
    the question quotes, both are drawn (round-15, finding 2, held EP01's at every state)."""
    from app.charts.units import fmt_bytes
    from app.routers.playground import facts

    path, html, _, ids = lesson_page(client, "playground")
    keys = masked_keys(html, "step-1")
    long = facts()["long"]
    answer = fmt_bytes(long["api"]["panels"]["memory"]["answer"]["total_bytes"])
    served = masked(page(client, f"{path}?seq_len={long['params']['seq_len']}"), keys)
    for lab in ("memory", "recipe"):
        panel = re.search(rf'<article class="panel" id="panel-{lab}".*?</article>', served, re.S)
        assert panel and not said(answer, re.sub(r"<[^>]+>", " ", panel.group(0))), lab
    seed = facts()["seed"]["api"]["panels"]
    for url in [path, *case_urls(html)]:
        served = masked(page(client, url), keys)
        at = "dp=" not in url  # the seed's plan, not the bad case's
        ledger = seed["memory"]["answer"]["total_bytes"]
        panel = re.search(r'<article class="panel" id="panel-memory".*?</article>', served, re.S)
        assert panel and said(fmt_bytes(ledger), panel.group(0)) == at, url
        if at:
            audit = fmt_bytes(seed["recipe"]["answer"]["memory_per_gpu_bytes"])
            drawn = re.search(r'id="recipe-memory"[^>]*aria-label="([^"]*)"', served)
            assert drawn and said(audit, drawn.group(1)), url


def _recipe_completions(step_id: str, api: dict, seed: dict) -> list[str]:
    """What, printed beside the figures a step's state leaves drawn, completes its answer in
    one line of arithmetic (round-16 cold reading of EP07 and EP08, finding 1): step 1's
    efficiency is the compute's ms over the step's, which MFU (× the seed's ratio) or one
    micro-batch's share gives; step 11's MFU is the seed's × the efficiency's ratio, or the
    predict's model FLOPs at peak over the share; step 12's exposed DP sync is the remainder
    of the step's parts, given their shares."""
    from app.charts.units import fmt_ms, fmt_pct

    step = api["step_s"]
    asked = "dp" if step_id == "step-12" else "tp"  # the part the step asks, left out
    shares = [fmt_pct(v / step) for k, v in api["segments_s"].items() if k != asked and v > 0]
    return {
        "step-1": [fmt_pct(api["mfu"]), f"{api['segments_s']['compute'] * 1e3:,.1f}",
                   fmt_ms(api["micro_step_s"])],
        "step-11": [fmt_pct(api["efficiency"]), fmt_ms(api["micro_step_s"]),
                    f"{api['segments_s']['bubble'] * 1e3:,.1f}"],
        "step-12": [fmt_pct(api["efficiency"]), fmt_pct(api["mfu"]), f"{step * 1e3:,.0f} ms",
                    *shares],
        # Step 10 asks whether the H100 is more or less efficient: its efficiency outright
        # (finding 5), or its MFU or shares beside the A100's.
        "step-10": [fmt_pct(api["efficiency"]), fmt_pct(api["mfu"]), *shares],
    }[step_id]


@pytest.mark.parametrize("step_id, query", [
    ("step-1", "matmul_efficiency=0.6"), ("step-11", "schedule=zb-h1"),
    ("step-10", RECIPE_H100),
    *(("step-12", f"{RECIPE_MIXTRAL}{q}") for q in ("", "&dp_overlap=false", "&tp_overlap=all"))])
def test_recipe_no_step_answer_is_one_line_of_arithmetic_on_what_its_state_draws(
        client, step_id, query):
    """EP08 steps 1, 11 and 12 at their own states, before their guess: the figure that would
    complete the answer's one line of arithmetic with what stays drawn waits too."""
    path, lesson, _found, ids = lesson_page(client, "recipe")
    api = client.get(f"/api/recipe?{query}").json()
    text = screen(client, f"{path}?{query}", ids, step_id, lesson)
    shown = [p for p in _recipe_completions(step_id, api, None) if said(p, text)]
    assert not shown, (step_id, query, shown)


@pytest.mark.parametrize("q", ["ep=64", "ep=8", "ep=64&ep_dispatch=deepep"])
def test_moe_step_3s_ep_rate_waits_at_its_states(client, q):
    """EP07 step 3 at DeepSeek-V3's states, before its guess: the network chart's caption no
    longer prints the EP group's rate, which over the group table's bytes is the dispatch's
    time (round-16 cold reading of EP07 and EP08, finding 3: 462 MB / 54 GB/s = 8.56 ms)."""
    path, lesson, _found, ids = lesson_page(client, "moe")
    query = f"model=deepseek-v3&nodes=256&pp=16&link=hgx-h800&{q}"
    ep = next(g for g in client.get(f"/api/moe?{query}").json()["network"] if g["kind"] == "ep")
    text = screen(client, f"{path}?{query}", ids, "step-3", lesson)
    assert not said(f"all-to-all {ep['bandwidth'] / 1e9:,.0f} GB/s", text), query
    assert said("EP all-to-all ? (after step 3's guess)", text), query
    # Round-21 cold reading Q, finding 2 (open again in round 22 after 70921605): across
    # nodes the crossover panel printed the all-to-alls' time (2 × step 3's dispatch, 17.2 ms
    # at EP 64) and their effective rate (53.9 GB/s against the predict's 160: "about 3 times
    # slower" read off), and f* and the ratio give them back from the rate and the GEMMs'
    # time. Held until step 3's guess; the chart keeps the GEMMs and holds the rest.
    body = client.get(f"/api/moe?{query}").json()
    cross = re.search(r"the all-to-alls move [^()]*? in (\S+ ms|\?) \(.*?effective rate "
                      r"B = (\S+) GB/s.*?= (\S+) against this model's [\d,]+: compute ÷ "
                      r"communication = (\S+)", text)
    assert cross, query
    x = body["crossover"]
    if body["ep_per_node"] < body["ep"]:  # EP across nodes: step 3's question
        assert cross.groups() == ("?",) * 4, (query, cross.group(0))
        for gone in (f"{x['comm_s'] * 1e3:.1f} ms", f"{x['busbw'] / 1e9:.1f}",
                     f"{round(x['crossover']):,}", f"{x['compute_s'] / x['comm_s']:.3g}"):
            assert not said(gone, text), (query, gone)
        assert said(f"{x['compute_s'] * 1e3:.1f} ms of expert GEMMs a layer", text), query
        # after step 3's guess (step 11's screen) the panel and the chart say them
        after = screen(client, f"{path}?{query}", ids, "step-11", lesson)
        assert said(f"{x['comm_s'] * 1e3:.1f} ms of dispatch and combine", after), query
        assert said(f"B = {x['busbw'] / 1e9:.1f} GB/s", after), query


@pytest.mark.parametrize("group", ["", "dp", "edp", "pp"])
def test_moe_step_6s_dp_waits_in_step_7_and_the_rank_map(client, group):
    """EP07 step 6 (DeepSeek-V3, 2,048 GPUs, PP 16, EP 64: DP is 128) before its guess
    (round-22 cold reading Q, finding 6): step 7's intro and predict, on screen below it,
    said "all of one stage's ranks, 16 nodes" and "its DP groups 16" (16 × 8 = 128), and the
    rank map's caption coloured by DP "16 groups of 128" (by PP "128 groups of 16")."""
    path, lesson, _found, ids = lesson_page(client, "moe")
    query = "model=deepseek-v3&nodes=256&pp=16&link=hgx-h800&ep=64" + (
        f"&group={group}" if group else "")
    text = screen(client, f"{path}?{query}", ids, "step-6", lesson)
    for told in ("stage's ranks, 16 nodes", "DP groups 16", "nodes 16 and 8 apart",
                 "groups of 128", "128 groups", "groups of 2;"):
        assert not said(told, text), (group, told)
    if group:  # the rest of the caption, and the whole of it once step 6 is guessed
        assert said("2,048 GPUs on 256 nodes of 8, ? (after step 6", text), group
        after = screen(client, f"{path}?{query}", ids, "step-7", lesson)
        size = {"dp": 128, "edp": 2, "pp": 16}[group]
        assert said(f"groups of {size}", after), group


def test_recipe_step_9s_re_plan_waits_in_the_chart_too(client):
    """EP08 step 9 at its re-plan state, before its guess: the step chart draws the re-plan's
    bar without its segments and names it "re-plan" alone (round-16 cold reading of EP07 and
    EP08, finding 4: its bubble's 13.3% and its DP sync of 6.5 ms, drawn, told the plan)."""
    path, lesson, _found, ids = lesson_page(client, "recipe")
    after = client.get("/api/recipe?replan_nodes=6").json()["replan"]["after"]
    p = after["plan"]
    text = screen(client, f"{path}?replan_nodes=6", ids, "step-9", lesson)
    drawn = [f"TP{p['tp']}×PP{p['pp']}", *(f"{v * 1e3:.3f}".rstrip("0").rstrip(".")
                                            for v in after["segments_s"].values() if v > 0)]
    assert not [d for d in drawn if said(d, text)]
    assert "is not whole" in text or "DP to what divides the rest" in text


CASES = [(name, kind) for name, view in VIEWS.items() for kind in ("good", "bad")
         if getattr(view, kind) is not None]
# The curves of other links than a case's own that its chart holds for a step's guess: not
# the case's state, so its line need not wait for them (EP02's good case is NVLink 4 at 8
# GPUs, step 3 holds the IB and Ethernet curves; EP04's is TP 8 on NVLink, step 4 holds the
# Ethernet curve).
ELSEWHERE = {("dp", "good", "step-3"): {"IB NDR 400G, 1 port a server",
                                        "Ethernet 100G, 1 port a server"},
             ("tp", "good", "step-4"): {"Ethernet 25G"}}


@pytest.mark.parametrize(("lab", "kind"), CASES)
def test_round17_a_case_whose_headline_waits_says_for_which_guess(client, lab, kind):
    """Round 17 (issue 36): a case button whose headline is masked at its state (EP01's 70B
    training, EP02's Ethernet, EP06's both, EP07's hot expert, EP09's both, EP10's both,
    EP11's both) drew "?" with nothing saying why, and read as a broken button. Unless the
    button is held until that guess (EP05's 8 x 1), its line opens with what waits and the
    guess that lifts it, read off the case's rendered headline and the lesson's steps; after
    that guess the line is as before, and a case whose headline hides nothing says nothing."""
    from html import unescape

    view = VIEWS[lab]
    case = getattr(view, kind)
    lesson = client.get(view.episode.url).text
    page = client.get(f"{view.episode.url}?{case.query_string}").text
    verdict = re.search(r'<(div|p) class="verdict[^>]*>(.*?)</\1>', page, re.S)
    keys = {k for ks in re.findall(r'answer-mask[^>]*data-after-guess="([^"]*)"',
                                   verdict[2] if verdict else "")
            for k in ks.split()}
    # And the steps that own parts of the case's own diagram at its state, where its line
    # waits for them too (round-20 cold reading R, finding 8: EP10's QLoRA cases named step 1
    # alone, and after step 1's guess their fine-tune chart drew only the full fine-tune's
    # bar, its LoRA and QLoRA bars step 11's).
    figure = re.search(rf'<script type="application/json" class="figure" '
                       rf'data-target="{case.diagram}"[^>]*>(.*?)</script>', page, re.S)
    # Every owner counts, whatever the case declares (issue 36 review: intersecting with
    # ``case.waiting_on`` let a case that declared nothing pass), save an owner whose parts all
    # lie on the other links' curves its chart compares (ELSEWHERE), not on the case's state.
    if case.diagram and figure:
        drawn = json.loads(figure[1])
        for owner in drawn.get("layout", {}).get("meta", {}).get("owners", ()):
            touched = {*owner.get("traces", ()), *(p[0] for p in owner.get("points", ()))}
            names = {drawn["data"][t].get("name") for t in touched}
            own_parts = owner.get("annotations") or owner.get("shapes") or not touched
            for k in owner["step"].split():
                if own_parts or not names <= ELSEWHERE.get((lab, kind, k), set()):
                    keys.add(k)
    ids = [step_id for step_id, _ in steps(lesson)]
    # The last step whose guess the headline still waits for, before that guess.
    waiting = [s for s in ids if masked_keys(lesson, s) & keys]
    line = re.compile(rf'id="case-{kind}-why"[^>]*>(.*?)</span>', re.S)

    def shown(step: str) -> str:
        return unescape(flat(line.search(masked(lesson, masked_keys(lesson, step)))[1]))

    if not waiting or case.held_until in keys:
        assert "case-wait" not in line.search(lesson)[1], (lab, kind)
        return
    last = waiting[-1]
    note = f"{last.replace('-', ' ')}'s guess"
    assert shown(last).startswith(case.waiting) and note in shown(last), (lab, kind, shown(last))
    assert shown(last).endswith(case.text), shown(last)
    if last != ids[-1]:
        after = ids[ids.index(last) + 1]
        assert shown(after) == flat(case.text), (lab, kind, shown(after))


def test_round19_ep04s_bad_case_prints_no_speed_up_before_step_4s_guess(client):
    """Round-19 cold reading X, finding 3: EP04's bad case (TP = 4 over 25 Gb/s Ethernet),
    clickable before step 4's guess, printed "10.7% efficient, 0.43x one GPU" and its
    collective's time: step 4 asks the same link at t = 8 (0.39x), and the bench laid out the
    method. Before step 4's guess its screen prints neither speed-up nor its efficiency or
    collective time; after it, they show."""
    view = VIEWS["tp"]
    lesson = page(client, view.episode.path)
    ids = [step_id for step_id, _ in steps(lesson)]
    bad = next(url for url in case_urls(lesson) if "eth-25g" in url)
    api = client.get("/api/tp?" + bad.partition("?")[2]).json()
    four = client.get("/api/tp", params={"tp": 8, "gpus_per_node": 1,
                                         "inter_link": "eth-25g"}).json()
    said = [(f"{api['step_speedup']:.2f}", "×"), (f"{four['step_speedup']:.2f}", "×"),
            (f"{100 * api['step_efficiency']:.1f}", "%"),
            (f"{api['collective_s'] * 1e3:.1f}", "ms")]
    before = screen(client, bad, ids, "step-4", lesson)
    assert not [f for f in said if printed(*f, before)], said
    after = screen(client, bad, ids, "step-5", lesson)
    assert all(printed(*f, after) for f in said[:1] + said[2:]), said


def test_round20_ep07_dp_waits_in_the_group_and_network_tables(client):
    """Round-20 cold reading Q, finding 4: at DeepSeek-V3's state (PP 16, EP 64 on 2,048
    GPUs, every DeepSeek-V3 link of steps 1 and 3) the DP cells waited for step 6's guess,
    but the PP row's group count (TP·CP·DP = 128) and the DP rows' spans (16 nodes = 128
    GPUs) printed DP beside them. They wait for step 6 too; after it, all are the engine's."""
    path, lesson, _found, ids = lesson_page(client, "moe")
    query = "model=deepseek-v3&nodes=256&pp=16&link=hgx-h800&ep=64"
    api = client.get(f"/api/moe?{query}").json()
    pp = next(g for g in api["groups"] if g["kind"] == "pp")
    dp = next(g for g in api["groups"] if g["kind"] == "dp")
    net = next(g for g in api["network"] if g["kind"] == "dp")
    assert pp["count"] == dp["size"] == net["nodes"] * 8  # each gives DP
    leaked = [f"PP {pp['size']} {pp['count']:,} ", f"spans up to {dp['nodes_spanned']} nodes PP",
              f"once a step {net['nodes']} nodes"]
    before = screen(client, f"{path}?{query}", ids, "step-6", lesson)
    assert not [p for p in leaked if p in before]
    after = screen(client, f"{path}?{query}", ids, "step-7", lesson)
    assert all(p in after for p in leaked)


# Phrases that say which copies of the weights an FP8 recipe keeps beside its bf16 copy: a
# second FP8 copy (the transpose) or the bf16 copy kept, step 1's "more than 16" by sum.
FP8_COPIES_TOLD = (r"\bnot two\b", r"\bkept twice\b", r"\btwo FP8 cop", r"\bits transpose\b",
                   r"\btransposed (?:FP8 )?copy\b", r"\bboth layouts\b",
                   r"\bbeside the bf16 copy\b", r"\bthe bf16 copy goes\b",
                   r"\bDrop the bf16 copy\b", r"\bas in step 2\b", r"\bbf16 weights kept\b")


def test_round21_ep10_no_other_step_tells_step_1_what_delayed_scaling_keeps(client):
    """Round-21 cold reading R, finding 6: EP10 step 1 asks whether the delayed-scaling recipe
    keeps fewer, as many or more bytes than 16; below it at load, step 5's question ("the lab
    assumes it does, as in step 2 ... one FP8 copy, not two") and step 6's predict ("kept
    twice ... beside the bf16 copy") said it keeps a bf16 copy and two FP8 copies (18 B).
    Before step 1's guess no other step's title, question, predict or limit says which copies
    a recipe keeps; the whys do, once open."""
    _path, lesson, found, ids = lesson_page(client, "precision")
    others = "".join(f'<section class="step" id="{step_id}"{step}</section>'
                     for step_id, step in found if step_id != "step-1")
    before = visible(others, ids, "step-1")
    told = [p for p in FP8_COPIES_TOLD if re.search(p, before)]
    assert not told, told
    assert "the transposed copy needs no new scales" in lesson  # step 5's why says it


@pytest.mark.parametrize("q", ["pp=16&ep=64", "pp=1&ep=64", "pp=16&ep=8"])
def test_round21_ep07_params_chart_holds_the_routed_split_for_the_derive(client, q):
    """Round-21 cold reading Q, finding 4: the params derive (moe-predict-params-dsv3: 671B,
    58 MoE layers of 256 experts of 3 × 7,168 × 2,048, per GPU at EP 64) has its hard part in
    the first product, 654B of routed experts, and every DeepSeek-V3 state's params chart
    labelled the total bar's split (654B routed, 17.1B the rest): 654/64 + 17.1 read off.
    The split waits for the derive's answer (its label, bar and hover); the 671B total, which
    the derive gives, stays."""
    from app.routers.moe import VIEW

    path, lesson, _found, ids = lesson_page(client, "moe")
    query = f"model=deepseek-v3&nodes=256&link=hgx-h800&{q}"
    body = client.get(f"/api/moe?{query}").json()
    routed = next(d for d in VIEW.drills if d.id == "moe-predict-params-dsv3")
    assert routed
    from app.charts.units import fmt_count
    from labs.model.presets import get_model

    m = get_model("deepseek-v3")
    experts = m.moe_layers * m.experts * m.expert_size  # the chart's routed segment
    # (the rest, 17.1B, is the dense part every token uses too: the active bar draws it)
    split = [fmt_count(experts)]
    html = page(client, f"{path}?{query}")
    keys = masked_keys(lesson, "step-2") | {"drill-moe-predict-params-dsv3"}
    text = visible(masked(html, keys), ids, "step-2")
    assert split[0] == "654B" and not [s for s in split if s in text], (query, split)
    assert f"{body['params'] / 1e9:.0f}B" in text  # the total the derive gives
    opened = visible(masked(html, keys - {"drill-moe-predict-params-dsv3"}), ids, "step-2")
    assert split[0] in opened  # drawn once the derive is answered


@pytest.mark.parametrize("plan", ["dp64", "tp16"])
def test_round22_ep08_step_2s_plans_hold_every_audit_readout_until_its_guess(client, plan):
    """Round-22 cold reading Q, finding 5: at step 2's DP64 and TP16 × PP4 states (the
    controls set by hand: the try links wait for the guess) the audit rows were masked, but
    the memory chart's caption ("814 GB per GPU against 80.0 GB, over by 734 GB"; TP16's
    "49.7 GB …, fits"), its hover (the 731 GB state), the memory readout and table, and the
    passing audits' ticks ("✓ DP traffic": not that option) answered two of the four options.
    Each waits for step 2's guess now, and shows once it is in."""
    from app.charts.units import fmt_bytes
    from app.routers.recipe_lesson import facts

    path, lesson, _found, ids = lesson_page(client, "recipe")
    state = facts()[plan]
    api = state["api"]
    html = page(client, f"{path}?{'&'.join(f'{k}={v}' for k, v in state['params'].items())}")
    text = visible(masked(html, masked_keys(lesson, "step-2")), ids, "step-2")
    told = [fmt_bytes(api["memory_per_gpu_bytes"])]
    heavy = api["stages"][api["heaviest_stage"]]
    state_gb = (heavy["total_bytes"] - heavy["breakdown"]["activations"]
                - heavy["breakdown"]["embedding_and_logits"]) / 1e9
    shown = [t for t in [*told, f"{state_gb:.1f}", f"{state_gb:.3f}", ", fits",
                         "over by", "✓ DP traffic", "✓ Memory per GPU", "✗ Memory per GPU",
                         "✓ TP inside a node", "✗ TP inside a node"]
             if t in text]
    assert not shown, (plan, shown)
    assert "step 2's guess and step 2's guess" not in html  # the mask says it once
    opened = visible(masked(html, masked_keys(lesson, "step-3")), ids, "step-3")
    assert told[0] in opened and "✓ DP traffic" in opened


def test_round23_ep05_step_5s_predict_does_not_work_step_2s_formula(client):
    """Round-23 cold reading Q, finding 3: step 5's predict, on screen under step 2's, said
    "1F1B idles 7/39 of the step": (p − 1)/(m + p − 1) worked at 8 × 32, step 2's answer's
    form before its guess. It prints the share the engine measures (1F1B 8 × 32) instead; the
    fraction waits for step 2's why."""
    from app.charts.units import fmt_pct
    from app.routers.pipeline import facts

    path, lesson, found, ids = lesson_page(client, "pipeline")
    urls = [path, *case_urls(lesson), *try_urls(dict(found)["step-1"])]
    shown = [url for url in urls if "7/39" in screen(client, url, ids, "step-2", lesson)]
    assert not shown, shown
    predict = re.search(r'<p class="predict">.*?</p>', dict(found)["step-5"], re.S)[0]
    assert f"1F1B idles {fmt_pct(facts()['good']['api']['bubble_fraction'])} " in flat(predict)
    assert "7/39" in screen(client, path, ids, "step-3", lesson)  # step 2's why has it


def test_round28_ep08_step_13s_first_try_link_veils_the_charged_sms(client):
    """Round-28 cold reading, finding 1: EP08 step 13's first try link (TP4 x FSDP16's layer)
    masked the forward's figure and the DP / FSDP rows before the guess, but left three ways
    to the answer on screen: the timeline's "SMs lent to NCCL, charged: 125 ms" (the gather
    charged as SMs lent), the layer's "backward 14.4 ms on the critical path" (less the
    table's kernels and TP, FSDP's part of the backward), and the causes table's micro-batch
    total (less the rows shown, DP's part). Each waits for step 13's guess now."""
    from app.charts.units import fmt_ms
    from app.recipe_answer import layer_api, micro_api, timeline_api
    from app.routers.recipe_lesson import facts

    path, lesson, _found, ids = lesson_page(client, "recipe")
    state = facts()["lv"]
    r = state["result"].result
    told = [f"SMs lent to NCCL, charged: {fmt_ms(timeline_api(r)['charged_sm_s'])}",
            f"backward {fmt_ms(layer_api(r)['backward_s'])} on the critical path",
            f"of {fmt_ms(micro_api(r)['micro_step_s'])}"]
    html = page(client, f"{path}?{'&'.join(f'{k}={v}' for k, v in state['params'].items())}")
    text = visible(masked(html, masked_keys(lesson, "step-13")), ids, "step-13")
    assert not [t for t in told if t in text], [t for t in told if t in text]
    opened = visible(masked(html, masked_keys(lesson, "step-14")), ids, "step-14")
    assert all(t in opened for t in told), [t for t in told if t not in opened]


def _region(html: str, pattern: str) -> str:
    """The text of the first element `pattern` opens (a caption, a table), tags stripped."""
    found = re.search(pattern + r".*?</(?:p|table)>", html, re.S)
    assert found, pattern
    return flat(found.group(0))


def test_round29_ep02_step_10s_replica_caption_waits_at_its_own_link(client):
    """Round-29 reading A, finding 1: at EP02 step 10's first try link the replica panel's
    figures waited for its guess, but the chart's caption printed them raw ("169 GB per GPU
    … largest part: Adam moments, 64.2 GB"), the answer with the output layer. It goes through
    the figure's owner now, masked until step 10's guess and shown after."""
    from app.charts.units import fmt_bytes
    from app.routers.data_parallel import facts

    path, lesson, found, ids = lesson_page(client, "dp")
    state = facts()["l8_1024"]
    url = try_urls(dict(found)["step-10"])[0]
    assert url == f"{path}?{'&'.join(f'{k}={v}' for k, v in state['params'].items())}", url
    replica = state["api"]["replica"]
    told = [f"{fmt_bytes(replica['total_bytes'])} per GPU",
            fmt_bytes(replica["breakdown"]["optimizer_moments"])]
    caption = r'<p class="chart-summary" data-chart="dp-replica">'
    html = page(client, url)
    before = _region(masked(html, masked_keys(lesson, "step-10")), caption)
    assert not [t for t in told if t in before], before
    assert not [t for t in told if t in screen(client, url, ids, "step-10", lesson)]
    after = _region(masked(html, set()), caption)
    assert all(t in after for t in told), after


def test_round29_ep03_step_10s_own_links_hold_the_labs_fall(client):
    """Round-29 reading A, finding 2: EP03 step 10 asks how much of Table 2's fall the lab
    shows, and its two try links (GPT-3 175B on 384 and 1,536 A100s) masked their figures for
    step 4 alone, guessed by then: "Per step at 59.7% MFU" against 57.2%, the compute's times,
    ZeRO-3's 0.00 ms exposed and T* under 2,048 gave "under a tenth". Each waits for step
    10's guess at its runs' states now, and shows after it."""
    from app.charts.crossover import tokens
    from app.charts.units import fmt_ms
    from app.routers.zero import facts
    from labs.zero.lab import achieved_mfu, crossover

    path, lesson, found, ids = lesson_page(client, "zero")
    urls = try_urls(dict(found)["step-10"])
    for key, url in zip(("t2_384", "t2_1536"), urls, strict=True):
        r = facts()[key]["result"]
        assert url.endswith(f"dp={r.input.dp}&micro_batch={r.input.micro_batch}&zero=3"
                            "&recompute=full"), url
        x = crossover(r)
        told = [f"{100 * achieved_mfu(r.input, r.compute_seconds):.1f}", fmt_ms(x.compute_s),
                tokens(x.crossover_tokens)]
        html = page(client, url)
        text = screen(client, url, ids, "step-10", lesson)
        assert not [t for t in told if said(t, text)], (url, told)
        shown = masked(html, masked_keys(lesson, "step-10"))
        for table in ("zero-overlap", "zero-crossover", "zero-recompute"):
            cells = _region(shown, rf'<table class="chart-table" data-chart="{table}">')
            assert not re.search(r"\d ms|\d% MFU", cells), (url, table, cells)
            assert re.search(r"\d ms", _region(html, rf'<table class="chart-table" '
                                                    rf'data-chart="{table}">')), table
        opened = screen(client, url, ids, ids[-1])  # every guess made: nothing masked
        assert all(said(t, opened) for t in told), (url, told)


def test_round29_ep04_step_6s_first_link_holds_the_cost_charts_collectives(client):
    """Round-29 reading A, finding 3: at EP04 step 6's first try link (one GPU a node on
    InfiniBand NDR) the readout held the collectives for step 6, but the cost chart beside it
    printed them: its caption ("17.28 ms of compute and 17.46 ms of collectives"), its bars,
    its label and its table's collectives and Sent at each t; compute about equal to the
    collectives at h/t = 2,048 put (h/t)* just above it. They wait for step 6's guess there."""
    from app.routers.tensor_parallel import facts

    path, lesson, found, ids = lesson_page(client, "tp")
    state = facts()["ib"]
    url = try_urls(dict(found)["step-6"])[0]
    assert url == f"{path}?{'&'.join(f'{k}={v}' for k, v in state['params'].items())}", url
    r = state["result"]
    told = [f"{c.comm_s * 1e3:.2f} ms" for c in r.sweep if c.tp > 1]
    text = screen(client, url, ids, "step-6", lesson)
    assert not [t for t in told if t in text], [t for t in told if t in text]
    html = page(client, url)
    cost = _region(masked(html, masked_keys(lesson, "step-6")),
                   r'<table class="chart-table" data-chart="tp-cost">')
    assert not re.search(r"\d MB|\d GB", cost), cost  # its Sent column
    opened = screen(client, url, ids, ids[-1])  # every guess made: nothing masked
    assert all(t in opened for t in told), [t for t in told if t not in opened]


@pytest.mark.parametrize("name", BEATS)
def test_round29_no_steps_own_try_state_prints_its_answer_before_the_guess(client, name):
    """Round-29 reading A, findings 1-3: a step's own try links can be followed before its
    guess, and the three leaks above were each at such a state. At every step's own try
    state, masked as lab.js masks it before that guess, none of the step's answer figures,
    revealing phrases or parts (``parts``: what it is the plain sum of) is on screen. Every
    lesson with steps (the reading covered EP01-EP04; run over the rest, it found EP10's two:
    step 1's first link printed its reveal "this recipe keeps them" in BF16's own sync why,
    step 2's link "14.8 GB more than BF16's 60.2 GB" once step 1 was guessed); the three pins
    above hold what a figure gives by one division, which no literal check sees."""
    path, lesson, found, ids = lesson_page(client, name)
    shown = []
    for step_id, step in found:
        for url in try_urls(step):
            text = screen(client, url, ids, step_id, lesson)
            shown += answers_shown(name, step_id, step, url, text)
    assert not shown, shown



def test_round29_ep10_step_2s_link_holds_the_fp8_column_and_bar_until_its_guess(client):
    """EP10 step 2 asks whether the delayed recipe holds more or less than BF16 at the 70B on
    ZeRO-1, and its try link drew, once step 1 was guessed, the answer: the headline "75.0 GB
    per GPU, 14.8 GB more than BF16's 60.2 GB", the ledger's caption and total, and the FP8
    column and bar part by part, which sum to it. With the FP8 copies whole
    (``unsharded_step``) each waits for step 2's guess, and shows after it."""
    from app.charts.units import fmt_bytes
    from app.routers.precision_lesson import facts

    path, lesson, found, ids = lesson_page(client, "precision")
    state = facts()["te70"]
    url = try_urls(dict(found)["step-2"])[0]
    assert url == f"{path}?{'&'.join(f'{k}={v}' for k, v in state['params'].items())}", url
    r = state["result"]
    told = [fmt_bytes(r.extra_bytes), fmt_bytes(r.ledger.total_bytes)]
    html = page(client, url)
    text = screen(client, url, ids, "step-2", lesson)
    assert not [t for t in told if said(t, text)], told
    ledger = r'<table class="ledger" data-chart="precision-ledger">.*?</table>'
    column = re.findall(r"FP8 delayed scaling ([^;]*) ;", tables(re.search(
        ledger, masked(html, masked_keys(lesson, "step-2")), re.S)[0]))
    assert column and set(column) == {"?"}, column
    figure = json.loads(re.search(r'class="figure" data-target="[^"]*ledger[^"]*"[^>]*>(.*?)'
                                  r"</script>", html, re.S)[1])
    owners = figure["layout"]["meta"]["owners"]
    veiled = partly_veiled(figure, [o for o in owners if "step-2" in o["step"].split()])
    assert [t["y"][1] for t in veiled["data"]] == [None] * len(figure["data"]), veiled["data"]
    opened = screen(client, url, ids, ids[-1])  # every guess made: nothing masked
    assert all(said(t, opened) for t in told), told


def test_round31_ep10_step_7s_bill_waits_at_op_level_recomputation(client):
    """Round-31 reading A, finding 3: EP10 step 7 asks what share of torchtitan's measured
    peak the ledger's BF16 bill is, and at op-level recomputation the bench printed that bill
    before the guess: at its own link ("Per GPU 37.1 GB", the ledger's totals, the headline)
    and at the opening (FP8 beside BF16) with the recompute control moved to op, one division
    from 72%. Masked as lab.js masks before step 7's guess (steps 1-6 guessed), neither state
    prints BF16's total, nor its part-by-part column and bar; every guess made, both do."""
    from app.charts.units import fmt_bytes
    from app.routers.precision_lesson import facts

    path, lesson, found, ids = lesson_page(client, "precision")
    bf16 = facts()["titan_bf16"]
    own = try_urls(dict(found)["step-7"])[0]
    opening = facts()["titan"]["params"]
    moved = f"{path}?{'&'.join(f'{k}={v}' for k, v in {**opening, 'recompute': 'op'}.items())}"
    told = fmt_bytes(bf16["result"].baseline.total_bytes)
    ledger = r'<table class="ledger" data-chart="precision-ledger">.*?</table>'
    for url in (own, moved):
        text = screen(client, url, ids, "step-7", lesson)
        assert not said(told, text), (url, told)
        html = page(client, url)
        column = re.findall(r"BF16 ([^;]*) ;", tables(re.search(
            ledger, masked(html, masked_keys(lesson, "step-7")), re.S)[0]))
        assert column and set(column) - {""} == {"?"}, (url, column)  # "": a copy's row
        figure = json.loads(re.search(r'class="figure" data-target="[^"]*ledger[^"]*"[^>]*>'
                                      r"(.*?)</script>", html, re.S)[1])
        owners = figure["layout"]["meta"]["owners"]
        veiled = partly_veiled(figure, [o for o in owners if "step-7" in o["step"].split()])
        assert all(y is None for t in veiled["data"] for y in t["y"]), (url, veiled["data"])
        assert told not in veiled["summary"], (url, veiled["summary"])
        opened = screen(client, url, ids, ids[-1])  # every guess made: nothing masked
        assert said(told, opened), (url, told)
