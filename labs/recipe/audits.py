"""EP08's audits of a plan: the pass/fail checks ``labs.recipe.lab.evaluate`` lists, each with the
figure and the sentence the page shows, and the pass marks of those that are a matter of degree.

The figures are the recipe lab's own (``labs.recipe.lab``: the heaviest stage's ledger, the
simulated bubble, the traffic parts of ``labs.recipe.step_time``); this module only words them.
"""

from __future__ import annotations

from labs.core.errors import LabInputError
from labs.hardware.links import link_name
from labs.model.spec import ModelSpec
from labs.recipe.groups import spread
from labs.recipe.inputs import Audit, Plan, RecipeResult
from labs.recipe.timing import Part
from labs.schedules.stages import stage_layer_counts

# Pass marks for the audits that are a matter of degree. The bubble: EP05's verdict line (a
# quarter of the pipeline's time idle); communication: at most a tenth of the step exposed.
BUBBLE_LIMIT = 0.25
EXPOSED_LIMIT = 0.10
MEMORY_AUDIT = "Memory per GPU"


def rule_audits(found: tuple[LabInputError, ...]) -> tuple[Audit, ...]:
    """A failed check per broken rule, naming the control to change."""
    return tuple(Audit(f"Rule: {e.field}", False, e.message, e.field) for e in found)


def _gb(x: float) -> str:
    return f"{x / 1e9:,.1f} GB"


def _traffic_audit(name: str, part: Part, step: float, degree: int) -> Audit:
    if degree == 1:
        return Audit(f"{name} traffic", True, f"{name} = 1: nothing to send")
    share = part.exposed / step
    where = "inside one node" if part.nodes == 1 else f"across {part.nodes} nodes"
    return Audit(f"{name} traffic", share <= EXPOSED_LIMIT,
                 f"{_gb(part.bytes_per_step)} per GPU per step {where} ({link_name(part.link)}): "
                 f"{part.seconds * 1e3:,.0f} ms, {part.hidden * 1e3:,.0f} ms hidden behind "
                 f"compute or pipeline idle, {part.exposed * 1e3:,.0f} ms exposed = "
                 f"{share:.1%} of the step "
                 f"(limit {EXPOSED_LIMIT:.0%})", name.lower())


def _split_text(plan: Plan, model: ModelSpec) -> str:
    """The stages' layers when Megatron's uneven first/last stages are set."""
    if not plan.uneven:
        return ""
    counts = stage_layer_counts(model.layers, plan.pp, plan.first_stage_layers,
                                plan.last_stage_layers)
    return (f"; uneven stages (Megatron's first/last pipeline layers): {counts[0]} on the "
            f"first, {counts[-1]} on the last, {max(counts)} on the slowest, which sets the "
            f"pace")


def audits_of(r: RecipeResult) -> tuple[Audit, ...]:
    """The pass/fail checks of a legal plan, each with its figure."""
    plan, mem, g = r.plan, r.memory, r.cluster.gpus_per_node
    assert mem is not None and r.timing is not None
    tp = spread(plan.layout, "tp", g)
    parts = {p.name: p for p in r.timing.parts}
    out = [
        Audit("Layout rules", True, f"TP x PP x CP x DP = {plan.world_size:,} = the "
                                    f"cluster's GPUs; heads, layers, sequence and experts "
                                    "divide" + _split_text(plan, r.model)),
        Audit(MEMORY_AUDIT, mem.fits,
              f"{_gb(mem.total_bytes)} on pipeline stage {mem.heaviest_stage} (the heaviest) "
              f"of {_gb(mem.gpu_memory_bytes)}: {_gb(mem.headroom_bytes)} "
              f"{'to spare' if mem.fits else 'short'}".replace(" -", " "), "zero"),
        Audit("TP inside a node", tp.nodes == 1,
              f"each TP group of {plan.tp} sits in one node of {g} GPUs ({r.cluster.intra.name})"
              if tp.nodes == 1 else
              f"a TP group of {plan.tp} spans {tp.nodes} nodes of {g}: its all-reduces cross "
              f"{r.cluster.inter.name}", "tp"),
        Audit("Pipeline bubble", r.bubble_fraction <= BUBBLE_LIMIT,
              f"{r.bubble_fraction:.1%} of the pipeline's time idle (simulated {plan.schedule}, "
              f"{plan.pp} stages, {plan.microbatches} micro-batches; limit "
              f"{BUBBLE_LIMIT:.0%})" if plan.pp > 1 else "PP = 1: no pipeline, no bubble",
              "microbatches"),
        _traffic_audit("DP", parts["dp"], r.step_s, plan.dp * plan.cp),
        _traffic_audit("CP", parts["cp"], r.step_s, plan.cp),
        _traffic_audit("EP", parts["ep"], r.step_s, plan.ep),
    ]
    return tuple(out)
