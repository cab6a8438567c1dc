"""Interconnect links and clusters, as data (``labs/presets/links.json``, ``clusters.json``).

A link is a per-GPU (scale-up) or per-port (scale-out) bandwidth per direction with a
latency α; every preset cites its datasheet or standard. A cluster is a GPU preset x GPUs per
node x the intra-node link x the inter-node link (and how many inter-node ports a node has).
``gpu_cluster`` builds the cluster a GPU preset's own datasheet fields describe
(``scale_up_bandwidth``, ``network_bandwidth``, ``scale_up_domain``), one port per GPU.
Latencies are a few microseconds, NCCL's order of magnitude per ring step (NCCL docs,
"NCCL_PROTO"/LL protocol; measured small-message all-reduce latencies are 5-20 µs).

Beside its datasheet bandwidth a link carries what NCCL achieves on it, measured (nccl-tests
"bus bandwidth", doc/PERFORMANCE.md): ``busbw`` for ring collectives, ``busbw_allreduce`` where
the switch reduces (NVLink SHARP, NCCL's NVLS), ``p2p_bandwidth`` for send/recv, and
``nccl_hw``, the row of NCCL's per-hop latencies it takes (``labs.hardware.nccl``). A link
without a ring measurement takes the measured fraction of a link of its kind, rounded to the
two places a page states: ``UNMEASURED_SCALE_UP`` (0.82, NVLink 4's measured 367.6 of 450
GB/s = 0.817), ``UNMEASURED_SCALE_OUT`` (0.96, a ConnectX-7's 48 of 50). The presets with no
ring measurement (NVLink 5, NVL72, Infinity Fabric, PCIe) carry no ``busbw`` of their own, so
the page's "0.82 of 32 GB/s" and the engine's 26.24 GB/s are one computation.

One physical link has one achieved figure: a GPU preset's own node (``gpu_cluster``, built
from its datasheet fields) takes its scale-up link's achieved figures from the link preset
its GPUs talk over (``peer_links``: NVLink 4 for an H100, PCIe 4.0 for an RTX 4090), so an
H100's own NVLink in EP03 and EP09 is the NVLink 4 that EP02 and EP04 choose by name: its ring
busBW, send/recv rate and NCCL latency row. The in-switch all-reduce (NVLS) stays with the
presets that name it: the own node's all-reduce is the ring, as the labs that build it (EP03's
T* = ... ÷ busBW) state. A GPU no preset describes (a custom one whose datasheet bandwidth
differs) keeps the datasheet link at ``UNMEASURED_*``.

A vendor's scale-up fabric ships only with its own GPUs (``Link.gpus``: NVLink 3 with the A100,
NVLink 4 with the H100 and H200 and the H800's cut-down NVLink 4 with the H800, NVLink 5 and
the GB200 NVL72 rack with Blackwell, Infinity Fabric with the MI300X; the NVIDIA and AMD
datasheets each preset cites). ``check_pairing`` refuses a GPU on a fabric it never ships
with, naming both controls, so no lab times one GPU's compute on another's fabric; PCIe,
InfiniBand and Ethernet take any GPU.

Between the GPUs of one node a GPU talks over the scale-up link it ships with
(``peer_links``): a GPU some vendor fabric lists is an SXM or OAM module on that fabric's
board, where PCIe is only its link to the host CPUs and NICs (``GPUSpec.host_link``); a GPU no
fabric lists is a PCIe card, whose peers talk over its own PCIe generation (or an older one: a
Gen5 card runs at Gen4 in a PCIe 4.0 host). EP04 refuses a TP group on any other scale-up link,
and EP02 a data-parallel group (``check_peer_link``: TP or DP over PCIe between H100 SXMs does
not ship; EP02 times the H100 PCIe there). The other labs keep ``check_pairing``: EP03 puts
H100s' optimiser states on PCIe as the path to the host or a counterfactual network, which it
may.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from labs.core.data import Presets, read
from labs.core.errors import LabInputError
from labs.core.limits import MAX_OVERSUBSCRIPTION
from labs.core.validate import is_int
from labs.hardware.gpus import GPUSpec, get_gpu
from labs.hardware.gpus import gpus as _gpus

LINK_KINDS = ("scale-up", "scale-out")
SCALE_UP_LATENCY = 3e-6  # s, used when a GPU preset's own links are asked for
SCALE_OUT_LATENCY = 5e-6
# NCCL's hardware rows (NVIDIA/nccl src/graph/tuning.cc hwLat: NVLink, PCI, network).
NCCL_HW = ("nvlink", "pcie", "net")
# A link with no measurement of its own achieves what a measured one of its kind does,
# rounded to the two places the pages state (so "0.82 of 32 GB/s" is the engine's figure):
# scale-up, the 8 x H200 ring all-reduce with NVLS off, 367.6 of NVLink 4's 450 GB/s = 0.817
# (stas00/ml-engineering network/benchmarks/results/all-reduce-8xH200.md); scale-out, a
# ConnectX-7's 48 of 50 GB/s = 0.96 (NVIDIA NCCL team, NVIDIA/nccl-tests#267).
# (tests/labs/test_links_one_figure.py holds the first to the nvlink-4 preset's figures.)
UNMEASURED_SCALE_UP = 0.82
UNMEASURED_SCALE_OUT = 48 / 50


@dataclass(frozen=True)
class Link:
    id: str
    name: str
    kind: str  # "scale-up" (inside a node) | "scale-out" (between nodes)
    bandwidth: float  # bytes/s per direction, per GPU (scale-up) or per port (scale-out)
    latency: float  # seconds, α of the α–β model
    source: str
    domain: int | None = None  # most GPUs one scale-up fabric connects
    # What NCCL achieves on it, bytes/s per GPU (None: UNMEASURED_* x bandwidth).
    busbw: float | None = None  # ring all-gather / reduce-scatter / all-reduce bus bandwidth
    busbw_allreduce: float | None = None  # all-reduce in the switch (NVLS); None: busbw
    p2p_bandwidth: float | None = None  # send/recv between two GPUs; None: busbw
    nccl_hw: str | None = None  # NCCL_HW row; None: nvlink (scale-up) or net (scale-out)
    achieved_source: str = ""
    gpus: tuple[str, ...] = ()  # the GPU presets this fabric ships with (empty: any GPU)

    def __post_init__(self) -> None:
        if self.kind not in LINK_KINDS:
            raise LabInputError("link", f"{self.id}: kind must be one of {LINK_KINDS}")
        for name in ("bandwidth", "latency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise LabInputError("link", f"{self.id}: {name} must be a positive number")
        if not self.source:
            raise LabInputError("link", f"{self.id}: every link preset cites a source")
        for name in ("busbw", "busbw_allreduce", "p2p_bandwidth"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(
                    value, int | float) or not value > 0):
                raise LabInputError("link", f"{self.id}: {name} must be a positive number")
        if (self.busbw is not None or self.busbw_allreduce is not None) \
                and not self.achieved_source:
            raise LabInputError("link", f"{self.id}: a measured busbw cites its source")
        if self.nccl_hw is not None and self.nccl_hw not in NCCL_HW:
            raise LabInputError("link", f"{self.id}: nccl_hw must be one of {NCCL_HW}")

    @property
    def ring_busbw(self) -> float:
        """Achieved bus bandwidth of a ring collective on this link, bytes/s per GPU."""
        if self.busbw is not None:
            return self.busbw
        return self.bandwidth * (UNMEASURED_SCALE_UP if self.kind == "scale-up"
                                 else UNMEASURED_SCALE_OUT)

    @property
    def allreduce_busbw(self) -> float:
        """Achieved all-reduce bus bandwidth (in-switch reduction where measured)."""
        return self.busbw_allreduce if self.busbw_allreduce is not None else self.ring_busbw

    @property
    def send_bandwidth(self) -> float:
        """Achieved send/recv bandwidth between two GPUs on this link."""
        return self.p2p_bandwidth if self.p2p_bandwidth is not None else self.ring_busbw

    @property
    def hw(self) -> str:
        """Which of NCCL's per-hop latency rows this link takes."""
        if self.nccl_hw is not None:
            return self.nccl_hw
        return "nvlink" if self.kind == "scale-up" else "net"

    @property
    def achieved_note(self) -> str:
        """Where the achieved figures come from."""
        if self.achieved_source:
            return self.achieved_source
        share = UNMEASURED_SCALE_UP if self.kind == "scale-up" else UNMEASURED_SCALE_OUT
        return (f"no measurement: {share:.0%} of the datasheet assumed, what a measured "
                f"{self.kind} link achieves (labs.hardware.links.UNMEASURED_*)")


