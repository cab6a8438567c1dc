"""EP08's auto-planner: every valid plan for a model, a cluster and a sequence length, ranked.

The candidates (bounded; ``candidates``):
- TP: divisors of the GPUs per node (TP stays inside a node) that divide the attention heads
  and the KV heads (Megatron asserts both; ``labs.layout.problems``);
- PP: divisors of the layer count (even stages: the recipe lab's rules reject uneven ones) up
  to ``MAX_STAGES``; CP: powers of two up to ``MAX_PLAN_CP`` with the sequence a multiple of
  2·CP (zigzag); EP (MoE only): divisors of the expert count; DP takes the rest;
- ZeRO 0–3, recomputation none / selective / full;
- schedules: 1F1B, and interleaved 1F1B with 2 chunks per rank (Narayanan et al. 2021 sec
  2.2.2: v = 2 already halves the bubble; larger v trades more point-to-point traffic) — the
  set stays bounded at |TP|·|PP|·|CP|·|EP|·4·3·2·|micro-batch| plans;
- micro-batch 1, 2 or 4 sequences; micro-batches = global batch / (micro-batch x DP), whole.

The search, cheapest test first:
1. the recipe lab's own rules (``labs.recipe.rule_problems``);
2. the bubble audit (the simulated bubble at most ``labs.recipe.BUBBLE_LIMIT``) and a lower
   bound of the ledger's memory (the weight, gradient and optimizer bytes of the
   heaviest stage, ZeRO-sharded as ``labs.memory`` shards them), then the ledger itself
   (``labs.memory.compute_memory``) — plans that do not fit are dropped;
3. an upper bound of throughput: m micro-batches of the GPU's FLOPs share at the lab's
   compute rate (``labs.compute.hardware_flops_per_token`` at ``matmul_efficiency`` of the
   peak, as ``labs.recipe_time`` counts them) plus the blocking TP collectives
   (``labs.tp_comm``; TP sits inside a node, so its cost needs no rank placement),
   stretched by the *simulated* bubble (``labs.recipe.measured_bubble``, the very figure the
   recipe lab uses, not the textbook (p−1)/(v·m+p−1)), plus a floor of ZeRO-3's exposed
   weight traffic (``_zero3_floor``). The rest of the CP, EP and DP traffic only adds time,
   so no plan beats its bound;
4. exact figures (branch and bound): plans are evaluated by ``labs.recipe.evaluate`` in
   order of their bound, fastest first; the search stops once it holds ``top`` plans that
   pass every audit and the next bound is slower than the slowest of them. No plan left can
   beat its bound, so the ranking shown is the lab's own, and is complete.

Every returned plan is exact, at any GPU count: the lab places rank groups from their pattern
(``labs.recipe_time.spread``, O(group) rather than O(GPUs)). ``MAX_EVALUATIONS`` bounds the
work of one search; should it run out first, ``complete`` says so (the plans shown are still
exact and pass every audit, a faster one may remain).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import product

from labs.comm import collective
from labs.compute import hardware_flops_per_token, model_flops_per_token
from labs.errors import LabInputError
from labs.layout import divisors, whole
from labs.limits import (
    DEFAULT_MATMUL_EFFICIENCY,
    MAX_GLOBAL_BATCH,
    MAX_MICROBATCHES,
    MAX_PLAN_GPUS,
    MAX_STAGES,
    ZERO_STAGES,
)
from labs.links import Cluster
from labs.memory import RECIPES, MemoryInput, compute_memory
from labs.placement import stage_params
from labs.presets import ModelSpec
from labs.recipe import (
    BUBBLE_LIMIT,
    Plan,
    RecipeResult,
    check_matmul_efficiency,
    evaluate,
    measured_bubble,
    rule_problems,
)
from labs.recipe_time import ACT_BYTES
from labs.tp_comm import tp_collectives, tp_exchange

MAX_PLAN_CP = 16
MICRO_BATCHES = (1, 2, 4)  # sequences per micro-batch tried
PLAN_SCHEDULES = (("1f1b", 1), ("interleaved-1f1b", 2))
PLAN_RECOMPUTE = ("none", "selective", "full")
MAX_CANDIDATES = 50_000  # a request that would enumerate more is refused
MAX_TOP = 50
MAX_EVALUATIONS = 2000  # exact evaluations one search may run (each is ~1 ms)


@dataclass(frozen=True)
class PlanRequest:
    model: ModelSpec
    cluster: Cluster
    gpus: int
    seq_len: int
    global_batch: int
    recipe: str = "adam16"
    top: int = 20
    matmul_efficiency: float = DEFAULT_MATMUL_EFFICIENCY  # the recipe lab's compute rate

    def __post_init__(self) -> None:
        whole("gpus", self.gpus, 1, MAX_PLAN_GPUS, "GPUs")
        check_matmul_efficiency(self.matmul_efficiency)
        if self.gpus % self.cluster.gpus_per_node:
            raise LabInputError("gpus", f"{self.gpus:,} GPUs are not whole nodes of "
                                        f"{self.cluster.gpus_per_node}")
        whole("global_batch", self.global_batch, 1, MAX_GLOBAL_BATCH, "global batch")
        whole("top", self.top, 1, MAX_TOP, "plans to return")

    @property
    def nodes(self) -> int:
        return self.gpus // self.cluster.gpus_per_node


@dataclass(frozen=True)
class Ranked:
    """One plan with the recipe lab's own figures (``exact``: always, since every returned
    plan is evaluated; kept in the API for its readers)."""

    plan: Plan
    memory_per_gpu_bytes: float
    step_s: float
    tokens_per_s: float
    mfu: float
    bubble_fraction: float
    exact: bool
    passes: bool
    result: RecipeResult | None = None
    pareto: bool = False


@dataclass(frozen=True)
class PlanSearch:
    request: PlanRequest
    plans: tuple[Ranked, ...]  # ranked, fastest first
    candidates: int  # enumerated
    legal: int  # passing the rules
    hopeful: int  # legal and not over memory on weights and optimizer state alone
    evaluated: int  # plans checked by the lab (its ledger, then its timing if they fit)
    complete: bool  # the ranking is provably the lab's top (bound search finished)


def candidates(req: PlanRequest) -> list[Plan]:
    """Every plan of the bounded set for ``req`` (before the rules and memory)."""
    m, gpus, g = req.model, req.gpus, req.cluster.gpus_per_node
    kv = m.heads if m.uses_mla else m.kv_heads
    tps = [t for t in divisors(g) if m.heads % t == 0 and kv % t == 0]
    pps = [p for p in divisors(m.layers, MAX_STAGES) if gpus % p == 0]
    cps = [c for c in (1, 2, 4, 8, 16) if c <= MAX_PLAN_CP and req.seq_len % (2 * c) == 0
           or c == 1]
    eps = [e for e in divisors(m.experts, gpus)] if m.is_moe else [1]
    count = len(tps) * len(pps) * len(cps) * len(eps) * len(ZERO_STAGES) \
        * len(PLAN_RECOMPUTE) * len(PLAN_SCHEDULES) * len(MICRO_BATCHES)
    if count > MAX_CANDIDATES:
        raise LabInputError("gpus", f"{count:,} candidate plans; the planner searches at most "
                                    f"{MAX_CANDIDATES:,}")
    found = []
    for tp, pp, cp, ep in product(tps, pps, cps, eps):
        if gpus % (tp * pp * cp) or gpus % (ep * pp):
            continue
        dp = gpus // (tp * pp * cp)
        for b in MICRO_BATCHES:
            if req.global_batch % (b * dp):
                continue
            mb = req.global_batch // (b * dp)
            if mb > MAX_MICROBATCHES:
                continue
            for (sched, v), zero, rec in product(PLAN_SCHEDULES, ZERO_STAGES, PLAN_RECOMPUTE):
                if pp == 1 and sched != "1f1b":
                    continue  # no pipeline: the schedule is moot
                found.append(Plan(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, zero=zero,
                                  recompute=rec, schedule=sched, virtual=v, micro_batch=b,
                                  microbatches=mb, seq_len=req.seq_len, recipe=req.recipe))
    return found


def state_bytes_floor(plan: Plan, model: ModelSpec) -> float:
    """Weights, gradients and optimizer state of the heaviest stage, sharded as the ledger
    shards them (ZeRO, Rajbhandari et al. 2020 Fig. 1): a lower bound of its total."""
    r = RECIPES[plan.recipe]
    lay = plan.layout  # validated once: the properties below are plain arithmetic
    best = 0.0
    for sp in stage_params(model, plan.pp, plan.schedule, plan.virtual):
        dense = sp.tp_split / plan.tp + sp.replicated
        expert = sp.experts / plan.ep
        total = 0.0
        for bytes_per_param, stage in ((r.weights, 3), (r.gradients, 2),
                                       (r.master_weights + r.optimizer_moments, 1)):
            on = plan.zero >= stage
            total += bytes_per_param * (dense / (lay.dense_shard_group if on else 1)
                                        + expert / (lay.expert_dp if on else 1))
        best = max(best, total)
    return best


def bound_step_s(plan: Plan, model: ModelSpec, cluster: Cluster,
                 matmul_efficiency: float = DEFAULT_MATMUL_EFFICIENCY) -> float:
    """The step with only compute, TP traffic and the bubble: a lower bound of the lab's step
    time (its CP, EP and DP parts only add to it)."""
    tokens = plan.seq_len * plan.micro_batch
    rate = cluster.gpu.bf16_flops * matmul_efficiency
    per_mb = hardware_flops_per_token(model, plan.seq_len, plan.recompute) * tokens \
        / (plan.tp * plan.cp * plan.pp) / rate
    if plan.tp > 1:
        # TP as labs.recipe_time counts it (labs.tp_comm, EP04's model). TP divides the GPUs
        # per node here, so each group is one aligned block inside a node.
        act = plan.seq_len / plan.cp * plan.micro_batch * model.hidden * ACT_BYTES
        one = tp_exchange(lambda kind, size: collective(kind, size, plan.tp, cluster,
                                                        per_node=plan.tp), act, sp=True)
        per_mb += tp_collectives(math.ceil(model.layers / plan.pp), plan.recompute) \
            * one.seconds
    bubble = measured_bubble(plan.schedule, plan.pp, plan.microbatches, plan.virtual)
    return plan.microbatches * per_mb / (1 - bubble) \
        + _zero3_floor(plan, model, cluster, rate)


def _zero3_floor(plan: Plan, model: ModelSpec, cluster: Cluster, rate: float) -> float:
    """ZeRO-3's exposed weight traffic, at least: as ``labs.recipe_time`` counts it (gather
    the heaviest stage's dense weights before each forward and backward, reduce-scatter the
    gradients after, each hidden behind that pass's *compute*), with the DP x CP group packed
    into as few nodes as it can be (the cheapest placement) and the experts left out. Other
    stages hide their traffic behind windows that include communication: floor 0."""
    group = plan.dp * plan.cp
    if plan.zero != 3 or group == 1:
        return 0.0
    recipe = RECIPES[plan.recipe]
    dense = max(sp.tp_split / plan.tp + sp.replicated
                for sp in stage_params(model, plan.pp, plan.schedule, plan.virtual))
    tokens = plan.seq_len * plan.micro_batch
    share = plan.tp * plan.cp * plan.pp * rate
    model_tok = model_flops_per_token(model, plan.seq_len)
    forward = model_tok / 3 * tokens / share
    backward = (hardware_flops_per_token(model, plan.seq_len, plan.recompute)
                - model_tok / 3) * tokens / share
    gather = collective("all_gather", dense * recipe.weights, group, cluster).seconds
    reduce = collective("reduce_scatter", dense * recipe.gradients, group, cluster).seconds
    return plan.microbatches * (max(0.0, gather - forward)
                                + max(0.0, gather + reduce - backward))


def _ledger_bytes(plan: Plan, req: PlanRequest) -> float:
    """The heaviest stage's bytes per GPU: the ledger ``labs.recipe.evaluate`` audits."""
    return compute_memory(MemoryInput(
        model=req.model, gpu=req.cluster.gpu, recipe=plan.recipe, seq_len=plan.seq_len,
        micro_batch=plan.micro_batch, recompute=plan.recompute, tp=plan.tp, pp=plan.pp,
        cp=plan.cp, dp=plan.dp, ep=plan.ep, zero=plan.zero, schedule=plan.schedule,
        microbatches=plan.microbatches, virtual=plan.virtual)).total_bytes


