"""EP08's auto-planner, its plan space: the request (``PlanRequest``) and the bounded set of
plans it makes, before any rule, audit or timing (``labs.recipe.planner`` searches them).

The candidates (bounded; ``candidates``):
- TP: divisors of the GPUs per node (TP stays inside a node) that divide the attention heads
  and the KV heads (Megatron asserts both; ``labs.parallel.layout.problems``);
- PP: every stage count up to ``MAX_STAGES`` (and the layers) that divides the GPUs: even
  stages where it divides the layers, otherwise Megatron's uneven first and last stages
  (``uneven_split``: the middle stages take ceil(L/p) layers, the first and last the rest,
  lighter; Llama 3 405B's 126 layers on 16 stages: 7, 8 x 14, 7, as Meta ran it, Llama 3
  paper arXiv:2407.21783 sec 3.3.2); CP: powers of two up to ``MAX_PLAN_CP`` (those the
  run's software offers, ``PlanRequest.cp_sizes``) with the sequence a multiple of 2·CP
  (zigzag); EP (MoE only): divisors of the expert count; DP takes
  the rest;
- ZeRO 0–3; recomputation none / selective / full with unfused attention, flash / every-2nd
  / full with a fused kernel (``PlanRequest.zero_stages`` and ``recompute_modes``: what a
  run's software offers; ``FUSED_RECOMPUTE``);
- schedules: Megatron-LM's (their records in ``labs.schedules.catalogue``): 1F1B, and
  interleaved 1F1B with v = 2, 4 or 8 chunks per rank, as many as every
  stage has layers for (Narayanan et al. 2021 sec 2.2.2: the bubble shrinks by v, at v times
  the point-to-point traffic; with as few micro-batches as stages, as Llama 3's 16 on 16
  stages, only v >= 4 brings the bubble under the audit's limit) — the set stays bounded at
  |TP|·|PP|·|CP|·|EP|·4·3·(1 + |V|)·|micro-batch| plans;
- micro-batch 1, 2 or 4 sequences; micro-batches = global batch / (micro-batch x DP), whole.

Each shape (a layout, a schedule and a micro-batch size: ``shapes``) makes a plan per ZeRO
stage and recomputation the request offers, and with HSDP each ZeRO-3 one again
(``variants``); ``count_plans`` counts the shapes without making them, what app/lanes.py
estimates a search's cost by.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import product

from labs.core.errors import LabInputError
from labs.core.limits import (
    DEFAULT_MATMUL_EFFICIENCY,
    KORTHIKANTI_RECOMPUTE,
    MAX_GLOBAL_BATCH,
    MAX_MICROBATCHES,
    MAX_PLAN_GPUS,
    MAX_STAGES,
    ZERO_STAGES,
)
from labs.core.validate import whole
from labs.hardware.links import Cluster
from labs.model.ops import attention_impl
from labs.model.spec import ModelSpec
from labs.parallel.layout import divisors
from labs.recipe.inputs import SOFTWARE, Plan, check_matmul_efficiency
from labs.schedules.catalogue import CATALOGUE
from labs.schedules.stages import chunk_problems, stage_layer_counts, uneven_split

MAX_PLAN_CP = 16
PLAN_CP = tuple(c for c in (1, 2, 4, 8, 16) if c <= MAX_PLAN_CP)  # context-parallel sizes tried
MICRO_BATCHES = (1, 2, 4)  # sequences per micro-batch tried
# Interleaved chunks a rank tried: on even stages every v up to 8 that gives each of a rank's
# chunks the same layers (``chunk_problems``: Megatron-LM refuses the rest; round-20 cold
# reading Q, finding 2: the tried 2, 4, 8 put v = 8 on 10 layers a rank and left out 5); on
# Megatron's uneven first/last stages, whose chunks only an explicit layout string sets (as
# the recipe's audit takes them: labs.recipe.lab.rule_problems), 2, 4 and 8.
PLAN_VIRTUAL = tuple(range(2, 9))
PLAN_VIRTUAL_UNEVEN = (2, 4, 8)
# The schedules Megatron-LM runs, each at its fewest chunks a rank: (1f1b, 1),
# (interleaved-1f1b, 2); ``_schedules`` sets each plan's v.
PLAN_SCHEDULES = tuple((k, PLAN_VIRTUAL[0] if s.interleaved else 1)
                       for k, s in CATALOGUE.items() if s.megatron)
# The recomputation modes tried. Korthikanti's three where the attention is unfused (its
# scores are stored, or the core recomputed); with a fused attention kernel, "flash" (what
# Llama 3 and NeMo run: nothing recomputed, no scores stored), "every-2nd" (every second
# layer of a rank fully recomputed: Megatron's block method, torchtitan's selective layer
# AC) and "full": there "none" takes flash's time on more memory (the s x s scores it would
# keep) and "selective" flash's memory on more time (the attention forward again), so either
# can only rank below its flash twin. A request may name its own
# (``PlanRequest.recompute_modes``).
PLAN_RECOMPUTE = (*KORTHIKANTI_RECOMPUTE, "flash", "every-2nd")
UNFUSED_RECOMPUTE = KORTHIKANTI_RECOMPUTE
FUSED_RECOMPUTE = ("flash", "every-2nd", "full")
# A request that would enumerate more is refused: every preset is searched on any cluster the
# recipe takes, up to MAX_PLAN_GPUS (the most, GLM-5.3's 102,492 candidates from 16,384 GPUs
# up, with three recomputation modes to try, fused attention or not:
# every EP that divides its 256 experts; ~3.5 s); a model code with more experts and layers
# to divide can go past it.
MAX_CANDIDATES = 120_000
MAX_SHAPE_LOOPS = 100_000  # TP x PP x CP x EP x schedule x micro-batch combinations looked at
MAX_TOP = 50  # plans one search returns at most


@dataclass(frozen=True)
class PlanRequest:
    model: ModelSpec
    cluster: Cluster
    gpus: int
    seq_len: int
    global_batch: int
    recipe: str = "adam16"
    top: int = 20
    # An override of the GPUs' measured full-wave GEMM rate (None: as measured).
    matmul_efficiency: float | None = DEFAULT_MATMUL_EFFICIENCY
    # The run's software settings every candidate takes (labs.recipe.inputs.SOFTWARE pairs;
    # empty: Plan's defaults, Megatron Core today), and the ZeRO stages and recomputation
    # modes it offers (Megatron-LM 2021 had neither the distributed optimizer nor selective
    # recomputation: Korthikanti et al. 2022 introduced it, Megatron-LM v3.0 the former), and
    # the context-parallel sizes (Megatron-LM 2021 had no context parallelism: Megatron Core
    # added --context-parallel-size in 2023, after ring attention, Liu et al. 2023,
    # arXiv:2310.01889; (1,): none).
    software: tuple[tuple[str, object], ...] = ()
    zero_stages: tuple[int, ...] = ZERO_STAGES
    recompute_modes: tuple[str, ...] | None = None  # None: by the attention kernel (above)
    cp_sizes: tuple[int, ...] = PLAN_CP
    # Pipeline stages: None any, False none (PP 1: the 2-D family, FSDP + TP), True at least
    # two (the 3-D family; labs.recipe.two_d compares the two).
    pipeline: bool | None = None
    # HSDP: beside each ZeRO-3 plan, the same plan sharded inside a node and replicated
    # across nodes (dp_shard = a node's GPUs / (TP x CP), where that divides DP and is less;
    # labs.recipe.dp_time). False: ZeRO-3 over all of DP only.
    hsdp: bool = False

    def __post_init__(self) -> None:
        whole("gpus", self.gpus, 1, MAX_PLAN_GPUS, "GPUs")
        check_matmul_efficiency(self.matmul_efficiency)
        if any(name not in SOFTWARE for name, _ in self.software):
            raise LabInputError("software", f"software settings are {', '.join(SOFTWARE)}")
        software = Plan(**dict(self.software))  # the settings' own checks
        if not self.zero_stages or not set(self.zero_stages) <= set(ZERO_STAGES):
            raise LabInputError("zero", f"ZeRO stages are some of {ZERO_STAGES}")
        if self.recompute_modes is None:
            fused = attention_impl(self.cluster.gpu,
                                   software.step_options().compute) != "unfused"
            object.__setattr__(self, "recompute_modes",
                               FUSED_RECOMPUTE if fused else UNFUSED_RECOMPUTE)
        if not self.recompute_modes or not set(self.recompute_modes) <= set(PLAN_RECOMPUTE):
            raise LabInputError("recompute", f"recomputation modes are some of "
                                             f"{', '.join(PLAN_RECOMPUTE)}")
        if not self.cp_sizes or not set(self.cp_sizes) <= set(PLAN_CP) or 1 not in self.cp_sizes:
            raise LabInputError("cp", f"context-parallel sizes are 1 and any of "
                                      f"{', '.join(map(str, PLAN_CP[1:]))}")
        if self.gpus % self.cluster.gpus_per_node:
            raise LabInputError("gpus", f"{self.gpus:,} GPUs are not whole nodes of "
                                        f"{self.cluster.gpus_per_node}")
        whole("global_batch", self.global_batch, 1, MAX_GLOBAL_BATCH, "global batch")
        whole("top", self.top, 1, MAX_TOP, "plans to return")

    @property
    def nodes(self) -> int:
        return self.gpus // self.cluster.gpus_per_node


def candidates(req: PlanRequest) -> list[Plan]:
    """Every plan of the bounded set for ``req`` (before the rules and memory)."""
    return [variant for shape in shapes(req) for variant in variants(shape, req)]


def _refuse(count: int) -> None:
    if count > MAX_CANDIDATES:
        raise LabInputError("gpus", f"{count:,} candidate plans; the planner searches at most "
                                    f"{MAX_CANDIDATES:,}")


def variants(shape: Plan, req: PlanRequest) -> list[Plan]:
    """A shape's plans: every ZeRO stage and recomputation the request offers (the recipe
    lab's rules do not depend on either, so a shape is checked once)."""
    found = [_with(shape, zero=zero, recompute=rec)
             for zero, rec in product(req.zero_stages, req.recompute_modes)]
    shard = node_shard(shape, req.cluster.gpus_per_node) if req.hsdp else 0
    if shard:
        found += [_with(p, dp_shard=shard) for p in found if p.zero == 3]
    return found


