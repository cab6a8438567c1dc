"""Decide drills (TEACHING.md: "each option gets feedback that says why it is right or
wrong"): every option of every decide drill has its own feedback, a reason in words beside
the lab's figure, not one shared hint; a wrong try shows the chosen option's own reason."""

import re

import pytest

import app.main  # noqa: F401  (registers every lab view)
from app.labkit.drills import check_drill
from app.labkit.view import Decide
from app.lesson_drills import LESSON_DRILLS

DECIDES = [d for drills in LESSON_DRILLS.values() for d in drills if isinstance(d, Decide)]
# A figure with its unit ("152.8 GB", "3/19", "61.8%", "2 × 12,288 × 2 B"), and the tail that
# names the best figure: what is left is the option's reason in words.
FIGURE = re.compile(r"[\d.,/%×−+=:()]+(?:\s*(?:GB|MB|TB|B|ms|s|GB/s|TFLOP/s|×|%))?(?!\w)")
MIN_WORDS = 10


def reason(why: str) -> str:
    return " ".join(FIGURE.sub(" ", why.split(" Another choice gives")[0]).split())


def test_there_are_decide_drills():
    assert len(DECIDES) >= 10


@pytest.mark.parametrize("drill", DECIDES, ids=lambda d: d.id)
def test_every_option_has_its_own_reason(drill):
    options = drill.judge()
    reasons = [reason(o.why) for o in options]
    assert len(set(reasons)) == len(reasons), (drill.id, reasons)
    for option, words in zip(options, reasons, strict=True):
        assert len(words.split()) >= MIN_WORDS, (drill.id, option.key, option.why)


@pytest.mark.parametrize("drill", DECIDES, ids=lambda d: d.id)
def test_a_wrong_try_shows_that_options_reason(drill):
    whys = {o.key: o.why for o in drill.judge() if not o.right}
    for key, why in whys.items():
        out = check_drill(drill, key, attempt=1, hide_answers=True)
        assert out["status"] == "hint"
        assert [f["why"] for f in out["feedback"]] == [why], (drill.id, key)


def test_the_reason_strips_figures_not_words():
    """The measure can fail: a why that is only figures leaves too few words."""
    assert len(reason("7 blocks of 16,384 tokens × 49,152 B: 5.6 GB. Another choice gives "
                      "1.4 GB.").split()) < MIN_WORDS
    assert reason("Shards all 16 bytes: 695.8 GB.") == "Shards all bytes"
