"""A lesson step's five beats (issue 36; templates/partials/_predict.html): a question, a
prediction the student commits in the step, the try links, the why, and the limit. The
lessons listed here have every step in that shape; in each, no figure the step quotes is
outside its closed why (the guess comes first), the why is a <details> that opens only on a
commit or "show me", and a drill placed in a step is asked there and not again at the end."""

import re
from html.parser import HTMLParser

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import VIEWS

# The lessons whose steps carry all five beats, one a line (owners add theirs).
BEATS = [
    "memory",
    "dp",
    "zero",
    "tp",
    "pipeline",
    "failures",
    "placement",
    "cp",
    "moe",
    "recipe",
    "precision",
    "playground",
]


def why_end(html: str, start: int) -> int:
    """Where the <details> opened at `start` closes, its nested notes counted (a why holds
    closed notes of its own: round-19 cold reading Y, finding 17)."""
    depth = 0
    for tag in re.finditer(r"<details\b|</details>", html[start:]):
        depth += -1 if tag.group(0) == "</details>" else 1
        if depth == 0:
            return start + tag.end()
    raise AssertionError("an unclosed <details>")


def drop_whys(html: str, keep: str = "") -> str:
    """The html without its whys (each the whole of its <details class="why">)."""
    out, at = [], 0
    for m in re.finditer(r'<details class="why"', html):
        if m.start() < at:
            continue
        out += [html[at:m.start()], keep]
        at = why_end(html, m.start())
    return "".join(out) + html[at:]


def steps(html: str) -> list[tuple[str, str]]:
    body = html.split('<article class="steps">')[1].split('id="step-drill"')[0]
    found = re.findall(r'<section class="step" id="(step-\d+)"(.*?)</section>', body, re.S)
    assert found
    return found


@pytest.mark.parametrize("name", BEATS)
def test_every_step_has_question_predict_move_why_limit_in_order(client, name):
    html = client.get(VIEWS[name].episode.path).text
    for step_id, step in steps(html):
        marks = [step.find(m) for m in ('class="question"', 'class="predict-form"', 'class="try"',
                                          '<details class="why"', 'class="limit"')]
        assert -1 not in marks, (step_id, marks)
        assert marks == sorted(marks), (step_id, "beats out of order", marks)
        why = re.findall(r'<details class="why"[^>]*>', step)
        assert why and not any(" open" in tag for tag in why), step_id  # closed until asked
        # The commit button waits for the script: with JS off, Enter submits nothing.
        for button in re.findall(r'<button[^>]*predict-commit[^>]*>', step):
            assert "disabled" in button and "hidden" in button, step_id


@pytest.mark.parametrize("name", BEATS)
def test_no_quoted_figure_is_outside_the_why(client, name):
    """Predict, then see: each number a step quotes is in its why, closed before the guess."""
    html = client.get(VIEWS[name].episode.path).text
    for step_id, step in steps(html):
        outside = drop_whys(step)
        outside = re.sub(r'<form id="drill-.*?</form>', "", outside, flags=re.S)
        figs = re.findall(r'<span class="fig"[^>]*data-field="([^"]+)"', outside)
        assert not figs, (step_id, figs)


@pytest.mark.parametrize("name", BEATS)
def test_a_drill_in_a_step_is_asked_once(client, name):
    html = client.get(VIEWS[name].episode.path).text
    view = VIEWS[name]
    in_steps = {d.id for d in view.drills
                if any(f'id="drill-{d.id}"' in s for _, s in steps(html))}
    for drill in view.drills:
        assert html.count(f'id="drill-{drill.id}"') == 1, drill.id
    end = html.split('id="step-drill"')[1] if 'id="step-drill"' in html else ""
    for drill_id in in_steps:
        assert f'id="drill-{drill_id}"' not in end, drill_id


class WhyWords(HTMLParser):
    """The words a why says itself: its text less its summary, its notes (any element of
    class chart-note: "where this comes from") and the glossary's tips."""

    SKIP = ("chart-note", "term-tip")
    VOID = {"br", "img", "input", "hr", "meta", "link", "source", "wbr"}

    def __init__(self):
        super().__init__()
        self.stack: list[bool] = []  # per open element: does it start a skipped part?
        self.words = 0

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        self.stack.append(tag == "summary" or any(c in classes for c in self.SKIP))

    def handle_endtag(self, tag):
        if tag not in self.VOID and self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if not any(self.stack):
            self.words += len(data.split())