def _from_result(r: RecipeResult) -> Ranked:
    return Ranked(r.plan, r.memory_per_gpu_bytes or 0.0, r.step_s, r.tokens_per_s, r.mfu,
                  r.bubble_fraction, True, r.passes, r)


def pareto_front(plans: list[Ranked]) -> set[int]:
    """Indices of the plans no other beats on both memory per GPU (lower) and throughput."""
    order = sorted(range(len(plans)), key=lambda i: (plans[i].memory_per_gpu_bytes,
                                                     -plans[i].tokens_per_s))
    front, best = set(), -1.0
    for i in order:
        if plans[i].tokens_per_s > best:
            front.add(i)
            best = plans[i].tokens_per_s
    return front


def search(req: PlanRequest) -> PlanSearch:
    """Rank the valid plans of ``req`` by throughput (tokens per second), fastest first."""
    model, cluster, nodes, rate = req.model, req.cluster, req.nodes, req.matmul_efficiency
    capacity = cluster.gpu.memory_bytes
    found = candidates(req)
    legal = [p for p in found if not rule_problems(p, model, cluster, nodes)]
    # The floor is a few multiplications; the ledger itself runs only on plans in reach.
    # A bubble over the audit's limit fails the lab's audit whatever else: drop it here too.
    hopeful = sorted((bound_step_s(p, model, cluster, rate), i, p) for i, p in enumerate(legal)
                     if state_bytes_floor(p, model) <= capacity
                     and measured_bubble(p.schedule, p.pp, p.microbatches, p.virtual)
                     <= BUBBLE_LIMIT)
    ranked: list[Ranked] = []
    evaluated, complete = 0, True
    for bound, _, plan in hopeful:
        if len(ranked) >= req.top and bound > ranked[req.top - 1].step_s:
            break  # no plan left can enter the top (a tie might, on less memory)
        if evaluated >= MAX_EVALUATIONS:
            complete = False
            break
        evaluated += 1
        if _ledger_bytes(plan, req) > capacity:
            continue  # over memory fails the lab's memory audit: no need to time it
        result = evaluate(plan, model, cluster, nodes, rate)
        if result.passes:
            ranked.append(_from_result(result))
            # Equal steps (ZeRO stages whose traffic hides) list the lighter plan first.
            ranked.sort(key=lambda r: (r.step_s, r.memory_per_gpu_bytes))
    ranked = ranked[:req.top]
    front = pareto_front(ranked)
    ranked = [Ranked(**{**r.__dict__, "pareto": i in front}) for i, r in enumerate(ranked)]
    return PlanSearch(req, tuple(ranked), len(found), len(legal), len(hopeful), evaluated,
                      complete)