@dataclass(frozen=True)
class Cluster:
    id: str
    name: str
    gpu: GPUSpec
    gpus_per_node: int
    intra: Link
    inter: Link
    nics_per_node: int
    source: str
    # The network's shape above the NICs (``labs.hardware.nccl``, "The leaf and the spine"):
    # how many nodes one leaf switch's ports reach (None: one switch tier, every node under
    # it), and the leaf-to-spine oversubscription (downlink : uplink bandwidth; 1 = a full
    # fat tree).
    leaf_nodes: int | None = None
    oversubscription: float = 1.0

    def __post_init__(self) -> None:
        for name in ("gpus_per_node", "nics_per_node"):
            value = getattr(self, name)
            if not is_int(value) or value < 1:
                raise LabInputError(name, f"{self.id}: {name} must be a whole number >= 1")
        if self.leaf_nodes is not None and (not is_int(self.leaf_nodes) or self.leaf_nodes < 1):
            raise LabInputError("leaf_nodes", "a leaf switch reaches a whole number >= 1 of "
                                              "nodes")
        if (isinstance(self.oversubscription, bool)
                or not isinstance(self.oversubscription, int | float)
                or not 1 <= self.oversubscription <= MAX_OVERSUBSCRIPTION):
            raise LabInputError("oversubscription", "the leaf-to-spine oversubscription is "
                                                    f"from 1 to {MAX_OVERSUBSCRIPTION:g} (1:1 "
                                                    "is a full fat tree)")
        if self.intra.domain is not None and self.gpus_per_node > self.intra.domain:
            raise LabInputError("gpus_per_node", f"{self.id}: {self.intra.name} connects at "
                                                 f"most {self.intra.domain} GPUs")

    @property
    def node_bandwidth(self) -> float:
        """Bytes/s per direction leaving one node: its ports x the inter-node link."""
        return self.nics_per_node * self.inter.bandwidth


