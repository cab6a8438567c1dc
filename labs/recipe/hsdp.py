"""HSDP on one plan, per layer, as the step model times it (``labs.recipe.dp_time``): where
its shard and replica groups fall, each layer's gather and reduce-scatter inside the shard
group and its gradient shard's all-reduce across the replicas, and the state each GPU holds
(the ledger's, sharded over the shard group: ``labs.memory.lab``). EP08's step 14 and the
recipe API's ``hsdp`` read it; the figures are the engine's own, not recomputed here.

Memory (ZeRO-3, Rajbhandari et al. 2020 Fig. 1, over the shard group instead of all of DP;
PyTorch ``fully_shard`` on a 2-D mesh): weights, gradients and optimizer state of P local
parameters cost (weight + gradient + master + moments bytes) x P / (dp_shard x CP) a GPU."""

from __future__ import annotations

from dataclasses import dataclass

from labs.core.catalogue import RECIPES
from labs.recipe.dp_time import dp_spreads, hsdp_replicas, zero3_layer
from labs.recipe.groups import Spread
from labs.recipe.inputs import RecipeResult


@dataclass(frozen=True)
class HsdpView:
    shard: Spread  # the dense shard group (DP x CP / replicas ranks)
    replica: Spread  # the dense replica group (one rank of each shard group)
    replicas: int
    gather_s: float  # one layer's all-gather inside the shard group
    reduce_scatter_s: float  # one layer's reduce-scatter inside the shard group
    all_reduce_s: float  # one layer's gradient-shard all-reduce across the replicas
    all_reduce_step_s: float  # every layer's, a step
    all_reduce_exposed_s: float  # of it, past the last backward
    state_bytes: float  # weights + gradients + optimizer state per GPU (the ledger's)
    shard_link: str  # the link the shard group's rings are bound by
    replica_link: str


def hsdp_view(result: RecipeResult) -> HsdpView | None:
    """The plan's HSDP groups and per-layer collectives (None: not HSDP, or cannot run)."""
    plan, timing = result.plan, result.timing
    if not plan.hybrid or timing is None or timing.slow is None:
        return None
    cluster, stage = result.cluster, timing.slow
    spreads = dp_spreads(plan.layout, cluster, list(timing.stages), plan.replicas)
    recipe = RECIPES[plan.recipe]
    n, lt, *params = stage.layers[0]
    z = zero3_layer(lt, params, spreads[:2], cluster, recipe.gathered_bytes, recipe.gradients,
                    timing.options.compute.kernels != "fused")
    ar = hsdp_replicas(stage, spreads, cluster, recipe.gradients, timing.micro.backward,
                       plan.dp_overlap)
    bill = result.memory.stages[result.memory.heaviest_stage].breakdown
    state = sum(bill[k] for k in ("weights", "gradients", "master_weights",
                                  "optimizer_moments"))

    def link(s: Spread) -> str:
        return cluster.intra.id if s.nodes == 1 else cluster.inter.id

    return HsdpView(spreads[0], spreads[2], plan.replicas, z.gather, z.reduce, ar.layer,
                    ar.seconds, ar.exposed, state, link(spreads[0]), link(spreads[2]))
