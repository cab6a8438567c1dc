"""Per-rank action orders for the pipeline schedules of EP05.

Each generator returns, for every pipeline rank, the ordered list of work that rank
performs. Nothing here knows about time: ``labs.schedules.simulate.simulate`` places the actions
on a timeline, and every figure the lab shows is measured from that timeline.

An action runs one micro-batch through one *model piece* ("virtual stage"). With ``c``
chunks per rank there are ``p * c`` pieces; ``Schedule.piece`` (``labs.schedules.catalogue``,
where each schedule's record names its generator) says which piece a rank's chunk is.
Kinds: ``F`` forward, ``B`` full backward, ``I`` input-gradient half of the backward,
``W`` weight-gradient half.

Where PyTorch's ``torch.distributed.pipelining`` has the schedule, the per-rank order is
PyTorch's, action for action (tests/fixtures/torch_pipeline_orders.json, from 2.13).
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple


class Action(NamedTuple):
    kind: str  # "F", "B", "I" or "W"
    microbatch: int
    chunk: int  # model chunk on this rank, 0..chunks-1
    stage: int  # model piece ("virtual stage") index, 0..stages*chunks-1


# The generators build plain (kind, microbatch, chunk, stage) tuples, which are several
# times cheaper to make than Actions; labs.schedules.simulate.generate wraps them for callers.
Step = tuple[str, int, int, int]
Plan = list[list[Step]]


def gpipe(p: int, m: int) -> Plan:
    """GPipe: every rank runs all m forwards, then all m backwards.

    Huang et al., 2019, "GPipe: Efficient Training of Giant Neural Networks using
    Pipeline Parallelism". Each rank keeps the activations of all m micro-batches.
    """
    return [
        [("F", i, 0, r) for i in range(m)] + [("B", i, 0, r) for i in range(m)] for r in range(p)
    ]


def one_f_one_b(p: int, m: int) -> Plan:
    """1F1B (PipeDream-Flush, Megatron-LM's non-interleaved schedule).

    Narayanan et al., 2021, "Efficient Large-Scale Language Model Training on GPU
    Clusters Using Megatron-LM", sec. 2.2: rank r runs min(p-r-1, m) warm-up forwards,
    then alternates one forward and one backward, then drains the remaining backwards.
    At most p-r micro-batches are in flight on rank r.
    """
    plan = []
    for r in range(p):
        warm = min(p - r - 1, m)
        acts = [("F", i, 0, r) for i in range(warm)]
        for i in range(m - warm):
            acts += (("F", warm + i, 0, r), ("B", i, 0, r))
        acts += [("B", i, 0, r) for i in range(m - warm, m)]
        plan.append(acts)
    return plan


def rounds(p: int, m: int) -> tuple[int, int]:
    """(rounds, micro-batches per round) of PyTorch's interleaved schedules.

    ``ScheduleInterleaved1F1B`` and ``ScheduleInterleavedZeroBubble`` in
    ``torch.distributed.pipelining``: max(1, m // p) rounds of m / rounds micro-batches each,
    which must come out whole (PipelineInput checks it). With m a multiple of p a round is
    p micro-batches, Megatron-LM's group of one micro-batch per stage.
    """
    count = max(1, m // p)
    return count, m // count


def _interleaved_chunks(p: int, m: int, v: int) -> tuple[list[tuple[int, int]], ...]:
    """The (micro-batch, chunk) of every rank's k-th forward and k-th backward.

    As PyTorch numbers them: the k-th forward runs chunk (k // n) % v, n micro-batches a
    round; the k-th backward runs chunk v-1 - (k // n) % v. Each chunk takes its
    micro-batches in order. The same for every rank (only the piece, c*p + r, differs).
    """
    n = rounds(p, m)[1]
    fwd, bwd = [], []
    f_next, b_next = [0] * v, [0] * v
    for k in range(m * v):
        c = (k // n) % v
        fwd.append((f_next[c], c))
        f_next[c] += 1
        c = v - 1 - c
        bwd.append((b_next[c], c))
        b_next[c] += 1
    return fwd, bwd


def interleaved(p: int, m: int, v: int) -> Plan:
    """Interleaved 1F1B: v model chunks per rank, piece k on rank k % p.

    Narayanan et al., 2021 (as above), sec. 2.2.2, as PyTorch's ``ScheduleInterleaved1F1B``
    runs it, which also accepts m not a multiple of p (see ``rounds``): forwards go round
    by round through chunk 0, then chunk 1, ...; backwards walk the chunks in reverse.
    Rank r warms up with (v-1)*n + 2*(p-r-1) forwards (n micro-batches a round), capped at
    m*v, then alternates one forward and one backward, then drains the backwards. With
    m % p == 0 this is Megatron-LM's order (groups of p, warm-up (p-r-1)*2 + (v-1)*p, in
    ``forward_backward_pipelining_with_interleaving``); the tests check both.
    """
    plan = []
    n = rounds(p, m)[1]
    total = m * v
    fwd_order, bwd_order = _interleaved_chunks(p, m, v)
    for r in range(p):
        warm = min((v - 1) * n + 2 * (p - r - 1), total)
        fwd = [("F", mb, c, c * p + r) for mb, c in fwd_order]
        bwd = [("B", mb, c, c * p + r) for mb, c in bwd_order]
        acts = fwd[:warm]
        for i in range(total - warm):
            acts += (fwd[warm + i], bwd[i])
        acts += bwd[total - warm :]
        plan.append(acts)
    return plan


def interleaved_zero_bubble(p: int, m: int, v: int) -> Plan:
    """Interleaved zero bubble: interleaved 1F1B with the backward split into I and W.

    Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024), as PyTorch's
    ``ScheduleInterleavedZeroBubble`` runs it (its "ZB1P"). Chunks and rounds as in
    ``interleaved``, but rank r warms up with only (v-1)*n + (p-r-1) forwards: the I's,
    which alone sit on the critical path, come back sooner. Then "F, I", each followed
    from rank r's (r+1)-th I on by the W of the oldest I still waiting for one; then the
    remaining I's (same rule) and the remaining W's.
    """
    plan = []
    n = rounds(p, m)[1]
    total = m * v
    fwd_order, bwd_order = _interleaved_chunks(p, m, v)
    for r in range(p):
        warm = min((v - 1) * n + (p - r - 1), total)
        fwd = [("F", mb, c, c * p + r) for mb, c in fwd_order]
        acts = fwd[:warm]
        pending: deque[tuple[int, int]] = deque()
        for i, (mb, c) in enumerate(bwd_order):
            if warm + i < total:
                acts.append(fwd[warm + i])
            acts.append(("I", mb, c, c * p + r))
            pending.append((c, mb))
            if i >= r:
                c_w, mb_w = pending.popleft()
                acts.append(("W", mb_w, c_w, c_w * p + r))
        acts += [("W", mb, c, c * p + r) for c, mb in pending]
        plan.append(acts)
    return plan


def looped_bfs(p: int, m: int, v: int) -> Plan:
    """Looped BFS (breadth-first): every micro-batch through chunk 0, then chunk 1, ...

    Lamy-Poirier, "Breadth-First Pipeline Parallelism" (2022), as PyTorch's
    ``ScheduleLoopedBFS`` runs it: rank r runs all m forwards of its chunk 0 (piece r), then
    all of chunk 1 (piece p + r), ...; then the backwards chunk by chunk in reverse, each
    chunk's micro-batches last first. Like GPipe it holds every micro-batch of every chunk.
    """
    plan = []
    for r in range(p):
        acts = [("F", mb, c, c * p + r) for c in range(v) for mb in range(m)]
        acts += [("B", mb, c, c * p + r) for c in reversed(range(v)) for mb in reversed(range(m))]
        plan.append(acts)
    return plan


def zb_h1(p: int, m: int) -> Plan:
    """ZB-H1, the memory-efficient handcrafted zero-bubble schedule.

    Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024), sec. 2.1 and Fig. 3.
    The backward is split into I (input gradient, on the critical path) and W (weight
    gradient, free to move). Rank r keeps 1F1B's warm-up (min(p-r, m) forwards before
    its first I) and then repeats "I, W, F", so the I's travel back up the pipeline
    without waiting for any W. During its last r forward steps rank r defers its W's
    ("I, F"): the I's then reach the first stage every two slots instead of three, and
    the W backlog fills the cool-down slots where 1F1B idles ("I, W"). Deferring lets
    every rank hold up to p micro-batches, the first stage's peak in 1F1B, so the
    pipeline's memory limit is unchanged (the paper: same in-flight count on every
    stage, peak memory no more than 1F1B's). Where exactly the W's go is this lab's
    reading of the paper's figure; with F = I = W and m >= p the measured bubble is
    (p-1)/(3m+p-1), the paper's "a third of 1F1B's" idle time.
    """
    plan = []
    for r in range(p):
        nf = min(p - r, m)
        acts = [("F", i, 0, r) for i in range(nf)]
        pending: deque[int] = deque()
        for i in range(m):
            acts.append(("I", i, 0, r))
            pending.append(i)
            if i < m - p:  # steady state, paced like 1F1B: I, W, F
                acts.append(("W", pending.popleft(), 0, r))
            if nf < m:
                acts.append(("F", nf, 0, r))
                nf += 1
            elif i < m - 1:  # cool-down: a deferred W takes the forward's slot
                acts.append(("W", pending.popleft(), 0, r))
        acts += [("W", j, 0, r) for j in pending]
        plan.append(acts)
    return plan


def zb_v(p: int, m: int) -> Plan:
    """ZB-V: the zero-bubble schedule on the V placement (rank r holds pieces r, 2p-1-r).

    Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024), sec. 6, as PyTorch's
    ``ScheduleZBVZeroBubble`` runs it. Chunk 0 is the way down, chunk 1 the way back up.
    Rank r, with n = max(2p-1, m) micro-batches:
      1. 2(p-r)-1 forwards of chunk 0;
      2. r times: forward chunk 1, forward chunk 0;
      3. p-r times: F, I, W of chunk 1;
      4. while chunk 0 has forwards left or chunk 1 lags it: (F of chunk 0 while any
         are left), I, W of chunk 0, then F, I, W of chunk 1;
      5. r times: I of chunk 0, I of chunk 1;
      6. p-r times: I of chunk 0, the oldest deferred W of chunk 0;
      7. the deferred W's of chunk 1, then those of chunk 0.
    PyTorch plans n >= 2p-1 micro-batches so that the V fills, then leaves out the actions
    of micro-batches m..n-1; so does this lab. With F = I = W the bubble is near zero.
    """
    return [_zb_v_rank(p, r, m) for r in range(p)]


def _zb_v_rank(p: int, r: int, m: int) -> list[Step]:
    n = max(2 * p - 1, m)
    pieces = (r, 2 * p - 1 - r)
    count = {kind: [0, 0] for kind in "FIW"}
    acts: list[Step] = []

    def run(kind: str, c: int) -> None:
        mb = count[kind][c]
        count[kind][c] += 1
        if mb < m:
            acts.append((kind, mb, c, pieces[c]))

    for _ in range(2 * (p - r) - 1):  # 1
        run("F", 0)
    for _ in range(r):  # 2
        run("F", 1)
        run("F", 0)
    for _ in range(p - r):  # 3
        for kind in "FIW":
            run(kind, 1)
    f = count["F"]
    while f[1] < f[0] or f[0] < n:  # 4
        if f[0] < n:
            run("F", 0)
        run("I", 0)
        run("W", 0)
        for kind in "FIW":
            run(kind, 1)
    for _ in range(r):  # 5
        run("I", 0)
        run("I", 1)
    for _ in range(p - r):  # 6
        run("I", 0)
        run("W", 0)
    for c in (1, 0):  # 7
        while count["W"][c] < count["I"][c]:
            run("W", c)
    return acts


def dualpipe_v(p: int, m: int) -> Plan:
    """DualPipeV: the V-shape, "cut in half" DualPipe.

    DeepSeek-AI, "DeepSeek-V3 Technical Report" (2024), sec. 3.2.1, and the DualPipeV
    schedule of github.com/deepseek-ai/DualPipe; the V placement is the one of Qi et al.,
    "Pipeline Parallelism with Controllable Memory" (2024). Rank r holds pieces r
    (chunk 0) and 2p-1-r (chunk 1). Its order, in the eight steps of the reference:
      1. 2(p-r-1) forwards of chunk 0;
      2. r+1 pairs: forward chunk 0, forward chunk 1;
      3. p-r-1 times: I of chunk 1, the oldest deferred W, forward chunk 1;
      4. m-2p+r+1 times: (F chunk 0 with B chunk 1), then (F chunk 1 with B chunk 0);
      5. p-r-1 times: B chunk 1, then (F chunk 1 with B chunk 0);
      6. r+1 pairs: backward chunk 1, backward chunk 0, full B in the first half
         and split (I, W deferred) from the middle on;
      7. p-r-1 times: a deferred W, then I of chunk 0;
      8. the remaining deferred W's.
    DualPipe overlaps the paired forward and backward of step 4/5 on the GPU; this
    lab runs them one after the other on the rank. Needs m >= 2p.
    """
    return [_VRank(p, r).build(m) for r in range(p)]


class _VRank:
    """Builds one rank's DualPipeV order, keeping DualPipe's per-chunk counters."""

    def __init__(self, p: int, r: int) -> None:
        self.p, self.r = p, r
        self.pieces = (r, 2 * p - 1 - r)
        self.next_f = [0, 0]  # next micro-batch to run forward, per chunk
        self.next_b = [0, 0]  # next micro-batch to run backward (B or I), per chunk
        self.deferred: deque[tuple[int, int]] = deque()  # (micro-batch, chunk) awaiting W
        self.acts: list[Step] = []

    def run(self, kind: str, c: int) -> None:
        counter = self.next_f if kind == "F" else self.next_b
        mb = counter[c]
        counter[c] += 1
        self.acts.append((kind, mb, c, self.pieces[c]))
        if kind == "I":
            self.deferred.append((mb, c))

    def weight(self) -> None:
        mb, c = self.deferred.popleft()
        self.acts.append(("W", mb, c, self.pieces[c]))

    def build(self, m: int) -> list[Step]:
        p, r, run = self.p, self.r, self.run
        for _ in range(2 * (p - r - 1)):  # 1
            run("F", 0)
        for _ in range(r + 1):  # 2
            run("F", 0)
            run("F", 1)
        for _ in range(p - r - 1):  # 3
            run("I", 1)
            self.weight()
            run("F", 1)
        for _ in range(m - 2 * p + r + 1):  # 4
            run("F", 0)
            run("B", 1)
            run("F", 1)
            run("B", 0)
        for _ in range(p - r - 1):  # 5
            run("B", 1)
            run("F", 1)
            run("B", 0)
        split = False
        for i in range(r + 1):  # 6
            split = split or (i == (r + 1) // 2 and r % 2 == 1)
            run("I" if split else "B", 1)
            split = split or (i == (r + 1) // 2 and r % 2 == 0)
            run("I" if split else "B", 0)
        for _ in range(p - r - 1):  # 7
            self.weight()
            run("I", 0)
        while self.deferred:  # 8
            self.weight()
        return self.acts
