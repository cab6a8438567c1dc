"""Tensor parallelism's communication, one model for the whole lab: EP04's efficiency against
t (labs.tensor_parallel.lab) and EP08's TP factor (labs.recipe.step_time) both count it here.

Megatron-LM (Shoeybi et al. 2019, arXiv:1909.08053, sec 3) all-reduces the s·b·h activations
after each row-split matmul in forward (operator g) and before each column-split matmul in
backward (operator f): 2 per layer each way. With sequence parallelism (Korthikanti et al.
2022, arXiv:2205.05198, sec 4.2.2) each all-reduce becomes a reduce-scatter plus an all-gather
of the same volume. A collective's time is labs.hardware.comm's α–β cost where the group sits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from labs.core.recomputation import RECOMPUTATION
from labs.hardware.comm import CommCost
from labs.model.activations import ACT_BYTES
from labs.model.spec import ModelSpec

# Per layer per step, in order: (pass, after which matrix, collective without SP, with SP).
# With SP each backward f/g is the all-gather of dY before the row-split matrix's input
# gradient, the all-gather of the column-split matrix's input again (it kept only its t-th of
# the tokens; its weight gradient needs all of them) and the reduce-scatter of its input
# gradient: the collectives labs.parallel.layer_time.tp_schedule times, 4 forward + 6.
LAYER_COLLECTIVES = (
    ("forward", "attention output projection (row-split)", "all_reduce",
     ("all_gather", "reduce_scatter")),
    ("forward", "MLP down projection (row-split)", "all_reduce",
     ("all_gather", "reduce_scatter")),
    ("backward", "MLP up/gate projection (column-split)", "all_reduce",
     ("all_gather", "all_gather", "reduce_scatter")),
    ("backward", "QKV projection (column-split)", "all_reduce",
     ("all_gather", "all_gather", "reduce_scatter")),
)
STEP_EXTRA_COLLECTIVES = 2  # the embedding's (forward) and the output layer's (backward)
# How much of one f or g hides behind compute, counted alone: none. In Megatron-LM (Shoeybi
# et al. 2019 sec 3) the output of g (the all-reduce after a row-split matmul) is the input of
# the next layer norm: each forward collective blocks the matmul after it.
TP_OVERLAP = 0.0
# What a layer hides, timed beside its own GEMMs (labs.parallel.layer_time): Megatron's
# default since 2022 runs each column-split layer's backward collectives beside its other
# GEMM (the input-gradient all-reduce beside the weight-gradient GEMM, Korthikanti et al.
# 2022 sec 6.2); Megatron Core's --tp-comm-overlap ("all", Transformer Engine userbuffers;
# Wang et al. 2023, ASPLOS) overlaps the rest, off by default. EP04 and EP08 both take
# Megatron's default.
TP_OVERLAP_SETTING = "backward"


@dataclass(frozen=True)
class TPExchange:
    """One of Megatron's TP collectives (operator f or g) on one GPU of the group."""

    seconds: float  # on the critical path: TP_OVERLAP of it hidden
    bytes_per_gpu: float
    algorithm: str
    bottleneck: str  # the link that bounds it


def tp_exchange(cost_of: Callable[[str, float], CommCost], size: float, sp: bool) -> TPExchange:
    """One f or g on the ``size``-byte activations: an all-reduce, or with sequence
    parallelism a reduce-scatter plus an all-gather of the same volume (Korthikanti et al.
    2022 sec 4.2.2). ``cost_of(kind, size)`` prices a collective where the group sits."""
    kinds = ("all_gather", "reduce_scatter") if sp else ("all_reduce",)
    costs = [cost_of(kind, size) for kind in kinds]
    return TPExchange((1 - TP_OVERLAP) * sum(c.seconds for c in costs),
                      sum(c.bytes_per_gpu for c in costs),
                      "+".join(sorted({c.algorithm for c in costs})), costs[0].bottleneck)


def tp_collectives(layers: int, recompute: str = "selective") -> int:
    """f and g collectives ``layers`` layers (one pipeline rank's) run per micro-batch: 2 in
    forward and 2 in backward each (LAYER_COLLECTIVES); full recomputation runs the forward,
    and its 2, again (Korthikanti et al. 2022 sec 5), on the layers it covers (all, or a
    layer-granular mode's share: ``Recomputation.groups``); so does torchtitan's op-level
    policy, which keeps none of the forward's g collectives whole (without SP it runs their
    all-reduces again, with SP their all-gather halves: ``labs.model.op_checkpoint``)."""
    forward = sum(1 for phase, *_ in LAYER_COLLECTIVES if phase == "forward")
    backward = len(LAYER_COLLECTIVES) - forward

    def again(mode: str) -> bool:
        return RECOMPUTATION[mode].forward_again or bool(RECOMPUTATION[mode].policy)

    return sum(n * (forward * (2 if again(mode) else 1) + backward)
               for mode, n, _ in RECOMPUTATION[recompute].groups(layers))


def collective_bytes(model: ModelSpec, seq_len: int, micro_batch: int) -> float:
    """The tensor each TP collective reduces or gathers: s·b·h bf16 activations."""
    return seq_len * micro_batch * model.hidden * ACT_BYTES
