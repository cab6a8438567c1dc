"""EP07's compute-to-communication crossover: the expert width f above which a MoE layer's
expert GEMMs outlast its two all-to-alls (dispatch and combine).

Under uniform routing each GPU of the EP group computes its T tokens' k copies: T·k x 2·h·f
x 3 FLOPs forward for a gated expert (up, gate and down; 2 matrices without the gate). It
receives (EP − 1)/EP of those copies from the other GPUs, h values of 2 bytes each, and sends
as many back in the combine: 2 x (EP − 1)/EP x T·k x 2h bytes. Both grow with T·k, and with
h: they cancel, and only the expert's width is left,

    f* = (2/3) x (EP − 1)/EP x R ÷ busBW   (gated experts; (EP − 1)/EP x R ÷ busBW without),

R the experts' FLOP/s (one grouped GEMM at the shapes' measured rates) and busBW the bytes
the slowest GPU moves over the all-to-alls' time, both the lab's own at the state. Unlike DP's
T* or CP's L*, no per-GPU batch rescues a narrow expert: more tokens add compute and bytes
alike. The batch only sets the tokens each expert gets, and with them R (step 8's grouped-GEMM
efficiency). DeepSeek-V3's report (arXiv:2412.19437, sec 3.2.1) puts its cross-node expert
parallelism at "a computation-to-communication ratio of approximately 1:1", the ratio that
made it build DualPipe: its 2,048-wide experts sit below f* on its H800s' network. DeepEP's
dispatch sends a copy once per destination node (labs.experts.routing), so its bytes per copy are
the lab's own count, not 2h; its f* is the same line crossing, f x communication ÷ compute.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from labs.core.errors import LabInputError
from labs.experts.inputs import MoEInput, MoEResult
from labs.experts.layer import expert_compute, route
from labs.parallel.rank_map import group_of_rank, members_per_node

SWEEP_STEPS = 48
POINT_WIDTHS = tuple(2 ** e for e in range(8, 16))  # the lab's own runs: 256 ... 32,768


@dataclass(frozen=True)
class EPCrossover:
    ep: int
    width: int  # f, the expert's FFN width (over expert-TP)
    tokens: int  # T, tokens per GPU entering the layer
    copies: int  # T·k, the copies each GPU computes under uniform routing
    compute_s: float  # the slowest GPU's expert GEMMs, forward, uniform routing
    comm_s: float  # dispatch + combine, none hidden
    comm_bytes: float  # the slowest GPU's bytes over both
    flops: float
    rate: float  # flops / compute_s
    busbw: float  # comm_bytes / comm_s
    matrices: int  # 3 gated (up, gate, down), 2 without the gate
    crossover: float  # f*, 0 at EP 1
    sweep: tuple[tuple[float, float], ...]  # (f, compute s) at this state's rate
    points: tuple[tuple[int, float, float], ...]  # the lab at POINT_WIDTHS: (f, compute, comm)

    @property
    def ratio(self) -> float | None:
        return self.compute_s / self.comm_s if self.comm_s else None


def ep_crossover(result: MoEResult) -> EPCrossover:
    inp, r = result.input, result.balanced
    m = inp.model
    width = m.expert_ffn // inp.etp
    matrices = 3 if m.gated_mlp else 2
    copies = inp.tokens * m.top_k
    compute = max(r.compute_s)
    comm = 2 * max(r.dispatch_s)
    slow = max(range(inp.ep), key=lambda g: r.dispatch_s[g])
    moved = 2 * max(r.received_bytes[slow], r.sent_bytes[slow])
    flops = copies * matrices * 2 * m.hidden * width
    cross = width * comm / compute if comm else 0.0
    lo = min(POINT_WIDTHS[0], cross / 2) if cross else POINT_WIDTHS[0]
    hi = max(POINT_WIDTHS[-1], 2 * cross)
    sweep = tuple((x, compute * x / width) for x in
                  (lo * (hi / lo) ** (i / SWEEP_STEPS) for i in range(SWEEP_STEPS + 1)))
    return EPCrossover(
        ep=inp.ep, width=width, tokens=inp.tokens, copies=copies, compute_s=compute,
        comm_s=comm, comm_bytes=moved, flops=flops, rate=flops / compute,
        busbw=moved / comm if comm else 0.0, matrices=matrices, crossover=cross, sweep=sweep,
        points=lab_points(result) if inp.ep > 1 else ())


def lab_points(result: MoEResult) -> tuple[tuple[int, float, float], ...]:
    """The lab's own layer, uniform routing, with the state's experts made POINT_WIDTHS wide
    (each times its GEMMs at their own shapes' rates). Eight routings of the layer, which
    neither the skew nor the rank map's colouring changes: computed once per state without
    them (a bounded cache), so a skew slider or a colouring reuses them, and the page's
    several asks of one state (its figure and its prose) share them."""
    return _points(replace(result.input, skew=0.0, group="ep"))


@lru_cache(maxsize=512)
def _points(inp: MoEInput) -> tuple[tuple[int, float, float], ...]:
    ids = group_of_rank(inp.layout, "ep")
    per_node = members_per_node(tuple(g for g, i in enumerate(ids) if i == 0),
                                inp.cluster.gpus_per_node)
    # The routing, and so the all-to-alls' bytes and time, do not depend on the experts'
    # width: one routing, each width's GEMMs timed on its kept copies.
    r = route(inp, 0.0, per_node)
    comm = 2 * max(r.dispatch_s)
    kept = tuple(n - d for n, d in zip(r.routed_per_expert, r.dropped_per_expert, strict=True))
    out = []
    for f in POINT_WIDTHS:
        try:
            wider = replace(inp, model=replace(inp.model, expert_ffn=f * inp.etp))
        except LabInputError:
            continue
        out.append((f, max(expert_compute(wider, wider.model, kept)), comm))
    return tuple(out)