def with_network(cluster: Cluster, leaf_nodes: int | None,
                 oversubscription: float = 1.0) -> Cluster:
    """``cluster`` under a leaf-spine network: ``leaf_nodes`` nodes per leaf switch (per rail
    where the fabric is rail-optimised), ``oversubscription`` : 1 from leaf to spine."""
    return replace(cluster, leaf_nodes=leaf_nodes, oversubscription=oversubscription)


def _clusters() -> dict[str, Cluster]:
    out = {}
    for e in read("clusters.json"):
        out[e["id"]] = Cluster(
            id=e["id"], name=e["name"], gpu=get_gpu(e["gpu"]), gpus_per_node=e["gpus_per_node"],
            intra=get_link(e["intra_link"]), inter=get_link(e["inter_link"]),
            nics_per_node=e["nics_per_node"], source=e["source"])
    return out


LINKS = Presets(lambda: {e["id"]: Link(**{**e, "gpus": tuple(e.get("gpus", ()))})
                         for e in read("links.json")}, "link", "link")
CLUSTERS = Presets(_clusters, "cluster", "cluster")


def links() -> dict[str, Link]:
    return LINKS.all()


def link_name(link_id: str) -> str:
    """The name a page shows for a link (its preset's), never its id; an id that names no
    preset (a part with no link) as it is."""
    link = links().get(link_id)
    return link.name if link else link_id


def clusters() -> dict[str, Cluster]:
    return CLUSTERS.all()


def get_link(link_id: str) -> Link:
    return LINKS.get(link_id)


def ships_with(gpu: GPUSpec, link: Link) -> bool:
    """Whether ``gpu`` is ever built on ``link`` (a vendor fabric: only its own GPUs)."""
    return not link.gpus or gpu.id in link.gpus


