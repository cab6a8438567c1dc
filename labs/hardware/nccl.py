"""Collectives as NCCL runs them: its own cost model, fed with measured bus bandwidths.

NCCL picks, for every collective, the algorithm and protocol its tuning model says is fastest
(NVIDIA/nccl ``src/graph/tuning.cc``, ``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``, the
2.8-era copy of the 2021-22 Megatron runs, with current NCCL's cap on LL's bandwidth; its
constants, each with its source, in ``labs.hardware.nccl_constants``; latencies in µs):

    time = latency + bytes / algBw,   algBw = busBw · n / nsteps (ring), busBw / 2 (tree)

- ring: nsteps = 2(n−1) for all-reduce, n−1 for all-gather and reduce-scatter; latency =
  baseLat + (nsteps − interSteps)·hwLat(intra) + interSteps·hwLat(net), interSteps =
  2(nodes−1) or nodes−1; with several nodes LL's intra-node hop costs 1.8x, and a ring Simple
  all-reduce's latency 1.9x past nRanks/16 x 64 KiB ("plateau effect of ring");
- tree (all-reduce across nodes): latency = baseLat + 2·((ppn−1)·hwLat(intra) +
  log2i(nodes)·hwLat(net)), busBw = min(0.9·busBw, 80 GB/s past two nodes, else 110), and
  NCCL's own correction factor below 256 MB;
- protocols: LL at busBw/4 (all-reduce or several nodes, else /3), LL128 at 0.92·busBw (one
  NVLink node only: NCCL enables it nowhere else by default), Simple at busBw;
- LL's cap (current NCCL, not 2.8: ``ll_cap``): a ring's or a tree's LL busBw is at most
  ``llMaxBws``, 87.7 GB/s in one node, across nodes 39.0 (two) or 20.4 GB/s (more) on Intel
  hosts, 22.5 or 19.0 on AMD ones, so a large bucket across nodes runs on Simple.

busBw is what nccl-tests measures (doc/PERFORMANCE.md's "bus bandwidth"), per link preset
(``labs.hardware.links.Link.ring_busbw``): inside a node the link's; across nodes the lower
of the scale-up link's and the group's share of the node's NICs (NCCL runs one ring per NIC,
rail-aligned, so a group with g members on a node owns g / gpus_per_node of its ports while
the node's other groups use the rest). A one-node all-reduce on Simple takes the switch's
in-network reduction where it was measured (NVLS, ``allreduce_busbw``), for groups of more
than ``NVLS_MIN_RANKS`` GPUs: NCCL's ``ncclNvlsInit`` (src/transport/nvls.cc) leaves NVLS off
for 2 GPUs or fewer, so a pair all-reduces over a ring. NVLS's busBW can exceed the link's
bandwidth: the switch adds the GPUs' data, so each GPU moves about S each way where a ring
moves 2(n−1)/n·S, and nccl-tests still reports busBW = algBw × 2(n−1)/n (its doc/PERFORMANCE.md
derives that factor for point-to-point algorithms only), so 8 GPUs reach up to 2·7/8 of the
link, against the measured 480 GB/s on NVLink 4's 450. At 2 GPUs the same bound is the link
itself, 1 x 450 GB/s, below a measured figure taken at 8. A reduce-scatter or an all-gather
alone runs as a ring: with NVLS each GPU still sends (reduce-scatter) or receives (all-gather)
the whole buffer S, where a ring moves (n−1)/n·S each way, so NVLS is slower for them
(NVIDIA's Sylvain Jeaugey, NVIDIA/nccl#1083; EP04 step 5's sequence parallelism).

All-to-all is NCCL's grouped send/recv to every peer: each GPU sends (g−1)/n of its buffer
over the scale-up link and (n−g)/n out of the node, and "all-to-all cannot aggregate several
NICs", so a GPU sends at most one NIC's rate (NVIDIA NCCL team, NVIDIA/nccl-tests#267); its
peers run in parallel, so it pays one Simple send's latency (a lower bound: DeepEP's
low-latency kernels take 77 µs at EP 8 and 194 µs at EP 256 on H800, deepseek-ai/DeepEP).
A send/recv pays baseLat + one hop on Simple and moves at the link's send bandwidth.

The leaf and the spine (``Cluster.leaf_nodes``, ``Cluster.oversubscription``): a GPU's NIC
plugs into a leaf switch; the leaves meet at spine switches. A rail-optimised fat tree (NVIDIA
DGX SuperPOD H100 reference architecture: scalable units of 32 DGX nodes, one leaf per rail, so
GPU i of every node in the unit shares leaf i; full bisection bandwidth, 1:1) keeps traffic
between same-rail GPUs of a unit on one leaf; NCCL's rings are rail-aligned, and its
all-to-all's PXN (and DeepEP) first move a token over NVLink to the GPU on the destination's
rail. An oversubscribed tier gives each leaf 1/r of its downlink bandwidth towards the spine
(Llama 3, arXiv:2407.21783 sec 3.3.1: pods of 3,072 GPUs at full bisection, 1:7 between pods).
What crosses it:
- all-to-all: every GPU sends at once, a share c of its network bytes to nodes under other
  leaves (aligned groups: (nodes − leaf_nodes)/(nodes − 1)); the leaf's uplinks carry c·r times
  what they can, so the network leg takes max(1, c·r) times as long (``spine_alltoall``);
- ring and tree collectives: a rail-aligned ring enters and leaves each leaf once, one flow per
  ring where the leaf has leaf_nodes/r uplinks; it slows only past r = leaf_nodes
  (``spine_ring``, max(1, r / leaf_nodes)). Left out: several groups' rings on one rail (TP or
  CP across nodes), ECMP hashing two flows onto one uplink, congestion control: the lab errs
  fast for rings under an oversubscribed tier.

A collective that runs beside compute takes SMs from it: NCCL runs one CTA per channel, each
on an SM, for the collective's whole duration, so compute C beside a collective of A seconds
takes max(A, C + f·A), f = ``RING_CTAS`` / SMs (``sm_share``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from labs.hardware.links import Cluster
from labs.hardware.nccl_constants import (
    BASE_LATENCY,
    HOP_LATENCY,
    LL128_SHARE,
    LL_MAX_ACROSS,
    LL_MAX_ONE_NODE,
    MULTI_NODE_LL_INTRA,
    NET_HOP_CURRENT,
    NVLS_MEASURED,
    NVLS_MIN_RANKS,
    NVLS_TUNING_LATENCY,
    RING_CTAS,
    RING_PLATEAU,
    RING_PLATEAU_CURRENT,
    TREE_CAP,
    TREE_CORRECTION,
    TREE_LL,
    TREE_SHARE,
)

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p")
PROTOCOLS = ("LL", "LL128", "Simple")


def ll_cap(cluster: Cluster, nodes: int) -> float:
    """Current NCCL's cap on the LL protocol's bus bandwidth over ``nodes`` nodes of
    ``cluster``, bytes/s (tuning.cc llMaxBws; ``LL_MAX_ACROSS``)."""
    if nodes <= 1:
        return LL_MAX_ONE_NODE
    two, more = LL_MAX_ACROSS[cluster.gpu.host_cpu]
    return two if nodes == 2 else more


def simple_ring_latency() -> dict[str, float]:
    """NCCL's ring latencies on its Simple protocol, µs (tuning.cc): the start-up, one NVLink
    step, one network step, and the factor on a large ring all-reduce across nodes. EP02
    step 1 teaches them; EP04 step 4 sums them for a ring over two nodes."""
    return {"base": BASE_LATENCY["ring"]["Simple"],
            "nvlink": HOP_LATENCY["nvlink"]["ring"]["Simple"],
            "net": HOP_LATENCY["net"]["ring"]["Simple"], "plateau": RING_PLATEAU}


def current_nccl() -> dict[str, float]:
    """What current NCCL's tuning model (NVIDIA/nccl b6475625) has where the lab keeps NCCL
    2.8's, none of it charged: a network hop on the ring's Simple protocol, µs; the ring's
    plateau factor from compute capability 8.0 on; NVLS's latency, µs. EP02 step 4, EP04
    steps 3 and 4, EP07 and EP12 step 5 say which way the lab errs by them."""
    return {"net": NET_HOP_CURRENT, "plateau": RING_PLATEAU_CURRENT,
            "nvls": NVLS_TUNING_LATENCY}


def current_ring_latency(ranks: int, nodes: int) -> Latency:
    """A large ring all-reduce's latency across ``nodes`` nodes as current NCCL's tuning.cc
    (b6475625) prices it, µs, with all three of its changes (EP02 step 4): 2 x nodes steps
    cross the network (2.8: 2(nodes - 1)), each ``NET_HOP_CURRENT`` plus the fabric's own
    latency, left out (so this is a floor), and the plateau ``RING_PLATEAU_CURRENT``. The
    playground's step 5 and EP07 step 7 set it beside the lab's 2.8 figure."""
    inter = 2 * nodes
    return Latency(BASE_LATENCY["ring"]["Simple"], 2 * (ranks - 1) - inter,
                   HOP_LATENCY["nvlink"]["ring"]["Simple"], inter, NET_HOP_CURRENT,
                   factor=RING_PLATEAU_CURRENT)


def nvls_latency_check(cluster: Cluster, group: int = 8) -> dict[str, float]:
    """NVLS's latency as the lab charges it against current NCCL's own model, at the measured
    size (``NVLS_MEASURED``): each one's busBW for a ``group``-GPU all-reduce there, bytes/s
    (EP04 step 3's note)."""
    size, measured = NVLS_MEASURED
    t = nccl_time("all_reduce", size, group, cluster)
    sent = 2 * (group - 1) / group * size
    tuned = t.seconds - t.latency + NVLS_TUNING_LATENCY * 1e-6
    return {"size": size, "measured": measured, "lab": sent / t.seconds,
            "tuning": sent / tuned, "algorithm": t.algorithm}


def plateau_bytes(group: int) -> float:
    """The all-reduce size from which a ring on Simple across nodes pays ``RING_PLATEAU``
    (tuning.cc: ``nBytes >= nRanks/16.0*65536``): 4 MiB on 1,024 GPUs, so EP02 step 6's
    1 MiB bucket does not."""
    return group / 16 * 65536


@dataclass(frozen=True)
class Latency:
    """A ring's or tree's latency in NCCL's model, term by term, µs (tuning.cc; EP02 writes
    it out): (base + hops · (intra_steps · intra_hop + inter_steps · inter_hop)) · factor,
    where hops is 1 for a ring and 2 for a tree (up, then down), and factor the ring's
    plateau (``RING_PLATEAU``) or 1."""

    base: float
    intra_steps: int
    intra_hop: float  # with LL's x1.8 across nodes where it applies
    inter_steps: int
    inter_hop: float
    hops: int = 1
    factor: float = 1.0

    @property
    def hop_sum(self) -> float:
        """The latency before the plateau factor, µs."""
        if self.hops == 1:
            return self.base + self.intra_steps * self.intra_hop \
                + self.inter_steps * self.inter_hop
        return self.base + self.hops * (self.intra_steps * self.intra_hop
                                        + self.inter_steps * self.inter_hop)

    @property
    def micros(self) -> float:
        return self.hop_sum * self.factor if self.factor != 1.0 else self.hop_sum


@dataclass(frozen=True)
class TreeBandwidth:
    """A tree's bus bandwidth in NCCL's model, term by term (tuning.cc; EP02 step 6):
    min(min(bus · ``TREE_SHARE``, cap) · protocol, LL's cap) · correction, bytes/s. Its algorithm
    bandwidth is half of it (tuning.cc, "Convert bus BW to algorithm BW": ratio .5 for a
    tree): busBW counts each byte twice, up the tree (the reduce) and back down (the
    broadcast), as a ring's counts 2·(N−1)/N of it. The double tree's two trees keep both
    directions of every link busy; they do not halve the bandwidth."""

    bus: float  # the ring busBW of the links it crosses
    cap: float  # maxTreeBw: up to two nodes, more
    protocol: float  # 1 / 3.8 on LL, 1 on Simple
    correction: float  # treeCorrectionFactor at this size
    ll_cap: float | None = None  # current NCCL's cap on LL (``ll_cap``); None on Simple

    @property
    def uncapped(self) -> float:
        """The busBW before LL's cap and the correction, bytes/s."""
        return min(self.bus * TREE_SHARE, self.cap) * self.protocol

    @property
    def busbw(self) -> float:
        bw = self.uncapped
        return (bw if self.ll_cap is None else min(bw, self.ll_cap)) * self.correction


@dataclass(frozen=True)
class NcclTime:
    """One collective as NCCL would run it, on one GPU of the group."""

    seconds: float
    latency: float  # seconds of it that do not depend on the size
    algorithm: str  # "ring", "tree", "nvls", "pairwise" or "direct"
    protocol: str  # "LL", "LL128" or "Simple"
    busbw: float  # the bus bandwidth it runs at, bytes/s
    bottleneck: str  # the link id that bounds it
    nodes: int
    # A ring's or tree's latency and a tree's bandwidth term by term (EP02 writes them out).
    terms: Latency | None = None
    tree_bw: TreeBandwidth | None = None


def sm_share(cluster: Cluster) -> float:
    """The share of the GPU's SMs a collective's NCCL kernels hold while they run (module
    docstring); 0 where the GPU's SM count is not known."""
    kern = cluster.gpu.kernels
    return min(1.0, RING_CTAS / kern.sm_count) if kern else 0.0


def overlapped(comm: float, compute: float, share: float) -> float:
    """Seconds a collective of ``comm`` seconds run beside ``compute`` seconds of compute adds
    to it: what outlasts the compute, or the SMs it took from the compute it overlapped."""
    return max(comm - compute, share * min(comm, compute))


def spine_ring(cluster: Cluster, nodes: int) -> float:
    """How many times longer a ring's (or tree's) network hops take over ``nodes`` nodes of
    ``cluster`` (module docstring, "The leaf and the spine")."""
    leaf = cluster.leaf_nodes
    if leaf is None or nodes <= leaf:
        return 1.0
    return max(1.0, cluster.oversubscription / leaf)


def spine_share(cluster: Cluster, nodes: int) -> float:
    """The share of an all-to-all's network bytes, over ``nodes`` nodes placed leaf by leaf,
    bound for nodes under another leaf."""
    leaf = cluster.leaf_nodes
    if leaf is None or nodes <= leaf:
        return 0.0
    return (nodes - leaf) / (nodes - 1)


def spine_alltoall(cluster: Cluster, nodes: int) -> float:
    """How many times longer an all-to-all's network leg takes over ``nodes`` nodes: the
    leaf's uplinks asked for c·r times what they carry (module docstring)."""
    return max(1.0, spine_share(cluster, nodes) * cluster.oversubscription)


def _node_share(cluster: Cluster, g: int) -> float:
    """NICs a group with ``g`` members on a node owns (its share of the node's ports)."""
    return cluster.nics_per_node * min(g, cluster.gpus_per_node) / cluster.gpus_per_node


def send_latency(link) -> float:
    """Seconds one send waits before its bytes flow on ``link``: NCCL's Simple start-up
    (tuning.cc baseLat, 8.4 µs) plus one hop on the link's hardware (hwLat, 9.6 µs on the
    network, 3.4 on NVLink), as EP02 step 4 states them. The one send model: a pipeline send
    (EP05, ``labs.pipeline.lab.on_link``), EP08's stage sends and an all-to-all's peers all
    pay it, then move at ``link.send_bandwidth``."""
    return (BASE_LATENCY["ring"]["Simple"] + HOP_LATENCY[link.hw]["ring"]["Simple"]) * 1e-6


@lru_cache(maxsize=65536)
def nccl_time(kind: str, size: float, group: int, cluster: Cluster,
              per_node: int | None = None) -> NcclTime:
    """``kind`` on ``size`` bytes (the full tensor; per GPU for all-to-all and p2p) over
    ``group`` GPUs of ``cluster``, ``per_node`` of them on each node (None: packed into as few
    nodes as they fill)."""
    g = min(group, cluster.gpus_per_node if per_node is None else per_node,
            cluster.gpus_per_node)
    nodes = math.ceil(group / g)
    intra, inter = cluster.intra, cluster.inter
    if group <= 1 or size <= 0:
        return NcclTime(0.0, 0.0, "direct", "Simple", intra.ring_busbw, intra.id, nodes)
    if kind == "p2p":
        link = intra if nodes == 1 else inter
        lat, bw = send_latency(link), link.send_bandwidth
        return NcclTime(lat + size / bw, lat, "direct", "Simple", bw, link.id, nodes)
    if kind == "all_to_all":
        return pairwise((g - 1) / group * size, (group - g) / group * size, nodes, cluster)
    best = _ring(kind, size, group, g, nodes, cluster)
    if kind == "all_reduce" and nodes > 1:
        tree = _tree(size, g, nodes, cluster)
        if tree.seconds < best.seconds:
            best = tree
    return best


def pairwise(inside: float, outside: float, nodes: int, cluster: Cluster) -> NcclTime:
    """Sends to every peer at once, ``inside`` bytes over the scale-up link and ``outside``
    bytes out of the node (of a group over ``nodes`` nodes): both legs side by side after one
    Simple send's latency, the network leg at one NIC's rate (module docstring)."""
    intra, inter = cluster.intra, cluster.inter
    lat = send_latency(intra if nodes == 1 else inter)
    inside = inside / intra.send_bandwidth
    nic = inter.ring_busbw * min(1.0, cluster.nics_per_node / cluster.gpus_per_node)
    outside = outside / nic * spine_alltoall(cluster, nodes)
    bottleneck = inter.id if outside > inside else intra.id
    return NcclTime(lat + max(inside, outside), lat, "pairwise", "Simple",
                    nic if nodes > 1 else intra.send_bandwidth, bottleneck, nodes)


def ring_time(kind: str, size: float, group: int, cluster: Cluster,
              protocol: str) -> NcclTime:
    """``kind`` over ``group`` GPUs of ``cluster``, packed into nodes, as NCCL's model prices
    its ring on one ``protocol``, whatever algorithm it would pick: EP02 step 6 sets the ring
    it does not run (Simple, step 1's constants) beside the tree it does."""
    g = min(group, cluster.gpus_per_node)
    return _ring(kind, size, group, g, math.ceil(group / g), cluster, (protocol,))


def _ring(kind: str, size: float, n: int, g: int, nodes: int, cluster: Cluster,
          protocols: tuple[str, ...] = PROTOCOLS) -> NcclTime:
    intra, inter = cluster.intra, cluster.inter
    ar = kind == "all_reduce"
    nsteps = 2 * (n - 1) if ar else n - 1
    inter_steps = (2 * (nodes - 1) if ar else nodes - 1) if nodes > 1 else 0
    if nodes == 1:
        bus, link = intra.ring_busbw, intra.id
    else:
        across = inter.ring_busbw * _node_share(cluster, g) / spine_ring(cluster, nodes)
        bus, link = min(intra.ring_busbw, across), (inter.id if across < intra.ring_busbw
                                                    else intra.id)
    best = None
    for proto in protocols:
        if proto == "LL128" and (nodes > 1 or intra.hw != "nvlink"):
            continue  # tuning.cc enables LL128 by default on NVLink inside a node only
        bw, algo = bus, "ring"
        if proto == "LL":
            bw = min(bus / 4 if (ar or nodes > 1) else bus / 3, ll_cap(cluster, nodes))
        elif proto == "LL128":
            bw = LL128_SHARE * bus
        elif ar and nodes == 1 and n >= NVLS_MIN_RANKS and intra.allreduce_busbw > bus:
            bw, algo = intra.allreduce_busbw, "nvls"  # reduced in the switch
        intra_lat = HOP_LATENCY[intra.hw]["ring"][proto] * (
            MULTI_NODE_LL_INTRA if nodes > 1 and proto == "LL" else 1.0)
        plateau = proto == "Simple" and ar and nodes > 1 and size >= plateau_bytes(n)
        terms = Latency(BASE_LATENCY["ring"][proto], nsteps - inter_steps, intra_lat,
                        inter_steps, HOP_LATENCY[inter.hw]["ring"][proto],
                        factor=RING_PLATEAU if plateau else 1.0)
        lat = terms.micros
        t = lat * 1e-6 + size / (bw * n / nsteps)
        if best is None or t < best.seconds:
            best = NcclTime(t, lat * 1e-6, algo, proto, bw, link, nodes, terms)
    return best


def _tree(size: float, g: int, nodes: int, cluster: Cluster) -> NcclTime:
    intra, inter = cluster.intra, cluster.inter
    across = inter.ring_busbw * _node_share(cluster, g) / spine_ring(cluster, nodes)
    bus = min(intra.ring_busbw, across)
    link = inter.id if across < intra.ring_busbw else intra.id
    cap = TREE_CAP[0] if nodes <= 2 else TREE_CAP[1]
    log_size = max(0, int(size) >> 6).bit_length() - 1  # tuning.cc log2i(nBytes >> 6)
    best = None
    for proto in ("LL", "Simple"):  # LL128 is off across nodes (see _ring)
        corrections = TREE_CORRECTION[proto]
        tree_bw = TreeBandwidth(bus, cap, TREE_LL if proto == "LL" else 1.0,
                                corrections[log_size] if log_size < len(corrections) else 1.0,
                                ll_cap(cluster, nodes) if proto == "LL" else None)
        bw = tree_bw.busbw
        intra_lat = HOP_LATENCY[intra.hw]["tree"][proto] * (
            MULTI_NODE_LL_INTRA if proto == "LL" else 1.0)
        terms = Latency(BASE_LATENCY["tree"][proto], g - 1, intra_lat, nodes.bit_length() - 1,
                        HOP_LATENCY[inter.hw]["tree"][proto], hops=2)
        lat = terms.micros
        t = lat * 1e-6 + size / (bw / 2)
        if best is None or t < best.seconds:
            best = NcclTime(t, lat * 1e-6, "tree", proto, bw, link, nodes, terms, tree_bw)
    return best