def plans_per_shape(req: PlanRequest) -> int:
    """The most plans one shape makes (``variants``): each ZeRO stage and recomputation, and
    with ``hsdp`` each ZeRO-3 one again, sharded inside a node."""
    hsdp = req.hsdp and 3 in req.zero_stages
    return (len(req.zero_stages) + hsdp) * len(req.recompute_modes)


def node_shard(plan: Plan, gpus_per_node: int) -> int:
    """HSDP's shard degree inside a node for ``plan``'s layout: the DP ranks a node holds,
    a node's GPUs / (TP x CP) (Megatron's order puts TP, then CP, then DP inside it), where
    that is whole, below DP, divides it and its replicas split the experts' data-parallel
    group too (``labs.recipe.lab.hsdp_problems``); 0 where no such shard group exists."""
    per = plan.tp * plan.cp
    if gpus_per_node % per:
        return 0
    shard = gpus_per_node // per
    if shard >= plan.dp or plan.dp % shard:
        return 0
    if plan.ep > 1 and plan.layout.expert_dp % (plan.dp // shard):
        return 0
    return shard


def _with(plan: Plan, **changes) -> Plan:
    """``plan`` with fields changed to values taken from the planner's own validated sets
    (ZERO_STAGES, PLAN_RECOMPUTE), without ``Plan.__post_init__``'s re-validation of every
    other field: a search makes thousands (``dataclasses.replace`` cost it 0.1 ms each)."""
    new = object.__new__(Plan)
    new.__dict__.update(plan.__dict__, **changes)
    return new


def _layouts(m: ModelSpec, gpus: int, gpus_per_node: int, seq_len: int,
             cp_sizes: tuple[int, ...] = PLAN_CP, pipeline: bool | None = None):
    """(tp, pp, cp, ep, dp, (first, last stage layers)) of every layout the planner tries,
    the loops' bound checked first (most of their combinations do not divide the GPUs and
    make no plan)."""
    kv = m.heads if m.uses_mla else m.kv_heads
    tps = [t for t in divisors(gpus_per_node) if m.heads % t == 0 and kv % t == 0]
    splits = {p: (0, 0) if m.layers % p == 0 else uneven_split(m.layers, p)
              for p in range(1, min(MAX_STAGES, m.layers) + 1) if gpus % p == 0}
    pps = [p for p, split in splits.items() if split is not None
           and (pipeline is None or (p > 1) == pipeline)]
    cps = [c for c in sorted(cp_sizes) if seq_len % (2 * c) == 0 or c == 1]
    eps = [e for e in divisors(m.experts, gpus)] if m.is_moe else [1]
    # (the bound as before round 20: 1F1B and three interleavings a layout)
    loops = len(tps) * len(pps) * len(cps) * len(eps) * (1 + len(PLAN_VIRTUAL_UNEVEN)) \
        * len(MICRO_BATCHES)
    if loops > MAX_SHAPE_LOOPS:
        raise LabInputError("gpus", f"{loops:,} layouts and schedules to try; the planner "
                                    f"tries at most {MAX_SHAPE_LOOPS:,}")
    for tp, pp, cp, ep in product(tps, pps, cps, eps):
        if gpus % (tp * pp * cp) or gpus % (ep * pp):
            continue
        yield tp, pp, cp, ep, gpus // (tp * pp * cp), splits[pp]


def _batches(global_batch: int, dp: int) -> list[tuple[int, int]]:
    """(micro-batch, micro-batches) of each micro-batch size tried that keeps the batch."""
    return [(b, global_batch // (b * dp)) for b in MICRO_BATCHES
            if not global_batch % (b * dp) and global_batch // (b * dp) <= MAX_MICROBATCHES]


def _schedules(m: ModelSpec, pp: int, split: tuple[int, int]) -> list[tuple[str, int]]:
    """The schedules tried on ``pp`` stages: one without a pipeline (the schedule is moot),
    and interleaving at each v of PLAN_VIRTUAL that splits every stage's layers into equal
    chunks (uneven first/last stages: PLAN_VIRTUAL_UNEVEN, up to the fewest layers)."""
    if pp == 1:
        return [PLAN_SCHEDULES[0]]
    counts = stage_layer_counts(m.layers, pp, *split)
    uneven = any(split)
    return [(sched, v) for sched, fewest in PLAN_SCHEDULES
            for v in ((PLAN_VIRTUAL_UNEVEN if uneven else PLAN_VIRTUAL) if fewest > 1 else (1,))
            if v <= min(counts) and (uneven or not chunk_problems(counts, v))]


@lru_cache(maxsize=256)  # a flood of one search at new efficiencies counts it once
def count_plans(m: ModelSpec, gpus: int, gpus_per_node: int, seq_len: int,
                global_batch: int) -> int:
    """How many plans ``shapes`` makes for a default request (before each one's ZeRO stages
    and recomputation modes), counted without making them: what app/lanes.py estimates a
    search's cost by."""
    return sum(len(_batches(global_batch, dp)) * len(_schedules(m, pp, split))
               for _, pp, _, _, dp, split in _layouts(m, gpus, gpus_per_node, seq_len))


def shapes(req: PlanRequest) -> list[Plan]:
    """The layouts and schedules of the bounded set (ZeRO 0, selective recomputation)."""
    m = req.model
    per_shape = plans_per_shape(req)
    found = []
    for tp, pp, cp, ep, dp, (first, last) in _layouts(
            m, req.gpus, req.cluster.gpus_per_node, req.seq_len, req.cp_sizes, req.pipeline):
        schedules = _schedules(m, pp, (first, last))
        for b, mb in _batches(req.global_batch, dp):
            for sched, v in schedules:
                found.append(Plan(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, schedule=sched,
                                  virtual=v, micro_batch=b,
                                  microbatches=mb, seq_len=req.seq_len, recipe=req.recipe,
                                  first_stage_layers=first, last_stage_layers=last,
                                  **dict(req.software)))
    _refuse(len(found) * per_shape)
    return found
