"""Every drill's answer can be worked out from what its question states (issue 36).

Each derivation below reads its inputs out of the question as the student sees it and does
the textbook arithmetic; the checker must accept the result. A drill whose checker applied a
factor its question does not state (EP02's PCIe all-reduce took NCCL's 82% bus bandwidth
while its question gave only the link's 32 GB/s: 765.7 ms worked out, 933.8 ms accepted)
fails here.
"""

import math
import re

import pytest

import app.main  # noqa: F401  (registers every lab view and its drills)
from app.labkit import DRILLS
from app.labkit.drills import check_drill


def num(question: str, pattern: str) -> float:
    """The number the pattern's group captures in the question (thousands commas allowed)."""
    match = re.search(pattern, question)
    assert match, f"{pattern!r} not stated in: {question}"
    return float(match.group(1).replace(",", ""))


N = r"([\d,]+(?:\.\d+)?)"  # a stated number


def _dp_allreduce(q: str) -> float:
    grad, gpus = num(q, N + r" GB of bf16 gradients"), num(q, r"over " + N + " GPUs")
    busbw = num(q, r"of the link, " + N + " GB/s")
    start, hop = num(q, r"pays " + N + " µs to start"), num(q, N + r" µs\s+per ring step")
    steps = 2 * (gpus - 1)
    return 1e3 * (steps / gpus * grad / busbw + (start + steps * hop) * 1e-6)


def _recipe(q: str) -> float:
    m, p = num(q, N + " micro-batches"), num(q, "bubble of " + N + " stages")
    parts = [num(q, name + " " + N) for name in (r"gives TP", "DP", "wait for it\\)",
                                                 "sends", "optimizer step")]
    product = m / (m + p - 1)
    for part in parts:
        product *= part
    return 100 * product


def _pairs(tokens: range) -> float:
    return float(sum(t + 1 for t in tokens))  # a query at position t sees keys 0..t


def _contiguous(q: str) -> float:
    seq, cp = int(num(q, N + "-token sequence")), int(num(q, r"CP = " + N))
    per = seq // cp
    return max(_pairs(range(r * per, (r + 1) * per)) for r in range(cp))


def _zigzag(q: str) -> float:
    """EP06's strided split: rank r keeps chunks r and r + c (not the mirror 2c - 1 - r)."""
    seq, cp = int(num(q, r"The same " + N + " tokens")), int(num(q, r"CP = " + N))
    chunk = seq // (2 * cp)
    return max(_pairs(range(r * chunk, (r + 1) * chunk))
               + _pairs(range((r + cp) * chunk, (r + cp + 1) * chunk)) for r in range(cp))


def _dispatch(q: str) -> float:
    hidden, topk = num(q, r"hidden " + N), num(q, r"top-" + N)
    ep, tokens = num(q, r"EP" + N), num(q, N + " tokens per GPU")
    return tokens * topk * hidden * 2 * (ep - 1) / ep / 1e6


def _lora(q: str) -> float:
    r, layers = num(q, r"r = " + N), num(q, N + " layers")
    q_in, q_out = num(q, r"q maps " + N), num(q, r"q maps [\d,]+ to " + N)
    v_in, v_out = num(q, r"v maps " + N), num(q, r"v maps [\d,]+ to " + N)
    return layers * r * (q_in + q_out + v_in + v_out) / 1e6


def _fp8(q: str) -> float:
    """Step 8's formula solved for the GEMM gain r that gives the wanted speed-up."""
    share = num(q, r"GEMMs take " + N + "%") / 100
    extra, target = num(q, r"worth " + N + "%") / 100, num(q, r"to be " + N + "×")
    return share / (1 / target - (1 - share) - extra)


def _colocated(q: str) -> float:
    """Step 3's serving bill for the stated engines, then step 4's max plus the switch. The
    routed experts split over the engine's GPUs, the rest is stated per GPU (SGLang's
    data-parallel attention); each attention group keeps whole requests, and each of its GPUs
    their whole MLA latent: the busiest GPU keeps ⌈requests ÷ groups⌉ of its engine's."""
    e, engines = num(q, r"engines of " + N + " GPUs"), num(q, N + " engines share")
    requests = num(q, r"the " + N + " samples") / engines
    groups = num(q, r"parallelism in " + N + " groups")
    serve = (num(q, r"routed experts' " + N + "B") * 2 / e
             + num(q, r"the rest comes to " + N + " GB")
             + math.ceil(requests / groups) * num(q, r"each of " + N + " tokens")
             * num(q, N + " KB") * 1e-6
             + num(q, N + " GB of workspace"))
    train = num(q, r"Training needs " + N + " GB")
    return max(train, serve) + num(q, r"phases keeps " + N + " GB")


def _tp_bytes(q: str) -> float:
    h, t, s = num(q, r"h = " + N), num(q, r"TP = " + N), num(q, r"s = " + N)
    return s * h * 2 * 2 * (t - 1) / t / 1e6


def _goodput(q: str) -> float:
    """Saves every τ, each stopping the job δ; a failure every M loses the restart R and, on
    average, half of a save interval (τ + δ) / 2 of work (Young 1974; Meta's Llama 3 report)."""
    tau = 60.0 if "saves every hour" in q else num(q, r"saves every " + N + " minutes")
    delta, restart = num(q, r"stops it for " + N), num(q, r"restart takes " + N)
    mtbf = 60 * num(q, r"fails every " + N + " hours")
    return 100 * tau / (tau + delta) * (1 - (restart + (tau + delta) / 2) / mtbf)


