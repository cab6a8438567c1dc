"""EP12's playground state: one query over every episode's controls, and its translation into
each lab's own query.

The shared controls (model, GPU, cluster, the plan's degrees and batch) feed every lab that has
them, so one change redraws every diagram that depends on it; every other control of a lab is
carried through under the lab's prefix (``pipeline_f``, ``dp_overlap``), with the lab's own
bounds and description. Each lab is then run through its own view (query model, run, cache),
exactly as its lesson page would run it: the playground never re-derives a figure.
"""

import time
from collections.abc import Callable, Mapping
from copy import deepcopy
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field, create_model

from app.cluster_controls import (
    ContextParallel,
    ExpertParallel,
    GpusPerNode,
    InterLink,
    IntraLink,
    LinkFollowsGpu,
    MicroBatch,
    Microbatches,
    Nodes,
    PipelineStages,
    Recompute,
    Schedule,
    SeqLen,
    TensorParallel,
    Virtual,
    ZeroStage,
)
from app.labkit import LabView
from app.labkit.parsing import _LRU, HEAVY_SECONDS, run_cached, validate
from app.model_controls import GpuChoice, ModelChoice, gpu_field, model_field
from app.options import LabQuery
from app.routers import (
    context_parallel,
    data_parallel,
    memory,
    moe,
    pipeline,
    rl,
    tensor_parallel,
    zero,
)
from app.routers import recipe as recipe_router
from labs.core.limits import MAX_GPUS_PER_NODE, MAX_NODES
from labs.data_parallel.lab import timed_gpu
from labs.hardware.links import clusters, get_link
from labs.model.presets import get_model


class SharedControls(LabQuery, LinkFollowsGpu):
    """The controls every lab reads: EP08's plan on a cluster (the worked plan by default:
    Llama 3.1 70B on 4 DGX H100 nodes as TP8 x PP2 x DP2, 16 micro-batches of 8,192 tokens)."""

    model: ModelChoice = model_field("llama-3.1-70b")
    gpu: GpuChoice = gpu_field("h100-sxm")
    nodes: Nodes = 4
    gpus_per_node: GpusPerNode = 8
    intra_link: IntraLink = "nvlink-4"
    inter_link: InterLink = "ib-ndr"
    tp: TensorParallel = 8
    pp: PipelineStages = 2
    dp: int = Field(2, ge=1, le=MAX_NODES * MAX_GPUS_PER_NODE,
                    description="Data-parallel degree (DP replicas).")
    cp: ContextParallel = 1
    ep: ExpertParallel = 1
    zero: ZeroStage = 1
    recompute: Recompute = "selective"
    schedule: Schedule = "1f1b"
    virtual: Virtual = 1
    micro_batch: MicroBatch = 1
    microbatches: Microbatches = 16
    seq_len: SeqLen = 8192


SHARED_LABELS = {
    "model": "Model", "gpu": "GPU", "nodes": "Nodes", "gpus_per_node": "GPUs per node",
    "intra_link": "Link inside a node", "inter_link": "Link between nodes",
    "tp": "TP (tensor)", "pp": "PP (stages)", "dp": "DP (data)", "cp": "CP (context)",
    "ep": "EP (experts)", "zero": "ZeRO stage", "recompute": "Recomputation",
    "schedule": "Schedule", "virtual": "Chunks per rank", "micro_batch": "Micro-batch",
    "microbatches": "Micro-batches per step", "seq_len": "Sequence length",
}


def group_link(q, ranks: int) -> str:
    """The link a group of ``ranks`` consecutive ranks uses: inside a node while it fits one
    (Megatron's rank order puts TP, then CP, then DP fastest), else the network."""
    return q.intra_link if ranks <= q.gpus_per_node else q.inter_link


def dp_gpu(q) -> str | None:
    """EP02's GPU for the plan: its own, unless EP02 times that GPU on the group's link anyway
    (``labs.data_parallel.lab.timed_gpu``), so the panel's "open the lesson" link names a GPU
    only where the lesson's own would be another."""
    link = get_link(group_link(q, q.tp * q.cp * q.dp))
    return None if timed_gpu(link).id == q.gpu else q.gpu


