"""EP03's lesson states: the states its steps link to and quote (``facts``: each through the
same query model, lab and answer as GET /api/zero, tests/app/test_prose.py follows every link),
and the figures their whys work out beside them: the DGX H100 host's DDR5 (``host_ddr``), CPU
Adam below the datasheet's peak (``adam_sizing``) and the opening state's MFU term by term
(``opening_mfu``, ``opening_mfu_terms``). The page, its keys and drills are
``app.routers.zero``'s."""

from dataclasses import replace
from functools import lru_cache

from app.labkit import lesson_state
from app.routers.zero_state import ZeroQuery, run, to_api
from labs.memory.lab import recompute_peak_bytes
from labs.model.flops import attention_flops_per_token, matmul_params
from labs.zero.inputs import (
    HOST_CHANNELS,
    HOST_DIMMS,
    HOST_MT_S,
    HOST_RATED_MT_S,
    HOST_SOCKETS,
)
from labs.zero.lab import achieved_mfu, simulate_zero
from labs.zero.published import GPU, LINK, MODEL, SEQ_LEN, TABLE_2

# The link step 9 asks ZeRO-3's T* on and step 5 its exposure (app.routers.zero: the crossover
# there waits for step 9's guess).
ETHERNET = "eth-25g"
# The models steps 3 and 6 ask per-GPU memory for: none drawn on a screen before them, so the
# answer is the formula, not a multiple of a bar (round-13 cold reading, findings 1 and 2).
STEP_3_MODEL, STEP_6_MODEL = "qwen2.5-7b", "glm-4-9b"


@lru_cache(maxsize=1)
def facts() -> dict:
    """The states the lesson's steps link to, each with the figures its prose quotes, run
    through the same query model, lab and ``to_api`` as GET /api/zero (tests/app/test_prose.py
    follows every link)."""
    state = lesson_state(ZeroQuery, run, to_api)
    g9_full_16k = state(model=STEP_6_MODEL, dp=32, zero=3, recompute="full", seq_len=16384)
    full = state(dp=32, zero=3, recompute="full")
    full_16k = state(dp=32, zero=3, recompute="full", seq_len=16384)
    return {
        "l70_z3": state(dp=32, zero=3),
        "l70_z3_1k": state(dp=32, zero=3, seq_len=1024),  # step 9: below the crossover
        "l70_z0": state(dp=32, zero=0),
        # Step 9: plain DP between its T* and ZeRO-3's, compute-bound by the ratio yet exposed
        # (its all-reduce hides behind the backward pass only; round-8 cold reading, item 1).
        "l70_z0_1280": state(dp=32, zero=0, seq_len=1280),
        # Steps 1-2 ask models the opening table (70B) does not print (round-2 cold reading).
        "l8_z0": state(model="llama-3.1-8b", dp=32, zero=0),
        "l405_z2": state(model="llama-3.1-405b", dp=32, zero=2),
        "l70_z1": state(dp=32, zero=1),
        "l70_z2": state(dp=32, zero=2),
        "l70_z3_18": state(dp=32, zero=3, recipe="adam18"),
        "l70_z2_18": state(dp=32, zero=2, recipe="adam18"),
        # Step 4 asks ZeRO-3's bytes for a model no earlier screen draws (its ratio to DP's
        # was one division of the opening chart's two bars away).
        "g175_z0": state(model="gpt-3-175b", dp=32, zero=0),
        "g175_z3": state(model="gpt-3-175b", dp=32, zero=3),
        "eth": state(dp=32, zero=3, link=ETHERNET),
        "eth_z0": state(dp=32, zero=0, link=ETHERNET),
        # Steps 3-8 ask states the opening bench (70B, ZeRO-3 on 32, 4,096 tokens, InfiniBand)
        # does not print: longer sequences, Ethernet, one GPU on PCIe 5.0, 405B (issue 36).
        # Steps 3 and 6 ask models no screen before them draws (round-13 cold reading, findings
        # 1 and 2: the 70B at 8,192 or 16,384 tokens was the bench's state plus 2 or 4 times
        # activations it printed); the 70B's states follow in their whys.
        "q7_z3_8k": state(model=STEP_3_MODEL, dp=32, zero=3, seq_len=8192),
        "l70_z3_8k": state(dp=32, zero=3, seq_len=8192),
        "g9_full_16k": g9_full_16k,
        # Its peak while the backward runs a layer again, EP01 step 5's rule (labs.memory.lab
        # recompute_peak_bytes; round-21 cold reading P, finding 6).
        "g9_full_16k_peak": recompute_peak_bytes(g9_full_16k["result"].ledger),
        "full_16k": full_16k,
        # Step 6 gives its peak beside its kept bill (round-23 cold reading P, finding 8).
        "full_16k_peak": recompute_peak_bytes(full_16k["result"].ledger),
        "l405_z3": state(model="llama-3.1-405b", dp=32, zero=3),
        "full": full,
        # ... and its peak, the one EP01 step 5 quotes for the same 70B (round-22 cold
        # reading P, finding 13: EP01 said "EP03 step 6 prices both", and it gave no peak).
        "full_peak": recompute_peak_bytes(full["result"].ledger),
        "small_full": state(model="llama-3.1-8b", dp=8, zero=3, recompute="full"),
        "offload": state(dp=32, zero=3, offload=True),
        # Step 7: one GPU of a DGX H100 (the host the page states: 563.2 GB/s of DDR5, PCIe
        # 5.0 to each GPU), so the host's memory and its link come from one machine.
        "offload_one": state(model="llama-3.1-8b", dp=1, zero=2, offload=True,
                             host_link="pcie-5"),
        "ds_offload": state(dp=32, zero=3, offload=True, recompute="full"),
        # Step 10: Narayanan et al. 2021 Table 2's ZeRO-3 runs, first and last (GPT-3 175B,
        # 1,536 sequences a step; labs.zero.published).
        **{f"t2_{gpus}": state(model=MODEL, gpu=GPU, link=LINK, seq_len=SEQ_LEN, dp=gpus,
                               micro_batch=b, zero=3, recompute="full")
           for gpus, b, _ in (TABLE_2[0], TABLE_2[-1])},
    }


