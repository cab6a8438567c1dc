"""EP08's planner bounds: what a plan cannot beat, computed without running the recipe lab.

- ``state_bytes_floor``: a lower bound of the ledger's bytes per GPU (``labs.memory.lab``);
- ``textbook_bubble``: (p−1)/(v·m+p−1), a lower bound of the simulated bubble;
- ``bound_step_s``: a lower bound of the lab's step time (``labs.recipe.lab.evaluate``): the
  recipe's own slowest-stage micro-batch (``labs.recipe.stage_time.stage_times``, cached, so the
  lab's evaluation reuses it), the bubble, the optimizer and a floor of ZeRO-3's traffic.
``labs.recipe.planner`` orders and prunes its search by them; tests/labs/test_planner.py and
test_recipe_uneven.py check that none ever beats the lab.
"""

from __future__ import annotations

from functools import lru_cache

from labs.core.catalogue import RECIPES
from labs.core.limits import DEFAULT_MATMUL_EFFICIENCY
from labs.hardware.links import Cluster
from labs.model.activations import layers_activation_bytes
from labs.model.spec import ModelSpec
from labs.recipe.dp_time import zero3_exposure
from labs.recipe.groups import Spread
from labs.recipe.inputs import Plan
from labs.recipe.lab import measured_bubble, pass_costs
from labs.recipe.stage_time import StageTimes, layers_floor, stage_times
from labs.schedules.catalogue import CATALOGUE
from labs.schedules.inflight import in_flight
from labs.schedules.stages import stage_params


def state_bytes_floor(plan: Plan, model: ModelSpec) -> float:
    """Weights, gradients and optimizer state of the heaviest stage, sharded as the ledger
    shards them (ZeRO, Rajbhandari et al. 2020 Fig. 1), or the first stage's state plus the
    activations its layers hold in flight (``labs.model.activations``, as the ledger counts them;
    the embedding's and logits' activations left out): a lower bound of the ledger's total."""
    heaviest, first = state_floors(plan, model)
    return max(heaviest, first + held_activations(plan, model))