def _young(q: str) -> float:
    save, mtbf = num(q, r"stops training for " + N + " s"), num(q, r"every " + N + " hours")
    return (2 * save * mtbf * 3600) ** 0.5 / 60  # √(2 δ M), Young 1974


def _h200_bill(q: str) -> float:
    """EP01 step 5's 405B on 64 H200s (round-19 cold reading X, finding 13: a derive, and
    its question now gives the vocabulary): the state's share, full recomputation's 2·s·h a
    layer, and the fp32 logits, 4 B × the vocabulary a token."""
    p, gpus = num(q, N + " billion parameters"), num(q, r"over " + N + " H200s")
    layers, h = num(q, N + " layers"), num(q, r"h = " + N)
    s, vocab = num(q, N + "-token sequence"), num(q, r"vocabulary " + N)
    return (16 * p * 1e9 / gpus + 2 * s * h * layers + 4 * s * vocab) / 1e9


DERIVATIONS = {
    "memory-predict-405b-h200": _h200_bill,
    "dp-allreduce-pcie": _dp_allreduce,
    "memory-state-8b": lambda q: (num(q, N + " billion") * (2 + 4 + 4 + 8)
                                  / num(q, r"over " + N + " GPUs")),
    "zero3-state-70b": lambda q: (num(q, N + "B parameters") * num(q, N + " bytes per")
                                  / num(q, r"across " + N)),
    # Step 4's interleaved form (round-16 cold reading of EP05, finding 10).
    "pipeline-bubble": lambda q: 100 * (num(q, N + " stages") - 1) / (
        num(q, r"v = " + N) * num(q, N + " micro-batches") + num(q, N + " stages") - 1),
    "tp-allreduce-bytes": _tp_bytes,
    "cp-busiest-contiguous": _contiguous,
    "cp-busiest-zigzag": _zigzag,
    "moe-dispatch-mb": _dispatch,
    "recipe-efficiency": _recipe,
    "placement-colocated-r1": _colocated,
    # Mixed precision's 16 B on every parameter, the two FP8 copies on the linear layers'
    # alone (round-17 cold reading of EP10, finding 5).
    "precision-bytes-delayed": lambda q: ((2 + 2 + 4 + 4 + 4) * num(q, N + "B parameters")
                                          + (1 + 1) * num(q, N + "B of them in linear")),
    "precision-lora-params": _lora,
    "precision-fp8-speedup": _fp8,
    "failures-goodput": _goodput,
    "failures-young": _young,
}


def test_every_drill_has_a_derivation_from_its_stated_inputs():
    """Every derive drill (a predict drill is a guess, a decide drill a choice:
    tests/app/test_drill_kinds.py)."""
    missing = sorted({i for i, (_, d) in DRILLS.items() if d.kind == "derive"} - set(DERIVATIONS))
    assert not missing, (f"{missing}: add the drill's textbook derivation from the numbers "
                         "its question states to DERIVATIONS (tests/app/test_drills.py)")


@pytest.mark.parametrize("drill_id", sorted(DERIVATIONS))
def test_the_checker_accepts_the_derivation_from_the_stated_inputs(drill_id):
    _view, drill = DRILLS[drill_id]
    worked = DERIVATIONS[drill_id](re.sub(r"\s+", " ", drill.question))
    result = check_drill(drill, f"{worked:.6g}", attempt=1, hide_answers=True)
    assert result["status"] == "right", (drill_id, worked, drill.answer())


def test_the_pcie_drill_states_nccls_bus_bandwidth_and_the_link_alone_is_not_accepted():
    """Issue 36: the drill names NCCL's achieved bus bandwidth as a share of the link, and the
    worked solution shows it; the datasheet-only reading (765.7 ms) is a wrong answer now
    that the question states the factor."""
    _view, drill = DRILLS["dp-allreduce-pcie"]
    assert "bus bandwidth" in drill.question and "82% of the link" in drill.question
    datasheet_only = 1e3 * 2 * 7 / 8 * 16e9 / 32e9  # 875 ms: the link's figure, no factor
    assert check_drill(drill, f"{datasheet_only}", attempt=1,
                       hide_answers=True)["status"] == "hint"
    solution = check_drill(drill, f"{drill.answer():.1f}", attempt=1,
                           hide_answers=True)["message"]
    assert "26.24 GB/s busBW (82% of 32 GB/s)" in solution


@pytest.mark.parametrize("drill_id", ["cp-busiest-contiguous", "cp-busiest-zigzag"])
def test_a_whole_number_answer_prints_as_the_lab_prints_counts(drill_id):
    """Round-15 cold reading of EP06, 13b: a count of pairs printed "Right. 122.0: 29 + 30 +
    …" and "129.0", where the lab prints counts whole, with their separators."""
    _view, drill = DRILLS[drill_id]
    answer = drill.answer()
    assert answer == round(answer)
    for attempt, given in ((1, f"{answer:.0f}"), (2, "1")):
        message = check_drill(drill, given, attempt=attempt, hide_answers=False)["message"]
        assert f"{round(answer):,}:" in message and f"{answer:.1f}" not in message, message