def why_words(step: str) -> int:
    start = step.index('<details class="why"')
    why = step[start:why_end(step, start)]
    parser = WhyWords()
    parser.feed(why)
    return parser.words


# TEACHING: a why is two or three short sentences that derive the shown number; the working
# and the sources go in a "where this comes from" note (class chart-note). These whys are
# still longer than WHY_WORDS; each may shrink, none may grow (the figure is its length when
# the cap was set, 2026-12-06).
WHY_WORDS = 250
LONG_WHYS: dict[tuple[str, str], int] = {}


def over_cap(client, name: str, count, cap: int, longer: dict) -> dict[str, int]:
    """Each step of the lesson whose why counts (``count``) over its cap: ``cap``, or the
    length ``longer`` records for it."""
    html = client.get(VIEWS[name].episode.path).text
    return {step_id: count(step) for step_id, step in steps(html)
            if count(step) > longer.get((name, step_id), cap)}


@pytest.mark.parametrize("name", BEATS)
def test_a_whys_own_text_is_a_short_derivation(client, name):
    long = over_cap(client, name, why_words, WHY_WORDS, LONG_WHYS)
    assert not long, (f"{name}: a why's own text is at most {WHY_WORDS} words; move the "
                      f"working to a 'where this comes from' note (class chart-note)", long)


def why_block(step: str) -> str:
    """A step's why, whole: its <details class="why"> to the matching </details>, the notes
    nested in it (a closed "where this comes from" is a <details> too) included."""
    start = step.index('<details class="why"')
    depth, at = 0, start
    for tag in re.finditer(r"<(/?)details\b", step[start:]):
        depth += -1 if tag.group(1) else 1
        if depth == 0:
            at = start + tag.end()
            break
    return step[start:step.index(">", at) + 1]


class WholeWhyWords(WhyWords):
    """A why's words with its notes: the working a student reads once they open it (the
    summaries and the glossary's tips left out)."""

    SKIP = ("term-tip",)


def whole_why_words(step: str) -> int:
    parser = WholeWhyWords()
    parser.feed(why_block(step))
    return parser.words


# The same standard for the why with its notes (issue 36, standard 4; round-18 cold readings B,
# finding 16, and D, finding 15): the working a note shows is part of what the student reads,
# so the why and its notes together stay under WHOLE_WHY_WORDS. The note is the place for the
# working, not for every side remark. Steps still over it are listed with their length when
# the cap was set (2026-12-07); each may shrink, none may grow.
WHOLE_WHY_WORDS = 300
# 12-07 fixK: ("pipeline", "step-5") 386 -> 298, off the list (DeepSeek's aside and the
# note's inline sources gone, rank 7's bill and the head's W note in fewer words);
# ("moe", "step-11") 326 -> 299, off the list (the T*/L* aside and B's 160 GB/s remark gone).
LONG_WHOLE_WHYS: dict[tuple[str, str], int] = {
    ("placement", "step-3"): 336,  # r20: 473 cut; r21: 448 cut (the decode reads are step
    # 5's); r23: 342 cut (MLA's sharing left to its glossary tip); the
    # rest answers its own question: the cache, the weights table, its second link's
    # 32,768-token cache and SGLang's reserved cache on slime's FP8 weights (which way it errs)
    ("moe", "step-7"): 430,  # r19 Y #13: NCCL's current factor, the lab errs slow; r21: 577
    # cut (the grey bars said in the intro, the notes' pointers gone); no other step asks a
    # group's 1:1 time, so the four groups' times, DP's ring latency sum and the 7:1, 32-node
    # and pod states stay, each pinned (test_moe_routes round 8, 10, 19); 12-07: 502 cut (the
    # predict's leaves and partners not restated, the first stage's aside, shorter clauses;
    # then +3, "on the wire", so PP's 1.24 -> 4.91 ms works from the printed digits);
    # 12-07 fixK: 458 -> 430, shorter clauses only: every sum and state left is pinned
    ("recipe", "step-12"): 488,  # r20: 1,247 cut to the DP wait, its buckets, EP and DeepEP;
    # 12-07 fixA: 492 -> 488 with the two groups' max each way, the bucket shares' quotients
    # and their even-arrival assumption added, paid for by a shorter DP paragraph and note;
    # r24: 475 + 17, grown by working the readers asked for (round 23 Q #6: each group's smaller
    # last bucket in the sum; round 24 B #8: the EP products to their digits) and NIC's gloss
    # moved here from step 13, its first use (step 13 shrank by more); the MoE error shorter
    # r26 A: + EP overlap's saving returned as DP wait (#4) and the dense ring's 4 x 48 GB/s
    # (#5), paid by the MoE bands (now in the limit) and the windows said once (the predict's)
    # r21: 583 cut (EP07 step 3's dispatch cited, the buckets tighter); the rest is the working
    # of the predict's stated inputs (each bucket group's time and the 121 ms it leaves,
    # round-10 pins) and EP's wait (round-8 pin), which no other step's question asks
    ("recipe", "step-13"): 523,  # r20: 911 cut; gather, prefetch, resharding and TP modes pinned;
    # r21: 624 cut (the predict's inputs not restated, shorter clauses); each of its five
    # links' figures is its own question's working (round-4, 6 and 8 pins), so none moves;
    # 12-07: 579 cut (NIC glossed once, in step 12; the lab's error one clause; tighter notes)
    ("playground", "step-5"): 347,  # r19 Z #11 says which way NCCL 2.8's x1.9 errs: +30; r21:
    # what is left is the wait's working and the TP-efficiency readings the pins keep (EP04 step
    # and layer, its two losses, EP08's factor, the flat-ring curve): no other step asks them;
    # 12-07 fixK: 382 -> 347 (EP08's underived audit figure, "for a large ring across
    # nodes", shorter clauses)
}