def node_cluster(q) -> str | None:
    """EP07 takes a cluster preset: the one built on the chosen GPU (None: the lab's default)."""
    return next((cid for cid, c in clusters().items() if c.gpu.id == q.gpu), None)


def moe_model(q) -> str | None:
    """EP07 draws experts: the shared model when it has some, else EP07's own model control."""
    return q.model if get_model(q.model).is_moe else None


@dataclass(frozen=True)
class Panel:
    """One lab in the playground: which of its controls come from the shared state (lab field
    -> shared control, or a function of the playground query), and its diagram shown first."""

    view: LabView
    shared: Mapping[str, str | Callable[[Any], Any]]
    default: str  # a diagram name, "all" or "off"
    # A computed field's errors name this shared control (default: the field's prefixed twin).
    blame: Mapping[str, str] = field(default_factory=dict)
    skip: tuple[str, ...] = ("params",)  # custom models are EP01/EP03's own
    # Why the lab's model cannot represent this state ("" when it can): the panel then says so
    # instead of drawing another plan's figures beside the panels that can.
    outside: Callable[[Any], str] = lambda q: ""  # noqa: E731

    @property
    def lab(self) -> str:
        return self.view.name

    @property
    def show_field(self) -> str:
        return f"show_{self.lab}"

    def own_fields(self) -> list[str]:
        """The lab's controls the shared state does not set: carried under its prefix."""
        return [f for f in self.view.query_model.model_fields
                if f not in self.shared and f not in self.skip]

    def prefixed(self, name: str) -> str:
        return f"{self.lab}_{name}"

    def control_for(self, lab_field: str) -> str:
        """The playground control an error on ``lab_field`` belongs to."""
        if lab_field in self.blame:
            return self.blame[lab_field]
        source = self.shared.get(lab_field)
        if isinstance(source, str):
            return source
        if lab_field in self.view.query_model.model_fields and lab_field not in self.skip:
            return self.prefixed(lab_field)
        return "_form"

    def lab_items(self, q) -> list[tuple[str, str]]:
        """The lab's query, as the (key, value) pairs its own parser reads."""
        items = []
        for lab_field, source in self.shared.items():
            value = getattr(q, source) if isinstance(source, str) else source(q)
            if value is not None:
                items.append((lab_field, _text(value)))
        for name in self.own_fields():
            value = getattr(q, self.prefixed(name))
            if value is not None:
                items.append((name, _text(value)))
        return items


