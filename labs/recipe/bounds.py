"""EP08's planner bounds: what a plan cannot beat, computed without running the recipe lab.

- ``state_bytes_floor``: a lower bound of the ledger's bytes per GPU (``labs.memory.lab``);
- ``textbook_bubble``: (p−1)/(v·m+p−1), a lower bound of the simulated bubble;
- ``bound_step_s``: a lower bound of the lab's step time (``labs.recipe.lab.evaluate``): the
  slowest stage's compute, TP and CP traffic, the bubble, and a floor of ZeRO-3's traffic.
``labs.recipe.planner`` orders and prunes its search by them; tests/labs/test_planner.py and
test_recipe_uneven.py check that none ever beats the lab.
"""

from __future__ import annotations

from functools import lru_cache

from labs.core.catalogue import RECIPES
from labs.core.limits import DEFAULT_MATMUL_EFFICIENCY
from labs.hardware.comm import collective
from labs.hardware.links import Cluster
from labs.model.activations import activation_bytes_per_layer
from labs.model.flops import hardware_flops_per_token, model_flops_per_token
from labs.model.spec import ModelSpec
from labs.recipe.inputs import Plan
from labs.recipe.lab import measured_bubble
from labs.recipe.step_time import ACT_BYTES, cp_ring
from labs.schedules.catalogue import CATALOGUE
from labs.schedules.inflight import in_flight
from labs.schedules.stages import stage_layer_counts, stage_params
from labs.tensor_parallel.comm import tp_collectives, tp_exchange


def state_bytes_floor(plan: Plan, model: ModelSpec) -> float:
    """Weights, gradients and optimizer state of the heaviest stage, sharded as the ledger
    shards them (ZeRO, Rajbhandari et al. 2020 Fig. 1), or the first stage's state plus the
    activations its layers hold in flight (``labs.model.activations``, as the ledger counts them;
    the embedding's and logits' activations left out): a lower bound of the ledger's total."""
    r = RECIPES[plan.recipe]
    # The layout's shard groups (ParallelLayout.dense_shard_group, expert_dp) in
    # plain arithmetic: this runs on thousands of plans.
    dense_group = plan.dp * plan.cp
    expert_group = max(1, plan.tp * plan.cp * plan.dp // plan.ep)
    weights = (r.weight_bytes, r.gradients, r.master_weights + r.optimizer_moments)

    def state(tp_split: float, replicated: float, experts: float) -> float:
        dense = tp_split / plan.tp + replicated
        expert = experts / plan.ep
        total = 0.0
        for bytes_per_param, stage in zip(weights, (3, 2, 1), strict=True):
            on = plan.zero >= stage
            total += bytes_per_param * (dense / (dense_group if on else 1)
                                        + expert / (expert_group if on else 1))
        return total

    best = max(state(*s) for s in _distinct_stages(
        model, plan.pp, plan.schedule, plan.virtual, plan.first_stage_layers,
        plan.last_stage_layers))
    first = stage_params(model, plan.pp, plan.schedule, plan.virtual, plan.first_stage_layers,
                         plan.last_stage_layers)[0]
    held = in_flight(plan.schedule, plan.pp, plan.microbatches, 0, plan.virtual) \
        if plan.pp > 1 else 1.0
    acts = _first_stage_activations(model, plan.seq_len, plan.micro_batch, plan.tp, plan.cp,
                                    plan.ep, plan.recompute, first.dense_layers,
                                    first.moe_layers, r.saved_input_bytes)
    return max(best, state(first.tp_split, first.replicated, first.experts) + held * acts)


@lru_cache(maxsize=4096)
def _first_stage_activations(model: ModelSpec, seq_len: int, micro_batch: int, tp: int,
                             cp: int, ep: int, recompute: str, dense_layers: int,
                             moe_layers: int, gemm_inputs: float) -> float:
    """One micro-batch's activations over a stage's layers, as the ledger counts them (the
    linear layers' inputs saved at the recipe's ``gemm_inputs`` bytes per element)."""
    common = (model, seq_len, micro_batch, tp, cp, recompute)
    kw = {"sp": tp > 1, "ep": ep, "gemm_inputs": gemm_inputs}
    acts = dense_layers * activation_bytes_per_layer(*common, **kw)
    if moe_layers:
        acts += moe_layers * activation_bytes_per_layer(*common, moe_layer=True, **kw)
    return acts


@lru_cache(maxsize=512)
def _distinct_stages(model: ModelSpec, pp: int, schedule: str, virtual: int, first: int,
                     last: int) -> tuple[tuple[float, float, float], ...]:
    """The distinct (TP-split, replicated, expert) parameter counts of the stages: most
    middle stages hold the same, so a 64-stage pipeline has a handful."""
    return tuple({(sp.tp_split, sp.replicated, sp.experts)
                  for sp in stage_params(model, pp, schedule, virtual, first, last)})


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
                 matmul_efficiency: float = DEFAULT_MATMUL_EFFICIENCY,
                 bubble: float | None = None) -> float:
    """The step with only compute, TP and CP traffic and the bubble: a lower bound of the
    lab's step time (its EP and DP parts only add to it). ``bubble``: the simulated one (default)
    or any lower bound of it (``textbook_bubble``)."""
    rate = cluster.gpu.bf16_flops * matmul_efficiency
    return core_bound(plan, model, cluster, rate, bubble) \
        + zero3_floor(plan, model, cluster, rate)


