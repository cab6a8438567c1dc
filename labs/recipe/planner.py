"""EP08's auto-planner: every valid plan for a model, a cluster and a sequence length, ranked.

The candidates: ``labs.recipe.plan_space`` (the request, and the bounded set of plans it makes:
each layout, schedule and micro-batch size, with every ZeRO stage and recomputation).

The search, cheapest test first:
1. the recipe lab's own rules (``labs.recipe.lab.rule_problems``);
2. the bubble audit, first on the textbook bubble (p−1)/(v·m+p−1), which the simulated one
   never undercuts (tests/labs/test_recipe_uneven.py checks it over the planner's shapes),
   then on the measured bubble itself once a plan is reached; and a lower bound of the
   ledger's memory (the weight, gradient and optimizer bytes of the heaviest stage,
   ZeRO-sharded as ``labs.memory.lab`` shards them, or the first stage's with the activations
   it holds), then the ledger itself (``labs.memory.lab.compute_memory``) — plans that do not
   fit are dropped;
3. an upper bound of throughput, in three steps, each only for the plans the one before
   leaves in reach: first the heaviest stage's layers alone (``labs.recipe.stage_time
   .layers_floor``: each layer's kernels and exposed TP, CP and EP collectives, the same
   cached layer times the recipe sums, times the stage's layer count; no stage is built)
   stretched by the textbook bubble; then the recipe's own pipeline part for the plan
   (``labs.recipe.stage_time.stage_times``: the slowest stage's kernels, TP, CP and EP
   traffic and sends, cached, so the evaluation that follows reuses it), stretched by the
   bubble, plus the optimizer step and a floor of ZeRO-3's exposed weight traffic
   (``zero3_floor``: the slowest stage's per-layer gathers at the cheapest placement); then
   the same on the measured bubble (``labs.recipe.lab.measured_bubble``, the very figure the
   recipe lab uses), so only the pipelines the search reaches are simulated. The DP part
   only adds time, so no plan beats any of its bounds. (GPT-3 on 2,048 GPUs took 4 s:
   simulating every candidate's pipeline up front, up to 65,536 actions each, and timing
   ~700 plans that failed the CP audit the bound did not see. DeepSeek-V3 on 2,048 H800s,
   77,000 candidates, took 4.0 s building all 13,000 of its layouts' stages up front; on
   the layers first it builds a tenth of them.)
4. exact figures (branch and bound): plans are evaluated by ``labs.recipe.lab.evaluate`` in
   order of their bound, fastest first; the search stops once it holds ``top`` plans that
   pass every audit and the next bound is slower than the slowest of them. No plan left can
   beat its bound, so the ranking shown is the lab's own, and is complete. Of the plans
   checked that fail, the search counts which audits they fail (``PlanSearch.failed``): a
   search that finds nothing says why (a MoE whose all-to-all stays exposed without EP
   overlap; too few micro-batches to hide the bubble or the gradients behind).

The software settings (``PlanRequest.software``: attention kernel, overlaps, EP dispatch,
kernels, as the recipe page sets them) are every candidate's: a MoE plan is timed with the
dispatch and overlap its run would use.

Every returned plan is exact, at any GPU count: the lab places rank groups from their pattern
(``labs.recipe.groups.spread``, O(group) rather than O(GPUs)). ``MAX_EVALUATIONS`` bounds the
work of one search; should it run out first, ``complete`` says so (the plans shown are still
exact and pass every audit, a faster one may remain).

Measured (``planner_time`` in tests/benchmarks/bench.py, caches cleared for the cold run, on
this 2-core box), with the op-level step model: Llama 3.1 405B on 16,384 H100s at Meta's batch
(2,048 x 8,192 tokens) 0.31 s cold, 0.10 s warm; GPT-3 175B on 2,048 H100s, batch 1,536:
0.26 s cold, 0.14 s warm; Qwen3-235B-A22B on 256 H100s with DeepEP (56,148 candidates): 1.1 s
cold, 0.7 s warm; DeepSeek-V3 on 2,048 H800s with its FP8 recipe, DeepEP and EP overlap
(76,992): 1.7 s cold, 1.0 s warm.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass

from labs.recipe.audits import BUBBLE_LIMIT, MEMORY_AUDIT
from labs.recipe.bounds import (
    bound_step_s,
    core_bound,
    held_activations,
    layers_bound,
    plan_stages,
    state_floors,
    textbook_bubble,
    zero3_floor,
)
from labs.recipe.inputs import Plan, RecipeResult
from labs.recipe.lab import evaluate, ledger, measured_bubble, rule_problems
from labs.recipe.plan_space import PlanRequest, plans_per_shape, shapes, variants

# A queued plan's bound, tightest last: its layers alone (textbook bubble), its stages'
# pipeline part (textbook bubble), the same on the simulated bubble; then it is evaluated.
LAYERS, TEXTBOOK, MEASURED = 0, 1, 2
MAX_EVALUATIONS = 2000  # exact evaluations one search may run (each is ~1 ms)
# Actions (2·p·m·v) of the distinct pipelines one search may simulate, each once (cached in
# labs.recipe.lab by (schedule, p, m, v)); the simulator places ~1M actions in ~2 s here.
MAX_SIMULATED_EVENTS = 1_000_000


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
    # Of the plans checked that failed, how many failed each audit (a plan may fail more
    # than one), most first: why a search found nothing, or little.
    failed: tuple[tuple[str, int], ...] = ()


def _ledger_bytes(plan: Plan, req: PlanRequest) -> float:
    """The heaviest stage's bytes per GPU: the ledger ``labs.recipe.lab.evaluate`` audits (the
    same cached call)."""
    return ledger(plan, req.model, req.cluster).total_bytes


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
    found = shapes(req)
    legal = [p for p in found if not rule_problems(p, model, cluster, nodes)]
    # The floor is a few multiplications; the ledger itself runs only on plans in reach.
    # A bubble over the audit's limit fails the lab's audit whatever else: drop it here too
    # (the textbook bubble first, a lower bound of the simulated one).
    queue = []
    for shape in legal:
        bubble = textbook_bubble(shape)
        if bubble > BUBBLE_LIMIT:
            continue
        # ZeRO shards the state, the recomputation sets the activations and the layers'
        # time: each is computed once per shape and combined per variant.
        states, held, layers = {}, {}, {}
        for plan in variants(shape, req):
            key = (plan.zero, plan.dp_shard)
            if key not in states:
                states[key] = state_floors(plan, model)
            if plan.recompute not in held:
                held[plan.recompute] = held_activations(plan, model)
            heaviest, first = states[key]
            if max(heaviest, first + held[plan.recompute]) > capacity:
                continue  # state_bytes_floor
            if plan.recompute not in layers:
                layers[plan.recompute] = layers_bound(plan, model, cluster, rate, bubble)
            queue.append((layers[plan.recompute], len(queue), LAYERS, plan))
    hopeful = len(queue)
    heapq.heapify(queue)
    ranked: list[Ranked] = []
    evaluated, simulated, complete, failed = 0, {}, True, Counter()
    while queue:
        bound, i, level, plan = heapq.heappop(queue)
        if len(ranked) >= req.top and bound > ranked[req.top - 1].step_s:
            break  # no plan left can enter the top (a tie might, on less memory)
        if level == LAYERS:
            # Reached on its layers alone: build its stages (the recipe's own, cached for
            # the evaluation) and queue it again on the pipeline part, textbook bubble.
            st = plan_stages(plan, model, cluster, rate)
            heapq.heappush(queue, (core_bound(plan, st, textbook_bubble(plan))
                                   + zero3_floor(plan, st), i, TEXTBOOK, plan))
            continue
        if level == TEXTBOOK and plan.pp > 1:
            # Reached on the textbook bubble: simulate it, and queue it again on that.
            key = (plan.schedule, plan.pp, plan.microbatches, plan.virtual)
            if key not in simulated:
                events = 2 * plan.pp * plan.microbatches * plan.virtual
                if sum(simulated.values()) + events > MAX_SIMULATED_EVENTS:
                    complete = False
                    break
                simulated[key] = events
            bubble = measured_bubble(plan.schedule, plan.pp, plan.microbatches, plan.virtual)
            if bubble <= BUBBLE_LIMIT:
                heapq.heappush(queue, (bound_step_s(plan, model, cluster, rate, bubble), i,
                                       MEASURED, plan))
            continue
        if evaluated >= MAX_EVALUATIONS:
            complete = False
            break
        evaluated += 1
        if _ledger_bytes(plan, req) > capacity:
            failed[MEMORY_AUDIT] += 1
            continue  # over memory fails the lab's memory audit: no need to time it
        result = evaluate(plan, model, cluster, nodes, rate)
        failed.update(a.name for a in result.audits if not a.ok)
        if result.passes:
            ranked.append(_from_result(result))
            # Equal steps (ZeRO stages whose traffic hides) list the lighter plan first.
            ranked.sort(key=lambda r: (r.step_s, r.memory_per_gpu_bytes))
    ranked = ranked[:req.top]
    front = pareto_front(ranked)
    ranked = [Ranked(**{**r.__dict__, "pareto": i in front}) for i, r in enumerate(ranked)]
    per_shape = plans_per_shape(req)
    return PlanSearch(req, tuple(ranked), len(found) * per_shape, len(legal) * per_shape,
                      hopeful, evaluated, complete, tuple(failed.most_common()))
