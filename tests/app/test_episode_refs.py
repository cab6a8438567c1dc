"""Round-17 cold reading of EP02, EP07 and EP11 (findings 10 and 16): a lesson that sends the
student to another episode sends them to the right place. EP11 named EP07 (Experts) for
context parallelism, which is EP06; EP07 and seven other pages cited "EP02 step 1" for NCCL's
ring latency, whose hop constants and ×1.9 plateau EP02 teaches in step 4.

Every "EPnn step k" names a step that exists; the NCCL constants a reference's sentence quotes
are in the step it names; and a topic named with an episode, "(context parallelism, EP06", is
that episode's when it is one episode's title."""

import re
from functools import lru_cache
from html import unescape

from app.episodes import EPISODES
from labs.hardware.nccl_constants import BASE_LATENCY, HOP_LATENCY, RING_PLATEAU

BY_NUMBER = {e.number: e for e in EPISODES}
REF = re.compile(r"EP(\d\d),? steps? (\d+)")
# NCCL 2.8's ring latencies on Simple and its plateau, as EP02 teaches them.
CONSTANTS = {f"{v:g}" for v in (BASE_LATENCY["ring"]["Simple"],
                                HOP_LATENCY["nvlink"]["ring"]["Simple"],
                                HOP_LATENCY["net"]["ring"]["Simple"], RING_PLATEAU)}


def _text(html: str) -> str:
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


@lru_cache(maxsize=1)
def pages(client) -> dict[int, tuple[str, dict[int, str]]]:
    """Each episode's visible text and its steps' texts, by number."""
    out = {}
    for e in EPISODES:
        html = client.get(e.path).text
        parts = re.split(r'<section class="step" id="step-(\d+)"', html)
        steps = {int(k): _text(body.split("</section>", 1)[0])
                 for k, body in zip(parts[1::2], parts[2::2], strict=True)}
        out[e.number] = (_text(html), steps)
    return out


def _sentence(text: str, start: int, end: int) -> str:
    left = max(text.rfind(". ", 0, start), text.rfind("; ", 0, start))
    right = min(i for i in (text.find(". ", end), text.find("; ", end), len(text)) if i >= 0)
    return text[left + 1:right]


def test_every_episode_step_reference_names_a_step_that_teaches_what_it_quotes(client):
    found = pages(client)
    wrong, refs = [], 0
    for number, (text, _) in found.items():
        for m in REF.finditer(text):
            refs += 1
            target, k = int(m[1]), int(m[2])
            steps = found.get(target, ("", {}))[1]
            where = f"EP{number:02d}: {m[0]}"
            if k not in steps:
                wrong.append(f"{where} names no step")
                continue
            quoted = set(re.findall(r"\d+(?:\.\d+)?", _sentence(text, m.start(), m.end())))
            missing = {c for c in CONSTANTS & quoted if "." in c} - set(
                re.findall(r"\d+(?:\.\d+)?", steps[k]))
            if target == 2 and "latency" in _sentence(text, m.start(), m.end()) and missing:
                wrong.append(f"{where} quotes {sorted(missing)}, which that step never states")
    assert refs > 30 and not wrong, wrong


def test_a_topic_named_with_an_episode_is_that_episodes(client):
    heads = {e.title.split(":")[0].strip().lower(): e.number for e in EPISODES}
    wrong = []
    for number, (text, _) in pages(client).items():
        for m in re.finditer(r"\(([A-Za-z][a-z ]+), EP(\d\d)", text):
            owner = heads.get(m[1].lower())
            if owner is not None and owner != int(m[2]):
                wrong.append(f"EP{number:02d}: {m[0]} is EP{owner:02d}'s")
    assert not wrong, wrong
    assert "(context parallelism, EP06" in pages(client)[
        next(e.number for e in EPISODES if e.slug == "failures")][0]


def test_ep07_sends_the_ring_latency_to_ep02_step_4(client):
    experts = next(e.number for e in EPISODES if e.slug == "experts")
    text, steps = pages(client)[experts]
    # fixK's cut: "Of the ring's 2 × 127 = 254 steps (EP02 step 4)"
    assert re.search(r"[Tt]he ring's [^.]{0,60}\(EP02 step 4\)", steps[7])
    ep02 = pages(client)[2][1]
    for constant in CONSTANTS - {f"{RING_PLATEAU:g}"}:
        assert f"{constant} µs" in ep02[4], constant