@pytest.mark.parametrize("name", BEATS)
def test_a_why_with_its_notes_stays_short(client, name):
    long = over_cap(client, name, whole_why_words, WHOLE_WHY_WORDS, LONG_WHOLE_WHYS)
    assert not long, (f"{name}: a why with its notes is at most {WHOLE_WHY_WORDS} words; keep "
                      "the working of the step's figures and drop side remarks", long)


class OpenWhyWords(HTMLParser):
    """The words a student meets when a why opens: its whole text (notes included) less its
    summary, the glossary's tips and whatever sits in a closed <details> inside it (the
    nesting counted, which WhyWords' first-</details> cut does not)."""

    VOID = WhyWords.VOID

    def __init__(self):
        super().__init__()
        self.stack: list[bool] = []  # per open element inside the why: is it hidden?
        self.root = 0  # 1 inside the why's own <details>
        self.words = 0

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        if not self.root:
            self.root = tag == "details" and "why" in classes
            if self.root:
                self.stack = []
            return
        self.stack.append(tag in ("summary", "details") or "term-tip" in classes)

    def handle_endtag(self, tag):
        if tag in self.VOID or not self.root:
            return
        if self.stack:
            self.stack.pop()
        elif tag == "details":
            self.root = 0

    def handle_data(self, data):
        if self.root and not any(self.stack):
            self.words += len(data.split())


def open_why_words(step: str) -> int:
    parser = OpenWhyWords()
    parser.feed(step)
    return parser.words


# Round-19 cold reading Y, finding 17: EP08's whys opened onto 600 to 1,270 words (steps 10,
# 12, 13, 15), their notes open under the lead. A why opens onto its lead, the derivation of
# the predicted number; every other topic is a closed note of its own. The lessons listed
# here are held to it (owners add theirs).
OPEN_WHYS_BOUNDED = [
    "recipe", "pipeline", "memory", "dp", "zero", "tp", "failures", "placement", "playground",
    "precision", "cp", "moe",
]


@pytest.mark.parametrize("name", OPEN_WHYS_BOUNDED)
def test_a_why_opens_onto_its_lead_and_keeps_other_topics_in_closed_notes(client, name):
    html = client.get(VIEWS[name].episode.path).text
    long = {step_id: words for step_id, step in steps(html)
            if (words := open_why_words(step)) > WHY_WORDS}
    assert not long, (f"{name}: a why opens onto at most {WHY_WORDS} words; put each other "
                      "topic in a closed <details class=\"sources\"> note", long)


# Round-19 cold reading Z, finding 12: these whys opened onto 384 to 572 words, their notes
# inline. Each opens onto its derivation, and the rest sits in a closed note.
OPEN_WHYS = [("failures", "step-5"), ("failures", "step-7"), ("placement", "step-3"),
             ("playground", "step-5")]


@pytest.mark.parametrize(("name", "step_id"), OPEN_WHYS)
def test_round_19_an_opened_why_shows_its_derivation_and_keeps_the_rest_closed(client, name,
                                                                             step_id):
    html = client.get(VIEWS[name].episode.path).text
    step = dict(steps(html))[step_id]
    assert open_why_words(step) <= WHY_WORDS, (name, step_id, open_why_words(step))