def own_fabric(gpu: GPUSpec) -> str:
    """The scale-up link preset a GPU ships with: its vendor fabric (the first in preset order:
    NVLink 4 for an H100, NVLink 5 for a B200), or PCIe for a GPU sold without one."""
    up = [k for k, x in links().items() if x.kind == "scale-up" and ships_with(gpu, x)]
    return next((k for k in up if links()[k].gpus), peer_links(gpu)[0])


# A fabric that ships with a GPU no preset describes, timed with its nearest preset's (round-20
# cold reading P, finding 1: an NVL72 rack ships with GB200 superchips, never HGX B200 boards).
SHIPS_WITH = {"nvl72": "GB200 (Grace + 2 Blackwell GPUs)"}


def _never(link: Link, gpu: GPUSpec, holds: str) -> str:
    """The refusal's first words: what ``link`` ships with, never ``gpu``."""
    if link.id not in SHIPS_WITH:
        return f"{link.name} ships only with the {holds}, never the {gpu.name}"
    return (f"{link.name} ships only with the {SHIPS_WITH[link.id]}, never the {gpu.name}; "
            f"the lab times it with its nearest preset, the {holds}")


def check_pairing(gpu: GPUSpec, link: Link, link_field: str, gpu_field: str = "gpu") -> None:
    """Refuse a GPU on a fabric it never ships with (module docstring): a LabInputError on
    ``link_field`` that also names ``gpu_field``, saying which GPUs the fabric holds and which
    fabrics the GPU ships with."""
    if ships_with(gpu, link):
        return
    holds = " or ".join(get_gpu(g).name for g in link.gpus)
    own = [x.name for x in links().values() if x.gpus and gpu.id in x.gpus]
    choose = ", ".join([*own, "PCIe, InfiniBand or Ethernet"])
    raise LabInputError(link_field, f"GPU and link do not match: {_never(link, gpu, holds)}. "
                                    f"Choose the {holds}, or a link the {gpu.name} has: "
                                    f"{choose}.",
                        also=(gpu_field,))


def peer_links(gpu: GPUSpec) -> tuple[str, ...]:
    """The scale-up links the GPUs of one node talk to each other over, as ``gpu`` ships
    (module docstring): its vendor fabrics, or for a PCIe card its own PCIe generation first,
    then any older one (PCIe is backward compatible: the H100 PCIe, a Gen5 card, runs at Gen4
    in a PCIe 4.0 host; the RTX 4090, a Gen4 card, never at Gen5)."""
    own = tuple(k for k, x in links().items() if x.kind == "scale-up" and gpu.id in x.gpus)
    if own:
        return own
    host = get_link(gpu.host_link)
    return (host.id, *(k for k, x in links().items() if k != host.id and x.kind == "scale-up"
                       and not x.gpus and x.hw == host.hw and x.bandwidth < host.bandwidth))


def check_peer_link(gpu: GPUSpec, link: Link, link_field: str, gpu_field: str = "gpu") -> None:
    """Refuse the GPUs of one node talking over a scale-up ``link`` they never ship with
    (``peer_links``): a LabInputError on ``link_field`` that also names ``gpu_field``, saying
    what the GPU's peers talk over and what to choose."""
    if link.kind != "scale-up" or link.id in peer_links(gpu):
        return
    own = " or ".join(get_link(k).name for k in peer_links(gpu))
    if link.gpus:  # another vendor's fabric
        holds = " or ".join(get_gpu(g).name for g in link.gpus)
        raise LabInputError(link_field, f"GPU and link do not match: "
                                        f"{_never(link, gpu, holds)}. Choose the {holds}, or "
                                        f"the {gpu.name}'s own: {own}.",
                            also=(gpu_field,))
    if any(links()[k].gpus for k in peer_links(gpu)):
        cards = [g.name for g in _gpus().values()
                 if link.id in peer_links(g) and not links()[peer_links(g)[0]].gpus]
        other = f", or a GPU sold as a PCIe card: the {' or '.join(cards)}" if cards else ""
        raise LabInputError(link_field, f"GPU and link do not match: the {gpu.name} is a module "
                                        f"on a board whose GPUs talk over {own}; "
                                        f"{link.name} only joins each GPU to its host, never "
                                        f"the GPUs to each other. Choose {own}{other}.",
                            also=(gpu_field,))
    raise LabInputError(link_field, f"GPU and link do not match: the {gpu.name} is a "
                                    f"{own} card, so its GPUs talk over {own}, never "
                                    f"{link.name}. Choose {own}.", also=(gpu_field,))