def core_bound(plan: Plan, model: ModelSpec, cluster: Cluster, rate: float,
                bubble: float | None) -> float:
    """Compute, TP and CP traffic and the bubble (ZeRO does not change them)."""
    tokens = plan.seq_len * plan.micro_batch
    layers = max(stage_layer_counts(model.layers, plan.pp, plan.first_stage_layers,
                                    plan.last_stage_layers))
    # The slowest stage's share (labs.recipe.step_time: the pipeline runs at its pace).
    imbalance = layers * plan.pp / model.layers if plan.pp > 1 else 1.0
    per_mb = hardware_flops_per_token(model, plan.seq_len, plan.recompute) * tokens \
        / (plan.tp * plan.cp * plan.pp) / rate * imbalance
    if plan.tp > 1:
        # TP as the step time counts it (tensor_parallel.comm, EP04's model). TP divides the GPUs
        # per node here, so each group is one aligned block inside a node.
        act = plan.seq_len / plan.cp * plan.micro_batch * model.hidden * ACT_BYTES
        one = tp_exchange(lambda kind, size: collective(kind, size, plan.tp, cluster,
                                                        per_node=plan.tp), act, sp=True)
        per_mb += tp_collectives(layers, plan.recompute) * one.seconds
    if plan.cp > 1:  # CP's exposed ring passes, as labs.recipe.step_time counts them
        per_mb += cp_ring(model, plan.layout, cluster, plan.seq_len, plan.micro_batch,
                          plan.recompute, layers, rate)[3]
    if bubble is None:
        bubble = measured_bubble(plan.schedule, plan.pp, plan.microbatches, plan.virtual)
    return plan.microbatches * per_mb / (1 - bubble)


def zero3_floor(plan: Plan, model: ModelSpec, cluster: Cluster, rate: float) -> float:
    """ZeRO-3's exposed weight traffic, at least: as ``labs.recipe.step_time`` counts it (gather
    the heaviest stage's dense weights before each forward and backward, reduce-scatter the
    gradients after, each hidden behind that pass's *compute*), with the DP x CP group packed
    into as few nodes as it can be (the cheapest placement) and the experts left out. Other
    stages hide their traffic behind windows that include communication: floor 0."""
    group = plan.dp * plan.cp
    if plan.zero != 3 or group == 1:
        return 0.0
    recipe = RECIPES[plan.recipe]
    dense = max(tp_split / plan.tp + replicated for tp_split, replicated, _ in
                _distinct_stages(model, plan.pp, plan.schedule, plan.virtual,
                                 plan.first_stage_layers, plan.last_stage_layers))
    tokens = plan.seq_len * plan.micro_batch
    share = plan.tp * plan.cp * plan.pp * rate
    model_tok = model_flops_per_token(model, plan.seq_len)
    forward = model_tok / 3 * tokens / share
    backward = (hardware_flops_per_token(model, plan.seq_len, plan.recompute)
                - model_tok / 3) * tokens / share
    gather = collective("all_gather", dense * recipe.gathered_bytes, group, cluster).seconds
    reduce = collective("reduce_scatter", dense * recipe.gradients, group, cluster).seconds
    return plan.microbatches * (max(0.0, gather - forward)
                                + max(0.0, gather + reduce - backward))