def _text(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


PLAN = {"tp": "tp", "pp": "pp", "cp": "cp", "dp": "dp", "ep": "ep"}


def dense(q) -> str:
    """EP07 places experts: with a dense shared model it has none to place. Its panel said so
    only by drawing its own default model (Mixtral) under a Llama plan (issue 36, EP12's cold
    reading, item 9): it now says why instead of drawing another model beside the plan."""
    if get_model(q.model).is_moe:
        return ""
    return (f"{get_model(q.model).name} is dense: it has no experts for EP07's lab to place. "
            "Pick a mixture-of-experts model (Mixtral 8x7B, DeepSeek-V3) to see this panel")


def pure_dp(episode: str) -> Callable[[Any], str]:
    """EP02 and EP03 model data parallelism alone: every GPU a replica (EP02) or a ZeRO shard
    (EP03) of the whole model. A plan with model parallelism is outside them: fed its DP degree
    and the whole model, they drew another plan (issue 36: the worked plan, TP 8 × PP 2 × DP 2
    of Llama 3.1 70B, showed 893 GB per GPU in EP03's panel beside EP01's and EP08's 66.9 GB,
    which shard the model 16 ways first)."""
    def outside(q) -> str:
        degrees = [(name, getattr(q, key)) for name, key in
                   (("TP", "tp"), ("PP", "pp"), ("CP", "cp"), ("EP", "ep")) if getattr(q, key) > 1]
        if not degrees:
            return ""
        plan = " × ".join(f"{name} {value}" for name, value in degrees)
        return (f"{episode}'s lab is data parallelism alone, with the whole model on every "
                f"data-parallel rank; this plan also splits the model ({plan}), so each GPU's "
                "bill is EP01's and EP08's panel. Set TP, PP, CP and EP to 1 to see it here")
    return outside
STEP = {"seq_len": "seq_len", "micro_batch": "micro_batch", "recompute": "recompute"}

# EP08's panel draws every diagram of the lesson but step 14's 2-D against 3-D sweep, which
# runs the planner fourteen times for each state (the lesson draws it; a playground state would
# pay 10 ms or more for a chart the panel's student did not ask for).
RECIPE = replace(recipe_router.VIEW, run=partial(recipe_router.run, two_d=False),
                 cache_name="recipe-panel",
                 diagrams=tuple(d for d in recipe_router.VIEW.diagrams if d.name != "twod"))

PANELS: tuple[Panel, ...] = (
    Panel(memory.VIEW, {"model": "model", "gpu": "gpu", **STEP, **PLAN, "zero": "zero",
                        "schedule": "schedule", "virtual": "virtual",
                        "microbatches": "microbatches"},
          default="ledger"),
    # EP02 times compute from the tokens each GPU takes: the state's batch, as EP08's step.
    # The plan's GPU, so a PCIe node is refused for the H100 SXM as EP04's panel refuses it
    # (round-21 cold reading P, finding 1), and an A100 node is timed as A100s.
    Panel(data_parallel.VIEW, {"model": "model", "gpu": dp_gpu, "gpus": "dp",
                               "link": lambda q: group_link(q, q.tp * q.cp * q.dp),
                               "seq_len": "seq_len", "micro_batch": "micro_batch",
                               "microbatches": "microbatches"},
          # EP02 refuses only a scale-up link (a GPU it never ships with, more GPUs than its
          # domain): a group that fits a node, on the node's link.
          blame={"link": "intra_link", "gpu": "gpu"}, default="scaling",
          outside=pure_dp(data_parallel.VIEW.episode.code)),
    Panel(zero.VIEW, {"model": "model", "gpu": "gpu", "dp": "dp", "zero": "zero",
                      "gpus_per_node": "gpus_per_node", "link": "inter_link", **STEP},
          default="memory", outside=pure_dp(zero.VIEW.episode.code)),
    Panel(tensor_parallel.VIEW, {"model": "model", "gpu": "gpu", "tp": "tp",
                                 "gpus_per_node": "gpus_per_node", "intra_link": "intra_link",
                                 "inter_link": "inter_link", **STEP},
          default="efficiency"),
    Panel(pipeline.VIEW, {"schedule": "schedule", "stages": "pp",
                          "microbatches": "microbatches", "virtual": "virtual",
                          "model": "model", "gpu": "gpu", "tp": "tp", **STEP},
          default="gantt"),
    Panel(context_parallel.VIEW, {"cp": "cp", "model": "model", "seq_len": "seq_len",
                                  "gpu": "gpu", "link": lambda q: group_link(q, q.tp * q.cp)},
          blame={"link": "inter_link"}, default="mask"),
    Panel(moe.VIEW, {"model": moe_model, "link": node_cluster, "nodes": "nodes", "tp": "tp",
                     "pp": "pp", "cp": "cp", "ep": "ep"},
          blame={"model": "moe_model", "link": "gpu"}, default="experts", outside=dense),
    Panel(RECIPE, {"model": "model", "gpu": "gpu", "nodes": "nodes",
                               "gpus_per_node": "gpus_per_node", "intra_link": "intra_link",
                               "inter_link": "inter_link", **PLAN, "zero": "zero",
                               "schedule": "schedule", "virtual": "virtual",
                               "microbatches": "microbatches", **STEP},
          default="all"),
    Panel(rl.VIEW, {"gpu": "gpu"}, default="off"),
)
BY_LAB = {p.lab: p for p in PANELS}


def _copy_field(info):
    """A lab's control as a playground field: same type, default, bounds and description."""
    return (info.annotation, deepcopy(info))


def _show_field(panel: Panel):
    names = tuple(d.name for d in panel.view.diagrams if not d.template)
    return (Literal[("off", *names, "all")],
            Field(panel.default, description=f"{panel.view.episode.code}'s diagram shown: "
                  f"one of {', '.join(names)}, all, or off (the lab is not run)."))


def _build_query() -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for panel in PANELS:
        fields[panel.show_field] = _show_field(panel)
        for name in panel.own_fields():
            fields[panel.prefixed(name)] = _copy_field(panel.view.query_model.model_fields[name])
    return create_model("PlaygroundQuery", __base__=SharedControls,
                        __doc__="Every control of every episode: the shared plan, then each "
                                "lab's own controls under its prefix.", **fields)


PlaygroundQuery = _build_query()


def labels() -> dict[str, str]:
    found = dict(SHARED_LABELS)
    for panel in PANELS:
        found[panel.show_field] = f"{panel.view.episode.code} diagram"
        for name in panel.own_fields():
            found[panel.prefixed(name)] = panel.view.label(name)
    return found


def shown(panel: Panel, q) -> tuple[str, ...]:
    choice = getattr(q, panel.show_field)
    names = tuple(d.name for d in panel.view.diagrams if not d.template)
    return () if choice == "off" else names if choice == "all" else (choice,)


# A lab's run in the playground, per lab and per the query the shared state gives it: the same
# for every playground state that differs only in controls the lab does not read (issue 31: a
# 1,000-student class's 1,642 playground states gave TP's panel 107 distinct queries, CP's 63,
# EP08's 542), so a slider of one lab no longer re-validates, re-runs and re-draws the other
# eight. Bounded as the labs' own result caches (app/labkit/parsing.py), the heavy ones too.
PANEL_RUNS = 32  # per lab
RUNS: dict[str, _LRU] = {}


@dataclass(eq=False)
class _Run:
    """What a lab's query gives, whichever playground state asked: the lab's query, result and
    errors (by playground control), and what is drawn from them, made once (``made``)."""

    query: BaseModel | None
    result: Any
    errors: dict[str, str]
    made: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PanelState:
    """One lab as the playground ran it: its own query and result, or what stopped it."""

    panel: Panel
    diagrams: tuple[str, ...]  # shown
    query: BaseModel | None
    result: Any
    errors: dict[str, str]  # playground control -> message
    note: str = ""  # why the lab does not draw this state (Panel.outside), not an error
    run: _Run | None = field(default=None, compare=False, repr=False)

    @property
    def lab(self) -> str:
        return self.panel.lab

    @property
    def view(self) -> LabView:
        return self.panel.view

    def made(self, what: str, make: Callable[[], Any]) -> Any:
        """``make()``, a pure function of this lab's result (its figures, its headlines),
        made once per lab query while the run is cached."""
        if self.run is None:
            return make()
        if what not in self.run.made:
            self.run.made[what] = make()
        return self.run.made[what]


def run_panel(panel: Panel, q, names: tuple[str, ...] | None = None) -> PanelState:
    """Validate the lab's own query and run it through the lab's own cache (only when some
    diagram of it is shown: ``names``, default the state's choice)."""
    names = shown(panel, q) if names is None else names
    if not names:
        return PanelState(panel, names, None, None, {})
    note = panel.outside(q)
    if note:
        return PanelState(panel, names, None, None, {}, note)
    items = tuple(panel.lab_items(q))
    runs = RUNS.setdefault(panel.lab, _LRU(PANEL_RUNS))
    ran = runs.get(items)
    if ran is None:
        start = time.thread_time()  # CPU, as run_cached measures it
        query, errors, _ = validate(panel.view, list(items))
        result = None
        if query is not None:
            result, errors = run_cached(panel.view, query)
        if result is not None and not errors and panel.view.api_errors:
            # A state the lab's API refuses (EP08: TP x PP x CP x DP not the cluster's GPUs)
            # is this panel's error, beside the control, not a chart of a plan that cannot
            # run (EP12 cold reading, item 2: moving Nodes drew "Efficiency 0.0%").
            errors = panel.view.api_errors(result)
        ran = _Run(query, result, {panel.control_for(k): v for k, v in errors.items()})
        runs.put(items, ran, heavy=time.thread_time() - start >= HEAVY_SECONDS)
    return PanelState(panel, names, ran.query, ran.result, ran.errors, run=ran)


def control_choices(info) -> tuple[list[str], bool]:
    """(the values a Literal control offers, whether it may be left empty)."""
    values: list[str] = []
    optional = False
    for arg in get_args(info.annotation) or (info.annotation,):
        if arg is type(None):
            optional = True
        if isinstance(arg, str):  # Literal["a", "b"]: its own arguments
            values.append(arg)
        for inner in get_args(arg) or ():
            if isinstance(inner, str):
                values.append(inner)
    return values, optional