def paired_cluster(gpu: GPUSpec, gpus_per_node: int, intra: Link, inter: Link,
                   nics_per_node: int | None = None, intra_field: str = "intra_link") -> Cluster:
    """``make_cluster`` for a GPU and links a student chose: a node of more than one GPU on a
    fabric the GPU never ships with is refused (``check_pairing``)."""
    if gpus_per_node > 1:
        check_pairing(gpu, intra, intra_field)
    return make_cluster(gpu, gpus_per_node, intra, inter, nics_per_node)


def get_cluster(cluster_id: str) -> Cluster:
    return CLUSTERS.get(cluster_id)


def make_cluster(gpu: GPUSpec, gpus_per_node: int, intra: Link, inter: Link,
                 nics_per_node: int | None = None) -> Cluster:
    """A cluster from its parts (a port per GPU unless ``nics_per_node`` says otherwise)."""
    nics = gpus_per_node if nics_per_node is None else nics_per_node
    return Cluster(id=f"{gpu.id}x{gpus_per_node}-{intra.id}-{inter.id}-{nics}nic",
                   name=f"{gpus_per_node} x {gpu.name}, {intra.name}, {nics} x {inter.name}",
                   gpu=gpu, gpus_per_node=gpus_per_node, intra=intra, inter=inter,
                   nics_per_node=nics, source=f"{gpu.source}; {intra.source}; {inter.source}")


def gpu_cluster(gpu: GPUSpec) -> Cluster:
    """The node a GPU preset's datasheet describes: ``scale_up_domain`` GPUs on its scale-up
    link (``scale_up_bandwidth``), one ``network_bandwidth`` port per GPU. The scale-up link
    achieves what the preset its GPUs talk over does on a ring (``peer_links``; module
    docstring: one physical link, one figure) when the datasheet names that link's bandwidth."""
    intra = Link(f"{gpu.id}-scale-up", f"the {gpu.name}'s scale-up link", "scale-up",
                 gpu.scale_up_bandwidth, SCALE_UP_LATENCY, gpu.source, gpu.scale_up_domain)
    fabric = links().get(peer_links(gpu)[0])
    if fabric is not None and fabric.bandwidth == intra.bandwidth:
        # Named after the fabric it is (round-23 cold reading P, finding 10: /api/zero's
        # cluster read "8 x NVIDIA H100 SXM 80GB, NVIDIA H100 SXM 80GB scale-up, ...").
        intra = replace(intra, name=fabric.name, busbw=fabric.ring_busbw,
                        p2p_bandwidth=fabric.p2p_bandwidth,
                        nccl_hw=fabric.hw,
                        achieved_source=f"{fabric.name}'s: {fabric.achieved_note}")
    inter = Link(f"{gpu.id}-network", f"{gpu.name} network port", "scale-out",
                 gpu.network_bandwidth, SCALE_OUT_LATENCY, gpu.source)
    return Cluster(id=f"{gpu.id}-node", name=f"{gpu.scale_up_domain} x {gpu.name}", gpu=gpu,
                   gpus_per_node=gpu.scale_up_domain, intra=intra, inter=inter,
                   nics_per_node=gpu.scale_up_domain, source=gpu.source)


def node_cluster(gpu: GPUSpec) -> Cluster:
    """The node a GPU sits in when a lab names only the GPU: its node preset
    (``presets/clusters.json``, the first listed), else the node its datasheet describes
    (``gpu_cluster``)."""
    found = [c for c in CLUSTERS.all().values() if c.gpu.id == gpu.id]
    return found[0] if found else gpu_cluster(gpu)


def link_alone(gpu: GPUSpec, link: Link, group: int) -> Cluster:
    """A group of ``group`` GPUs on one link alone: a scale-up link puts them in one node of
    ``group``; a scale-out link puts each in its own node, one port each."""
    if link.kind == "scale-up":
        return make_cluster(gpu, max(1, group), link, get_link("ib-ndr"))
    return make_cluster(gpu, 1, get_link("nvlink-4"), link, 1)
