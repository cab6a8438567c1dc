"""Two dimensions before three: the best FSDP + TP plan (no pipeline, ZeRO-3 over the data
parallel group, as torchtitan and Llama-style stacks run it) against the best TP + PP + DP plan
(Megatron's, with the distributed optimizer, ZeRO-1, or none), on one model, one cluster and
one global batch, as the cluster grows.

Each family's best plan is the auto-planner's own (``labs.recipe.planner.search``, every plan
timed by ``labs.recipe.lab.evaluate``) with the search held to that family
(``FAMILIES``: ``PlanRequest.pipeline``, ``zero_stages``; no context parallelism in either),
so a point of the sweep is exactly the plan the recipe page shows for it.

Why each wins (the lesson's step 14): with B sequences a step on N GPUs,
- FSDP + TP has no bubble and no pipeline sends, but every micro-batch all-gathers each
  layer's weights twice (forward, backward) and reduce-scatters its gradients across the whole
  data-parallel group of N/t: 3 x 2 B x P/t x (D-1)/D per GPU per micro-batch, against
  6·P/t·b·s FLOPs of compute; t and P cancel, so it hides while b·s tokens per GPU per
  micro-batch stay above the GPU's rate over the link's bus bandwidth (EP03's crossover);
  it needs at least one sequence per GPU of the group (b·N/t <= B);
- TP + PP + DP syncs its gradients once a step across a group p times smaller (N/(t·p)), so
  each rank keeps p times more sequences, m = B/(b·N/(t·p)) micro-batches, which fill its
  bubble, (p-1)/(m+p-1) of the step; its stages hold the activations of up to p micro-batches
  in flight (1F1B), which the 2-D plan does not, but only 1/p of the layers' state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from labs.core.errors import LabInputError
from labs.core.limits import DEFAULT_MATMUL_EFFICIENCY, MAX_PLAN_GPUS
from labs.hardware.links import Cluster
from labs.model.spec import ModelSpec
from labs.recipe.inputs import Plan
from labs.recipe.planner import PlanRequest, Ranked, search

# The two families, as planner restrictions: 2-D is FSDP (ZeRO-3) + TP, no pipeline; 3-D is
# TP + PP + DP with the plain or distributed optimizer (Megatron-LM runs ZeRO-1 beside a
# pipeline, not ZeRO-3). Neither splits the context.
FAMILIES = {
    "2d": {"pipeline": False, "zero_stages": (3,), "cp_sizes": (1,)},
    "3d": {"pipeline": True, "zero_stages": (0, 1), "cp_sizes": (1,)},
}
NAMES = {"2d": "FSDP + TP (2-D)", "3d": "TP + PP + DP (3-D)"}
MAX_SWEEP_NODES = 256  # the sweep's largest cluster (2,048 GPUs on 8-GPU nodes)
# The sweep: the page's nodes times 2^k. Each point is two planner searches (~20 ms each for
# GPT-3 175B, ~200 ms for a MoE), so the sweep is a window, not every size.
SWEEP_STEPS = (-2, -1, 1, 2, 3, 4)


def family(plan: Plan) -> str | None:
    """The family a plan belongs to (None: neither, e.g. CP, or ZeRO-3 with a pipeline)."""
    if plan.cp != 1:
        return None
    for key, f in FAMILIES.items():
        if (plan.pp > 1) == f["pipeline"] and plan.zero in f["zero_stages"]:
            return key
    return None


@dataclass(frozen=True)
class Point:
    """One cluster size: each family's best plan (None where none passes every audit) and, for
    one that has none, the audits its checked plans failed most (or why none was tried)."""

    nodes: int
    gpus: int
    best: dict[str, Ranked | None]
    failed: dict[str, str]

    def winner(self) -> str | None:
        found = {k: r for k, r in self.best.items() if r is not None}
        return min(found, key=lambda k: found[k].step_s) if found else None


@dataclass(frozen=True)
class TwoD:
    global_batch: int
    seq_len: int
    points: tuple[Point, ...]

    def at(self, nodes: int) -> Point:
        return next(p for p in self.points if p.nodes == nodes)


def sweep_nodes(nodes: int, gpus_per_node: int) -> tuple[int, ...]:
    """The page's ``nodes`` and its multiples by a power of two (``SWEEP_STEPS``: a quarter
    to 16 times), whole, up to ``MAX_SWEEP_NODES`` and the planner's GPUs."""
    most = min(MAX_SWEEP_NODES, MAX_PLAN_GPUS // gpus_per_node)
    out = {nodes * 2 ** k for k in SWEEP_STEPS if k >= 0} \
        | {nodes // 2 ** -k for k in SWEEP_STEPS if k < 0 and nodes % 2 ** -k == 0}
    return tuple(sorted(n for n in out | {nodes} if n == nodes or 1 <= n <= most))


# A point is kept on its own too: moving the page's nodes shifts the sweep's window by a power
# of two, so most of its points are ones a page asked for already.
@lru_cache(maxsize=256)
def best_of(key: str, model: ModelSpec, cluster: Cluster, gpus: int, seq_len: int,
            global_batch: int, recipe: str, matmul_efficiency: float | None,
            software: tuple[tuple[str, object], ...]) -> tuple[Ranked | None, str]:
    """The family's fastest plan that passes every audit (the planner's first), or None with
    why: the audit its checked plans failed most, or that no layout of it divides."""
    try:
        found = search(PlanRequest(model, cluster, gpus, seq_len, global_batch, recipe=recipe,
                                   top=1, matmul_efficiency=matmul_efficiency,
                                   software=software, **FAMILIES[key]))
    except LabInputError as exc:
        return None, exc.message
    if found.plans:
        return found.plans[0], ""
    if found.failed:
        return None, f"every plan checked fails an audit, most often {found.failed[0][0]}"
    return None, ("no layout divides the GPUs and the batch" if not found.legal
                  else "every layout is over memory or over the bubble limit")


def compare(model: ModelSpec, cluster: Cluster, seq_len: int, global_batch: int,
            nodes: Iterable[int], recipe: str = "adam16",
            matmul_efficiency: float | None = DEFAULT_MATMUL_EFFICIENCY,
            software: tuple[tuple[str, object], ...] = ()) -> TwoD:
    """Each family's best plan at each of ``nodes`` for the same model, cluster, global batch,
    precision and software."""
    points = []
    for n in nodes:
        gpus = n * cluster.gpus_per_node
        best, failed = {}, {}
        for key in FAMILIES:
            best[key], failed[key] = best_of(key, model, cluster, gpus, seq_len, global_batch,
                                             recipe, matmul_efficiency, software)
        points.append(Point(n, gpus, best, failed))
    return TwoD(global_batch, seq_len, tuple(points))


@lru_cache(maxsize=64)
def compare_cached(model: ModelSpec, cluster: Cluster, seq_len: int, global_batch: int,
                   nodes: tuple[int, ...], recipe: str, matmul_efficiency: float | None,
                   software: tuple[tuple[str, object], ...]) -> TwoD:
    """``compare``, kept for the pages that ask again: the sweep depends on the model, the
    cluster, the batch, the precision and the software, not on the page's own plan."""
    return compare(model, cluster, seq_len, global_batch, nodes, recipe, matmul_efficiency,
                   software)
