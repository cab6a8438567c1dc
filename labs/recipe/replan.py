"""Re-plan a running job: the model or the cluster changes, which audits break, and the nearest
plan that passes them all.

"Nearest" counts the decisions that change (TP, PP, CP, EP, ZeRO, recomputation, schedule,
micro-batches; DP follows from the GPU count); among the nearest, the fastest step wins. The
global batch is a training hyperparameter, so a new DP keeps it where it can: micro-batches =
global batch / (micro-batch x DP). The candidates are searched in order of distance and the
search stops at the first distance with a passing plan, so a small change costs few
evaluations (``labs.recipe.lab.evaluate`` is cached).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import product

from labs.core.limits import DEFAULT_MATMUL_EFFICIENCY, MAX_MICROBATCHES, MAX_STAGES
from labs.hardware.links import Cluster
from labs.model.spec import ModelSpec
from labs.parallel.layout import divisors
from labs.recipe.inputs import Plan, RecipeResult
from labs.recipe.lab import evaluate, ledger, rule_problems
from labs.schedules.stages import uneven_split

DECISIONS = ("tp", "pp", "cp", "ep", "zero", "recompute", "schedule", "microbatches",
             "first_stage_layers", "last_stage_layers")
MAX_CANDIDATES = 4000  # bounds the search on the largest clusters


@dataclass(frozen=True)
class Replan:
    before: RecipeResult  # the running plan on the new model or cluster
    after: RecipeResult | None  # the nearest plan that passes every audit (None: none found)
    changed: tuple[str, ...]  # the decisions that differ


def _changed(a: Plan, b: Plan) -> tuple[str, ...]:
    return tuple(k for k in DECISIONS if getattr(a, k) != getattr(b, k))


def _shard(plan: Plan, dp: int, zero: int) -> int:
    """HSDP's shard degree kept where it still applies (ZeRO-3, dividing the new DP: the
    shard group stays, the replicas change, as torchtitan re-meshes a job); else plain."""
    shard = plan.dp_shard
    return shard if shard and zero == 3 and dp % shard == 0 and shard < dp else 0


def candidates(plan: Plan, model: ModelSpec, gpus: int) -> list[Plan]:
    """Legal-looking plans for ``gpus`` GPUs, near ``plan`` first."""
    found = []
    tps = [t for t in divisors(gpus, 64) if model.heads % t == 0]
    # Even stages, or Megatron's uneven first/last stages where the layers do not divide.
    splits = {p: (0, 0) if model.layers % p == 0 else uneven_split(model.layers, p)
              for p in range(1, min(MAX_STAGES, model.layers) + 1) if gpus % p == 0}
    pps = [p for p, split in splits.items() if split is not None]
    cps = sorted({plan.cp, 1})
    eps = sorted({plan.ep, 1})
    zeros = sorted({plan.zero, 1, 3})
    recomputes = list(dict.fromkeys((plan.recompute, "selective", "full")))
    schedules = list(dict.fromkeys((plan.schedule, "1f1b")))
    for tp, pp, cp, ep, zero, rec, sched in product(tps, pps, cps, eps, zeros, recomputes,
                                                    schedules):
        if gpus % (tp * pp * cp):
            continue
        dp = gpus // (tp * pp * cp)
        per_step = plan.global_batch // plan.micro_batch
        m = per_step // dp if per_step % dp == 0 and per_step >= dp else plan.microbatches
        if m > MAX_MICROBATCHES:
            continue  # the same batch on so few DP ranks is more micro-batches than a plan has
        first, last = splits[pp]
        found.append(replace(plan, tp=tp, pp=pp, cp=cp, dp=dp, ep=ep, zero=zero,
                             recompute=rec, schedule=sched, microbatches=m,
                             first_stage_layers=first, last_stage_layers=last,
                             dp_shard=_shard(plan, dp, zero)))
    found.sort(key=lambda c: len(_changed(plan, c)))
    return found[:MAX_CANDIDATES]


def nearest(plan: Plan, model: ModelSpec, cluster: Cluster, nodes: int,
            matmul_efficiency: float = DEFAULT_MATMUL_EFFICIENCY) -> Replan:
    """The running ``plan`` on ``model`` and ``nodes`` x ``cluster``, and the nearest plan
    that passes every audit there (timed at the same compute rate)."""
    gpus = nodes * cluster.gpus_per_node
    dp = max(1, gpus // (plan.tp * plan.pp * plan.cp))
    keep = replace(plan, dp=dp, dp_shard=_shard(plan, dp, plan.zero))
    # The job as it would restart: DP re-divides the new GPU count, everything else stays.
    before = evaluate(keep if not rule_problems(keep, model, cluster, nodes) else plan,
                      model, cluster, nodes, matmul_efficiency)
    best, best_distance = None, None
    for cand in candidates(plan, model, gpus):
        distance = len(_changed(plan, cand))
        if best_distance is not None and distance > best_distance:
            break
        if rule_problems(cand, model, cluster, nodes):
            continue
        # A plan whose memory does not fit cannot pass its audits: skip timing its step (the
        # ledger is cached, so evaluate() reuses it for the plans that fit).
        if not ledger(cand, model, cluster).fits:
            continue
        result = evaluate(cand, model, cluster, nodes, matmul_efficiency)
        if result.passes and (best is None or result.step_s < best.step_s):
            best, best_distance = result, distance
    return Replan(before, best, _changed(plan, best.plan) if best else ())