def host_ddr() -> dict:
    """The DGX H100 host's DDR5 as step 7 works its peak (labs.zero.inputs): sockets, channels,
    DIMMs and the rate two DIMMs a channel run at, against the DIMMs' rated one."""
    return {"sockets": HOST_SOCKETS, "channels": HOST_CHANNELS, "dimms": HOST_DIMMS,
            "per_channel": HOST_DIMMS // (HOST_SOCKETS * HOST_CHANNELS),
            "rated": HOST_RATED_MT_S / 1e6, "mts": HOST_MT_S / 1e6}


@lru_cache(maxsize=1)
def adam_sizing() -> dict:
    """Step 7's limit: CPU Adam for each offload case the step shows, run through the engine
    (labs.zero.lab.simulate_zero) at host bandwidths other than the datasheet's: the bytes the
    node's memory moves, the update at 100 GB/s, and the step if CPU Adam reaches half the
    peak (no measured CPU Adam rate on this CPU is among the lab's sources)."""
    out = {}
    for key in ("offload_one", "offload"):
        result = facts()[key]["result"]
        inp = result.input
        at_100 = simulate_zero(replace(inp, host_memory_bandwidth=100e9))
        half = simulate_zero(replace(inp, host_memory_bandwidth=inp.host_memory_bandwidth / 2))
        out[key] = {"node_bytes": result.offload.adam_bytes * inp.gpus_on_node,
                    "at_100": at_100.offload.adam_seconds, "half_step": half.step_seconds,
                    "grows": half.step_seconds - result.step_seconds}
    return out


@lru_cache(maxsize=1)
def opening_mfu() -> float:
    """The lab's MFU at the opening state (70B, ZeRO-3 on 32 H100s): step 5 sets it against
    published H100 runs."""
    result = facts()["l70_z3"]["result"]
    return achieved_mfu(result.input, result.compute_seconds)


@lru_cache(maxsize=1)
def opening_mfu_terms() -> dict:
    """Step 5's MFU, term by term, as ``achieved_mfu`` counts it (labs.model.flops): 6·N·T
    for the N parameters that multiply (the input embedding is a lookup), the attention
    scores and weighted sum, 12·L·a·d·s a token (PaLM appendix B), over the step's compute
    seconds at the GPU's dense bf16 peak (round-17 cold reading of EP03, finding 2: the
    page gave 6·P·T at 584 TFLOP/s, 59.0% of a 989 first named in step 10, beside 62.6%)."""
    result = facts()["l70_z3"]["result"]
    inp = result.input
    tokens = inp.seq_len * inp.micro_batch
    n = matmul_params(inp.model)
    attention = attention_flops_per_token(inp.model, inp.seq_len)
    return {"model": inp.model, "tokens": tokens, "n": n, "matmul_flops": 6 * n * tokens,
            "attention_per_token": attention, "attention_flops": attention * tokens,
            "seconds": result.compute_seconds, "peak": inp.gpu.bf16_flops,
            "gpu": inp.gpu.name, "mfu": opening_mfu()}
