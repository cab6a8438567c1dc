"""One layer, op by op: a layer's forward and backward on the slowest stage, on a compute stream
and one communication stream per kind (TP, CP, EP, DP/FSDP), read off the step model's own
answer (``Timing.slow``: each layer's ``LayerTime`` from ``labs.parallel.layer_time``, whose
collectives carry where they run, ``Piece``; ZeRO-3 from ``labs.recipe.dp_time.zero3_layer``),
never timed again.

Kernels are laid in the order a transformer layer runs them (``FORWARD``; backward the reverse,
each GEMM's input gradient then its weight gradient; a recomputed forward first). Each
collective sits where ``layer_time`` says it runs:

- beside a kernel (TP's backward collectives beside the other GEMM, every TP collective with
  "all", CP's ring beside the attention core): its hidden seconds on its stream from that
  kernel's start, and what outlasts the kernel a wait on the compute stream after it; with
  "all", the GEMM cut into chunks: what the chunks' smaller GEMMs lose (``Piece.split``) is
  compute slowed ("split") after the GEMM, and the collective hidden but for any wait;
- blocking ("before" the GEMM it feeds, "after" the one it follows): a wait on the compute
  stream as long as the collective;
- beside the whole pass (EP overlap, DualPipe: another micro-batch's compute): from the pass's
  start, and at its end the compute slowed by the SMs its kernels hold (DeepSeek-V3's 20,
  ``COMM_SMS``) and any wait.

DP/FSDP stream. ZeRO-3 (``zero3_layer``) gathers the next layer's weights beside this layer's
forward (prefetch, one layer ahead), and beside its backward gathers the next layer's again and
reduce-scatters the last one's gradients: the steady state of every layer but the first, whose
gather each pass waits for (the step counts it once a pass). FSDP2's copy-out after each gather
runs on the compute stream. ZeRO-0/1/2 reduce the gradient buckets once a step, during the last
micro-batch's backward, as the step model times them (``Part.buckets``: Megatron's buckets,
bucket j ready at j·share of that backward, one after another,
``labs.data_parallel.lab.exposed_after_window``): the drawn layer's backward is the window's
last (it is the stage's first layer), so its DP streams (dense, and experts') hold the buckets
that run while it does, and after it what the step model leaves exposed waits, once a step
(``step_end_s``): the buckets left beyond the pipeline's idle time, the updated weights'
all-gather's wait in the next step's first forward (``labs.recipe.dp_time.gather_delay``), the
tied embeddings' all-reduce. Their sum is the step's DP segment.

The model charges the SMs only where it times them (EP overlap, ZeRO-3); beside TP's and CP's
hidden collectives NCCL's 16 channels go uncharged (``labs.recipe.overlap``), so the lab errs
fast there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from labs.core.catalogue import RECIPES
from labs.hardware.nccl import sm_share
from labs.parallel.layer_time import COMM_SMS, LayerTime, Piece
from labs.recipe.dp_time import dp_spreads, zero3_layer
from labs.recipe.inputs import RecipeResult
from labs.recipe.timing import Part, concurrent, group_wait

# A layer's kernels in the order they run forward: (name, kind); "norms" and
# "bias-dropout-add" are two equal kernels each (labs.model.ops), so each half runs in its place.
FORWARD = (
    ("norms", "memory"), ("q-down", "gemm"), ("q-up", "gemm"), ("q", "gemm"),
    ("kv-down", "gemm"), ("latent-norms", "memory"), ("kv-up", "gemm"), ("qkv", "gemm"),
    ("rotary", "memory"), ("repeat-kv", "memory"), ("attention", "attention"),
    ("attention.softmax", "memory"), ("attention.dropout", "memory"), ("cp-merge", "memory"),
    ("context-copy", "memory"), ("proj", "gemm"), ("bias-dropout-add", "memory"),
    ("norms", "memory"), ("router", "gemm"), ("router", "memory"), ("permute", "memory"),
    ("shared.fc1", "gemm"), ("experts.fc1", "gemm"), ("fc1", "gemm"), ("activation", "memory"),
    ("experts.fc2", "gemm"), ("fc2", "gemm"), ("shared.fc2", "gemm"),
    ("bias-dropout-add", "memory"), ("bias-grads", "memory"), ("fp8-casts", "memory"))
HALVED = ("norms", "bias-dropout-add")
KINDS = ("tp", "cp", "ep", "dp")
LANES = {"compute": "Compute", "tp": "TP stream", "cp": "CP stream", "ep": "EP stream",
         "dp": "DP / FSDP stream", "edp": "Expert DP stream"}


@dataclass(frozen=True)
class Op:
    lane: str  # "compute" or one of KINDS
    phase: str  # "forward" or "backward"
    kind: str  # "gemm", "attention", "memory", "recompute", or one of KINDS
    name: str
    state: str  # "compute", "hidden", "exposed", "sm", "split" (a GEMM cut into chunks)
    start: float  # seconds from the layer's forward
    seconds: float


@dataclass(frozen=True)
class LayerView:
    ops: tuple[Op, ...]
    moe: bool  # the layer drawn is a MoE layer
    count: int  # layers like it on the stage
    layers: int  # layers on the stage
    forward_s: float  # on the critical path
    backward_s: float
    backward_start: float
    exposed: dict[str, float]  # per kind, both passes: waits and SMs lent
    hidden: dict[str, float]
    sm_share: dict[str, float]  # the share of the SMs each kind's kernels hold
    zero: int
    # ZeRO-0/1/2: the step's DP wait at its end, once a step (the step bar's DP segment:
    # buckets left when the last backward ends, and ZeRO-1/2's weight gathers)
    bucket_wait_s: float
    # ZeRO-0/1/2, the drawn layer the stage's last to run backward: the step's DP waits drawn
    # after its backward (the last micro-batch's), once a step; else 0
    step_end_s: float
    first_gather_s: float  # ZeRO-3: the first layer's gather each pass waits for
    params: float  # the layer's parameters on this GPU (dense and experts)
    # Each collective of the layer as the step model times it: (pass, kind, its Piece, the
    # seconds of the kernel it is anchored to in that pass; 0 for none or the recomputation)
    collectives: tuple[tuple[str, str, Piece, float], ...] = ()

    @property
    def seconds(self) -> float:
        return self.forward_s + self.backward_s + self.step_end_s


def _order(kernels, backward: bool) -> list[tuple[str, str, float]]:
    """(name, kind, seconds) in running order; a kernel not in FORWARD runs last."""
    by = {}
    for k in kernels:
        by.setdefault((k.name, k.kind), []).append(k.seconds)
    left = {key: math.fsum(v) for key, v in by.items()}
    out = []
    slots = FORWARD if not backward else tuple(reversed(FORWARD))
    for name, kind in slots:
        for suffix in ((".dgrad", ".wgrad") if backward and kind == "gemm" else ("",)):
            key = (name + suffix, kind)
            if key not in left:
                continue
            if name in HALVED and not suffix:
                half = math.fsum(by[key]) / 2
                out.append((name, kind, half))
                left[key] -= half
                if left[key] <= 1e-15:
                    del left[key]
                continue
            out.append((name + suffix, kind, left.pop(key)))
    out += [(name, kind, s) for (name, kind), s in left.items()]
    return out


def _anchor(p: Piece, names: list[str]) -> int:
    """The index of the kernel a piece runs beside or next to: its own, or for a MoE layer
    without shared experts the routed experts' place (the router, or the experts' fc2)."""
    name = p.anchor
    if name not in names and name.startswith("shared."):
        name = name.replace("shared.fc1", "router").replace("shared.fc2", "experts.fc2")
    if name in names:
        return names.index(name)
    return len(names) - 1


class _Lay:
    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.exposed = dict.fromkeys(KINDS, 0.0)
        self.hidden = dict.fromkeys(KINDS, 0.0)

    def add(self, *args) -> None:
        op = Op(*args)
        if op.seconds > 0:
            self.ops.append(op)

    def wait(self, phase: str, kind: str, name: str, t: float, seconds: float,
             sm: float = 0.0, slowed: str = "sm") -> float:
        """What a collective adds to the compute stream at ``t``: ``sm`` seconds of compute
        slowed (``slowed``: by the SMs lent, or "split": by the GEMM cut into chunks), then
        the wait."""
        self.add("compute", phase, kind, name, slowed, t, sm)
        self.add("compute", phase, kind, name, "exposed", t + sm, seconds - sm)
        self.add(kind, phase, kind, name, "exposed", t + sm, seconds - sm)
        self.exposed[kind] += seconds
        return t + seconds

    def pass_(self, phase: str, start: float, kernels: list[tuple[str, str, float]],
              pieces: list[tuple[str, Piece]]) -> float:
        names = [n for n, *_ in kernels]
        at: dict[int, list] = {}
        ends = []
        for kind, p in pieces:
            if p.where == "pass":
                ends.append((kind, p))
            else:
                at.setdefault(_anchor(p, names), []).append((kind, p))
        t = start
        cursor = dict.fromkeys(KINDS, start)
        for i, (name, kind, seconds) in enumerate(kernels):
            mine = at.get(i, [])
            # Blocking before the kernel it feeds (nothing hides it).
            for k, p in mine:
                if p.where == "before" and p.exposed >= p.seconds:
                    t = self.wait(phase, k, _label(k, p), t, p.exposed)
            self.add("compute", phase, kind, name, "compute", t, seconds)
            for k, p in mine:
                # Cut into chunks (TP overlap "all"), the collective runs beside the GEMM
                # but for any wait; what the chunks lose is compute, not waiting.
                hidden = p.seconds - (p.exposed - p.split)
                if hidden > 0:
                    c = max(t, cursor[k])
                    self.add(k, phase, k, _label(k, p), "hidden", c, hidden)
                    cursor[k] = c + hidden
                    self.hidden[k] += hidden
            t += seconds
            for k, p in sorted(mine, key=lambda kp: kp[0] != "ep"):
                if p.where == "after" or p.exposed < p.seconds:
                    t = self.wait(phase, k, _label(k, p), t, p.exposed, p.split, "split")
        # Beside the whole pass (EP overlap): from its start, then SMs lent and any wait.
        for k, p in ends:
            hidden = p.seconds - p.exposed
            c = max(start, cursor[k])
            self.add(k, phase, k, _label(k, p), "hidden", c, hidden)
            cursor[k] = c + hidden
            self.hidden[k] += hidden
            t = self.wait(phase, k, _label(k, p), t, p.exposed, p.sm)
        return t


def _label(kind: str, p: Piece) -> str:
    words = p.collective.replace("_", "-")
    return f"TP {words}" if kind == "tp" else words if kind == "ep" else f"CP {words}"


def _pieces(pass_) -> list[tuple[str, Piece]]:
    return [(c.name, p) for c in pass_.comms for p in c.pieces]


def _is_moe(lt: LayerTime) -> bool:
    return lt.ops.forward.named("router") > 0


def _layer(r: RecipeResult) -> tuple[int, LayerTime, tuple[float, float], int]:
    """The layer drawn: the slowest stage's first MoE layer where it has one, else its first
    layer (a layer-granular recomputation's first group)."""
    layers = [row for row in r.timing.slow.layers if row[0]]
    moe = [row for row in layers if _is_moe(row[1])]
    n, lt, dense, expert = (moe or layers)[0]
    return n, lt, (dense, expert), sum(row[0] for row in layers)


def _before_it(r: RecipeResult, lt: LayerTime) -> float:
    """The backward seconds of the stage's layers that run after the drawn one's backward
    (those before it in the forward); 0 when it is the stage's first."""
    rows = [row for row in r.timing.slow.layers if row[0]]
    i = next(i for i, row in enumerate(rows) if row[1] is lt)
    return math.fsum(n * row_lt.backward.seconds for n, row_lt, *_ in rows[:i])


def _sync(lay: _Lay, dp: Part, back: float, end: float, after: float) -> float:
    """ZeRO-0/1/2: the step's gradient sync as the step model times it (``dp.buckets``), on
    the last micro-batch. Beside the layer's backward, the buckets that run while it does,
    each from the layer's place in the window (the stage's last backward; the drawn layer ends
    ``after`` seconds before it). If the layer is the last to run backward, what is left after
    the window follows it, on one stream a group: the pipeline's idle time after the stage's
    last backward hides its first part (``dp.idle``), the rest waits; then the updated weights'
    all-gather's wait in the next step's first forward and the tied embeddings' all-reduce.
    Returns the compute stream's end."""
    left = []
    for b in dp.buckets:
        if b.kind == "all_gather":
            continue
        lane = "dp" if b.group == "dense" else "edp"
        words = "" if b.group == "dense" else "expert "
        hi = b.window_s - after
        lo = hi - (end - back)
        for j, s0, s1 in b.runs():
            a, z = max(s0, lo), min(s1, hi)
            if z > a:
                lay.add(lane, "backward", "dp", f"{words}bucket {j:,} of {b.count:,}", "hidden",
                        back + a - lo, z - a)
                lay.hidden["dp"] += z - a
            if s1 > b.window_s:
                left.append((lane, f"{words}bucket {j:,} of {b.count:,}",
                             s1 - max(s0, b.window_s)))
    if after > 1e-15:
        return end  # the buckets left wait after the stage's last layer, not this one
    reductions = [b for b in dp.buckets if b.kind != "all_gather"]
    wait = max(0.0, group_wait(reductions) - dp.idle[1])
    # With DP overlap each group's stream runs its own left buckets from the backward's end
    # (the groups at once, labs.recipe.timing.group_wait); without it, one after another.
    at_once = concurrent(reductions)
    t = dict.fromkeys(("dp", "edp"), end)
    for lane, label, seconds in left:  # the waited part first, then what the idle hides
        key = lane if at_once else "dp"
        exposed = min(seconds, max(0.0, wait - (t[key] - end)))
        lay.add(lane, "backward", "dp", label, "exposed", t[key], exposed)
        if seconds - exposed > 1e-12 * seconds:
            lay.add(lane, "backward", "dp", f"{label} (pipeline idle)", "hidden",
                    t[key] + exposed, seconds - exposed)
            lay.hidden["dp"] += seconds - exposed
        t[key] += seconds
    gathers = group_wait([b for b in dp.buckets if b.kind == "all_gather"])
    waits = (("buckets left", wait, None),
             ("weights' all-gather (next step's forward)", max(0.0, gathers - dp.idle[0]), "dp"),
             ("tied embeddings' all-reduce", dp.tie, "dp"))
    for label, seconds, lane in waits:
        if seconds <= 0:
            continue
        if lane:  # the buckets' own ops are drawn above
            lay.add(lane, "backward", "dp", label, "exposed", end, seconds)
        lay.add("compute", "backward", "dp", label, "exposed", end, seconds)
        lay.exposed["dp"] += seconds
        end += seconds
    return end


def layer_view(result: RecipeResult) -> LayerView | None:
    """The slowest stage's layer (module docstring); None for a plan that cannot run. Drawn
    once per result: the API's answer and the layer figure both ask for it, and EP12's
    playground keeps each result for its later answers (kept in the result's own __dict__,
    as functools.cached_property would, so labs.recipe.inputs need not import this module)."""
    memo = result.__dict__
    if "_layer_view" not in memo:
        memo["_layer_view"] = _draw(result)
    return memo["_layer_view"]


def _draw(result: RecipeResult) -> LayerView | None:
    if not result.legal or result.timing is None or result.timing.slow is None:
        return None
    timing, plan, cluster = result.timing, result.plan, result.cluster
    n, lt, params, layers = _layer(result)
    lay = _Lay()
    forward = _order(lt.ops.forward.kernels, False)
    recompute = lt.backward.compute - lt.ops.backward.seconds
    backward = ([("recompute", "recompute", recompute)] if recompute > 1e-15 else []) \
        + _order(lt.ops.backward.kernels, True)
    z = None
    if plan.zero == 3:
        spreads = dp_spreads(plan.layout, cluster, list(timing.stages),
                             timing.options.dp_replicas)[:2]
        fsdp2 = timing.options.compute.kernels != "fused"
        z = zero3_layer(lt, params, spreads, cluster, RECIPES[plan.recipe].gathered_bytes,
                        RECIPES[plan.recipe].gradients, fsdp2, plan.fsdp_prefetch,
                        plan.reshard_after_forward)
        forward.insert(0, ("FSDP2 copy-out", "memory", z.copy_out))
        if z.gathers == 2:
            backward.insert(0, ("FSDP2 copy-out", "memory", z.copy_out))
    end = lay.pass_("forward", 0.0, [k for k in forward if k[2] > 0],
                    _pieces(lt.forward))
    if z is not None:
        lay.add("dp", "forward", "dp", "next layer's gather", "hidden", 0.0,
                z.gather - z.ahead)
        lay.hidden["dp"] += z.gather - z.ahead
        end = lay.wait("forward", "dp", "next layer's gather", end, z.ahead, z.sm_ahead)
    back = start = end
    # Without backward prefetch the layer's own gather is issued at its pre-backward hook,
    # and the backward waits for all of it.
    own = z.gather if z is not None and z.gathers == 2 and not plan.fsdp_prefetch else 0.0
    if own:
        start = lay.wait("backward", "dp", "its own gather", back, own)
    end = lay.pass_("backward", start, [k for k in backward if k[2] > 0],
                    _pieces(lt.backward))
    bucket_wait = 0.0
    if z is not None:
        # Beside the backward: the next layer's gather (prefetched, resharded) and the last
        # layer's reduce-scatter.
        ahead = z.gather if z.gathers == 2 and plan.fsdp_prefetch else 0.0
        beside = ahead + z.reduce - (z.behind - own)
        gather_hidden = min(ahead, beside)
        lay.add("dp", "backward", "dp", "next layer's gather", "hidden", start, gather_hidden)
        lay.add("dp", "backward", "dp", "last layer's reduce-scatter", "hidden",
                start + gather_hidden, beside - gather_hidden)
        lay.hidden["dp"] += beside
        end = lay.wait("backward", "dp", "gather + reduce-scatter" if ahead
                       else "reduce-scatter", end, z.behind - own, z.sm_behind)
    step_end = 0.0
    if z is None:
        dp = next(p for p in timing.parts if p.name == "dp")
        bucket_wait = dp.exposed
        done = _sync(lay, dp, back, end, _before_it(result, lt))
        step_end, end = done - end, end
    share = sm_share(cluster)
    kern = cluster.gpu.kernels
    ep_share = min(1.0, COMM_SMS / kern.sm_count) if kern else 0.0
    return LayerView(tuple(lay.ops), _is_moe(lt), n, layers, back, end - back, back,
                     lay.exposed, lay.hidden,
                     {"tp": share, "cp": share, "ep": ep_share if plan.ep_overlap else share,
                      "dp": share}, plan.zero, bucket_wait, step_end,
                     z.gather if z is not None else 0.0, math.fsum(params),
                     tuple((phase, kind, p, getattr(lt.ops, phase).named(p.anchor))
                           for phase in ("forward", "backward")
                           for kind, p in _pieces(getattr(lt, phase))))