def state_floors(plan: Plan, model: ModelSpec) -> tuple[float, float]:
    """(the heaviest stage's state, the first stage's state) in bytes per GPU: what ZeRO
    shards, the same for every recomputation (the planner computes it once per ZeRO stage)."""
    r = RECIPES[plan.recipe]
    # The layout's shard groups (ParallelLayout.dense_shard_group, expert_dp) in
    # plain arithmetic: this runs on thousands of plans.
    # HSDP (plan.hybrid) shards over DP x CP / replicas (labs.memory.inputs.shard_groups).
    replicas = plan.replicas if plan.hybrid else 1
    dense_group = plan.dp * plan.cp // replicas
    expert_group = max(1, plan.tp * plan.cp * plan.dp // plan.ep // replicas)
    weights = (r.weight_bytes, r.gradients, r.master_weights + r.optimizer_moments)
    # Bytes per dense and per expert parameter a GPU holds: each kind of state sharded from
    # its ZeRO stage on (weights 3, gradients 2, optimizer 1), so the state is linear in them.
    per_dense = per_expert = 0.0
    for bytes_per_param, stage in zip(weights, (3, 2, 1), strict=True):
        on = plan.zero >= stage
        per_dense += bytes_per_param / (dense_group if on else 1)
        per_expert += bytes_per_param / (expert_group if on else 1)

    # The embedding, output head and norms keep no low-precision copy (labs.memory.lab
    # weight_parts): per parameter of theirs, the weights' bill is this much less.
    other_less = ((r.copy_bytes + r.weights - r.other_weights)
                  / (dense_group if plan.zero >= 3 else 1))

    def state(tp_split: float, replicated: float, experts: float, embedding: float) -> float:
        dense = (tp_split / plan.tp + replicated) * per_dense + experts / plan.ep * per_expert
        return dense - (embedding / plan.tp + replicated) * other_less if other_less else dense

    distinct, first = _distinct_stages(model, plan.pp, plan.schedule, plan.virtual,
                                       plan.first_stage_layers, plan.last_stage_layers)
    return max(state(*s) for s in distinct), state(*first)


def held_activations(plan: Plan, model: ModelSpec) -> float:
    """The activations the first stage holds in flight, as the ledger counts its layers':
    the same for every ZeRO stage (the planner computes it once per recomputation)."""
    first = stage_params(model, plan.pp, plan.schedule, plan.virtual, plan.first_stage_layers,
                         plan.last_stage_layers)[0]
    held = in_flight(plan.schedule, plan.pp, plan.microbatches, 0, plan.virtual) \
        if plan.pp > 1 else 1.0
    return held * _first_stage_activations(
        model, plan.seq_len, plan.micro_batch, plan.tp, plan.cp, plan.ep, plan.recompute,
        first.dense_layers, first.moe_layers, RECIPES[plan.recipe].saved_input_bytes)


@lru_cache(maxsize=4096)
def _first_stage_activations(model: ModelSpec, seq_len: int, micro_batch: int, tp: int,
                             cp: int, ep: int, recompute: str, dense_layers: int,
                             moe_layers: int, gemm_inputs: float) -> float:
    """One micro-batch's activations over a stage's layers, as the ledger counts them (the
    linear layers' inputs saved at the recipe's ``gemm_inputs`` bytes per element)."""
    return layers_activation_bytes(model, seq_len, micro_batch, tp, cp, recompute, sp=tp > 1,
                                   ep=ep, gemm_inputs=gemm_inputs, dense_layers=dense_layers,
                                   moe_layers=moe_layers)


@lru_cache(maxsize=512)
def _distinct_stages(model: ModelSpec, pp: int, schedule: str, virtual: int, first: int,
                     last: int) -> tuple[tuple[tuple[float, float, float, float], ...],
                                         tuple[float, float, float, float]]:
    """The distinct (TP-split, replicated, expert, embedding) parameter counts of the stages
    (most middle stages hold the same, so a 64-stage pipeline has a handful), and the
    first's."""
    stages = stage_params(model, pp, schedule, virtual, first, last)
    counts = [(sp.tp_split, sp.replicated, sp.experts, sp.embedding) for sp in stages]
    return tuple(set(counts)), counts[0]


def textbook_bubble(plan: Plan) -> float:
    """(p−1)/(v·m+p−1) (Narayanan et al. 2021 eq. for interleaved 1F1B; v = 1: 1F1B), the
    schedule's textbook bubble (labs.schedules.catalogue): the simulated bubble (backward =
    2 x forward, free sends) is never below it (checked over the planner's shapes, 1F1B and
    interleaved 1F1B, in tests/labs/test_planner.py); shaved by 1e-9 for float rounding."""
    if plan.pp == 1:
        return 0.0
    record = CATALOGUE[plan.schedule]
    return record.textbook_bubble(plan.pp, plan.microbatches, plan.virtual) * (1 - 1e-9)


def bound_step_s(plan: Plan, model: ModelSpec, cluster: Cluster,
                 matmul_efficiency: float | None = DEFAULT_MATMUL_EFFICIENCY,
                 bubble: float | None = None) -> float:
    """The step with only its pipeline part (the slowest stage's kernels, TP, CP and EP
    traffic and sends), the bubble, the optimizer and a floor of ZeRO-3's traffic: a lower
    bound of the lab's step time (its DP part only adds to it). ``bubble``: the simulated one
    (default) or any lower bound of it (``textbook_bubble``)."""
    st = plan_stages(plan, model, cluster, matmul_efficiency)
    return core_bound(plan, st, bubble) + zero3_floor(plan, st)


def layers_bound(plan: Plan, model: ModelSpec, cluster: Cluster,
                 matmul_efficiency: float | None, bubble: float) -> float:
    """m micro-batches of the heaviest stage's layers alone (``layers_floor``: no head, no
    sends), stretched by ``bubble`` (a lower bound of the simulated one): never above
    ``core_bound``, and cheap enough to order every candidate by."""
    return plan.microbatches * layers_floor(
        model, plan.layout, cluster, seq_len=plan.seq_len, micro_batch=plan.micro_batch,
        recompute=plan.recompute, schedule=plan.schedule, virtual=plan.virtual,
        options=plan.step_options(matmul_efficiency), first=plan.first_stage_layers,
        last=plan.last_stage_layers) / (1 - bubble)


def plan_stages(plan: Plan, model: ModelSpec, cluster: Cluster,
                matmul_efficiency: float | None) -> StageTimes:
    """The recipe's own stage times (the same cached call ``labs.recipe.step_time`` makes)."""
    return stage_times(model, plan.layout, cluster, seq_len=plan.seq_len,
                       micro_batch=plan.micro_batch, accumulate=plan.microbatches > 1,
                       recompute=plan.recompute, schedule=plan.schedule, virtual=plan.virtual,
                       options=plan.step_options(matmul_efficiency),
                       first=plan.first_stage_layers, last=plan.last_stage_layers)


def core_bound(plan: Plan, st: StageTimes, bubble: float | None) -> float:
    """m micro-batches of the slowest stage (kernels, TP, CP, EP, sends; ``st``, the plan's
    ``plan_stages``) stretched by the bubble: the lab's own figures, which ZeRO does not
    change."""
    if bubble is None:
        bubble = measured_bubble(plan.schedule, plan.pp, plan.microbatches, plan.virtual,
                                 *pass_costs(plan.schedule, st.slow))
    return plan.microbatches * st.micro.total / (1 - bubble)


def zero3_floor(plan: Plan, st: StageTimes) -> float:
    """What ZeRO adds after the pipeline, at least: the optimizer step the lab counts (its
    shard under ZeRO ≥ 1) and ZeRO-3's exposed weight traffic as ``labs.recipe.step_time``
    counts it on the slowest stage (its layers' gathers and reduce-scatters, each beside its
    layer's pass), with the DP x CP group packed into as few nodes as it can be (the
    cheapest placement) and the experts left out; the lab takes the worst stage, at its
    real placement. ``st``: the plan's ``plan_stages``."""
    replicas = plan.replicas if plan.hybrid else 1
    optimizer = st.optimizer_s(plan.layout, plan.zero, replicas)
    # HSDP: the shard group's gathers and reduce-scatters, packed alike; its replicas'
    # all-reduce (labs.recipe.dp_time.hsdp_replicas) only adds to the step, so is left out.
    group = plan.dp * plan.cp // replicas
    if plan.zero != 3 or group == 1:
        return optimizer

    g = st.cluster.gpus_per_node
    packed = Spread(group, -(-group // min(group, g)), min(group, g))
    recipe = RECIPES[plan.recipe]
    return optimizer + zero3_exposure(st.slow, plan.layout, (packed, Spread(1, 1, 1)),
                                      st.cluster, plan.microbatches, recipe.gathered_bytes,
                                      recipe.gradients)[1]
