"""Decide drills (TEACHING.md: "each option gets feedback that says why it is right or
wrong"): every option of every decide drill has its own feedback, a one-line reason in words
beside the lab's own figure for that option, not one shared hint; a wrong try is told the
chosen option's reason and figure, never the right option's figure ("Another choice gives
X") and never a hint shared by every wrong option."""

import html
import re

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.labkit.drills import check_drill
from app.labkit.view import Decide
from app.lesson_drills import LESSON_DRILLS

DECIDES = [d for drills in LESSON_DRILLS.values() for d in drills if isinstance(d, Decide)]
# A figure with its unit ("152.8 GB", "3/19", "61.8%", "2 × 12,288 × 2 B"): what is left is the
# option's reason in words.
FIGURE = re.compile(r"[\d.,/%×−+=:()]+(?:\s*(?:GB|MB|TB|B|ms|s|GB/s|TFLOP/s|×|%))?(?!\w)")
MIN_WORDS = 10
# One line: a reason a student reads beside the choice, not a paragraph (the derivation that
# does not fit goes in the worked solution).
MAX_WORDS = 60


def reason(why: str) -> str:
    return " ".join(FIGURE.sub(" ", why).split())


def wrong_messages(drill: Decide) -> dict[str, str]:
    """What a first wrong try of each wrong option is told (the message and the chosen
    option's feedback), by option."""
    told = {}
    for option in drill.judge():
        if not option.right:
            out = check_drill(drill, option.key, attempt=1, hide_answers=True)
            told[option.key] = " ".join([out["message"], *(f["why"] for f in out["feedback"])])
    return told


def shared_text(messages: dict[str, str]) -> bool:
    """True where two wrong options are told the same thing, or where one sentence of more
    than a few words is told to every wrong option (a shared hint)."""
    if len(set(messages.values())) < len(messages):
        return True
    sentences = [{s.strip() for s in re.split(r"(?<=[.?!])\s+", m) if len(s.split()) > 3}
                 for m in messages.values()]
    return bool(set.intersection(*sentences)) if len(sentences) > 1 else False


def test_there_are_decide_drills():
    assert len(DECIDES) >= 10


@pytest.mark.parametrize("drill", DECIDES, ids=lambda d: d.id)
def test_every_option_has_its_own_reason(drill):
    options = drill.judge()
    reasons = [reason(o.why) for o in options]
    assert len(set(reasons)) == len(reasons), (drill.id, reasons)
    for option, words in zip(options, reasons, strict=True):
        assert MIN_WORDS <= len(words.split()) <= MAX_WORDS, (drill.id, option.key, option.why)


@pytest.mark.parametrize("drill", DECIDES, ids=lambda d: d.id)
def test_every_option_quotes_its_own_figure_and_no_other(drill):
    """Each option's why prints the lab's figure for that option; a wrong option's why never
    prints the right option's figure (the old 'Another choice gives X' tail did)."""
    options = drill.judge()
    best = next(o for o in options if o.right)
    for option in options:
        assert option.figure and option.figure in option.why, (drill.id, option.key)
        assert "Another choice" not in option.why, (drill.id, option.key)
        if not option.right and option.figure != best.figure:
            assert best.figure not in option.why, (drill.id, option.key, option.why)


@pytest.mark.parametrize("drill", DECIDES, ids=lambda d: d.id)
def test_a_wrong_try_is_told_that_options_reason_and_no_shared_hint(drill):
    assert not hasattr(drill, "hint"), drill.id
    whys = {o.key: o.why for o in drill.judge() if not o.right}
    for key, why in whys.items():
        out = check_drill(drill, key, attempt=1, hide_answers=True)
        assert out["status"] == "hint"
        assert out["message"] == "Not that one. " + why, (drill.id, key)
        assert [f["why"] for f in out["feedback"]] == [why], (drill.id, key)
    assert not shared_text(wrong_messages(drill)), (drill.id, wrong_messages(drill))


def test_a_decide_whose_wrong_options_share_one_message_fails():
    """The measure can fail: wrong options told one shared hint, or the same reason, are
    caught; each told its own is not."""
    def told(*whys: str) -> dict[str, str]:
        return {str(i): "Not that one. " + w for i, w in enumerate(whys)}

    hint = "Hint: which choice divides all four kinds of state and the activations?"
    assert shared_text(told(f"ZeRO-1 shards 12 B: 481.6 GB. {hint}",
                            f"Recomputation keeps the state: 1,136.5 GB. {hint}"))
    assert shared_text(told("The same words for both: 1 GB.", "The same words for both: 1 GB."))
    assert not shared_text(told("ZeRO-1 shards only the 12 bytes of optimizer state: 481.6 GB.",
                                "Recomputation shrinks only the activations: 1,136.5 GB."))


def test_the_reason_strips_figures_not_words():
    """The measure can fail: a why that is only figures leaves too few words."""
    assert len(reason("7 blocks of 16,384 tokens × 49,152 B: 5.6 GB.").split()) < MIN_WORDS
    assert reason("Shards all 16 bytes: 695.8 GB.") == "Shards all bytes"


@pytest.mark.parametrize("drill", DECIDES[:1] + DECIDES[-1:], ids=lambda d: d.id)
def test_the_page_shows_a_wrong_tries_reason_once(client, drill):
    """The htmx answer to a wrong try: the chosen option's reason, once (as the message), its
    choice marked wrong, and no other option's reason."""
    options = drill.judge()
    wrong = next(o for o in options if not o.right)
    page = html.unescape(client.get(f"/drills/{drill.id}", params={"answer": wrong.key},
                                    headers={"HX-Request": "true"}).text)
    assert page.count(wrong.why) == 1, drill.id
    assert 'class="choice wrong"' in page
    for other in options:
        if other.key != wrong.key:
            assert other.why not in page, (drill.id, other.key)
