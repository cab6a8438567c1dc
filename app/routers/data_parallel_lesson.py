"""EP02 Data parallelism's lesson: the states its steps link to and quote (``facts``) and the
derivations their whys write out (``hierarchical``, ``nccl_terms``, ``ring_steps``,
``TREE_CONSTANTS``, ``crossover_as_printed``, ``socket_bound``)."""

from functools import lru_cache

from app.charts.data_parallel import STEP_STATES, STRONG_GPUS
from app.charts.units import tflops
from app.labkit import lesson_state
from app.routers.data_parallel_state import DataParallelQuery, run, to_api
from labs.data_parallel.inputs import DataParallelPoint
from labs.data_parallel.lab import (
    GPUS_PER_SERVER,
    data_parallel_point,
    gpu_rate,
    nccl_all_reduce,
    timed_gpu,
)
from labs.hardware.links import get_link
from labs.hardware.nccl import NcclTime
from labs.hardware.nccl_constants import (
    BASE_LATENCY,
    HOP_LATENCY,
    MULTI_NODE_LL_INTRA,
    SOCKET_LINK,
    TREE_CAP,
    TREE_LL,
    TREE_SHARE,
)


@lru_cache(maxsize=1)
def facts() -> dict:
    """The states the lesson's steps link to, with the figures their prose quotes (run
    through the same query model, lab and ``to_api`` as GET /api/dp)."""
    state = lesson_state(DataParallelQuery, run, to_api)

    eth = {"gpus": 64, "link": "eth-100g"}
    ib1024 = {"gpus": 1024, "link": "ib-ndr", "nics_per_node": 8, "overlap": "bucketed"}
    return {
        "one": state(gpus=1),
        "good": state(gpus=8, link="nvlink-4"),
        "bad": state(**eth),
        # Step 1 asks a GPU count neither the opening state nor a case button shows; its
        # links are on InfiniBand, whose figures no later step asks (on Ethernet, step 3's,
        # the time chart and the chosen point were veiled: round-14 cold reading, finding 3).
        "ib16": state(gpus=16, link="ib-ndr"),
        "pcie8": state(gpus=8, link="pcie-4"),
        # Round-2 cold reading: the page opens at "good", so steps 2 and 8 ask about a state
        # it does not print (one sequence a GPU).
        "good1": state(**STEP_STATES["step-2"]),
        "pcie8_1": state(gpus=8, link="pcie-4", micro_batch=1),
        # Step 10 (round-12 cold reading, finding 1): a model and a sequence the opening
        # replica chart does not hold in a x k relation (its 7B at 8 sequences was the chart
        # doubled), its shape stated in the predict.
        "l8_1024": state(model="llama-3.1-8b", gpus=1024, link="eth-100g", micro_batch=1,
                         seq_len=8192),
        "ib64": state(gpus=64, link="ib-ndr"),
        "ib64_8": state(**STEP_STATES["step-4"]),
        "eth1024": state(gpus=1024, link="eth-100g"),
        "bad_overlap": state(**STEP_STATES["step-5"]),
        "ib64_overlap": state(gpus=64, link="ib-ndr", nics_per_node=8, overlap="bucketed"),
        # Step 6: 1,024 GPUs as built (128 servers, 8 NDR ports each), where NCCL's cost model
        # picks a tree across servers for small buckets (labs.hardware.nccl).
        "ib1024_tiny": state(**{**STEP_STATES["step-6"], "link": "ib-ndr"}),
        "ib1024_ddp": state(**ib1024),
        "ib1024_big": state(**ib1024, bucket_bytes=524288000),
        # Steps 8-9: the crossover and gradient accumulation (64 x Ethernet is "bad").
        "acc4": state(**STEP_STATES["step-9"]),
        "acc16": state(**eth, microbatches=16),
        "acc4_16": state(gpus=16, link="eth-100g", microbatches=4),
        # Step 7: one global batch on 16 GPUs, then 8 times as many (round-17 cold reading,
        # finding 4: it compared 64 sequences on 64 GPUs with 1,024 on 8).
        **{f"strong{n}": state(**{**STEP_STATES["step-7"], "gpus": n}) for n in STRONG_GPUS},
        "l70": state(model="llama-3.1-70b", gpus=64, link="eth-100g"),
    }


def hierarchical(fact: dict) -> dict:
    """Step 3's hierarchical all-reduce at a state of whole servers: reduce-scatter inside
    each server over NVLink, all-reduce each GPU's shard across the servers, all-gather back
    (Horovod's; NCCL's tree is hierarchical the same way). Every shard crosses its server's
    ports: 2·(servers−1)/servers of the gradients, at their busBW, before any latency."""
    inp = fact["result"].input
    servers = inp.gpus // GPUS_PER_SERVER
    sent = 2 * (servers - 1) / servers * inp.grad_bytes
    return {"servers": servers, "bytes": sent,
            "seconds": sent / (inp.nics_per_node * get_link(inp.link).ring_busbw)}


def _nccl(fact: dict, bucket: bool = False, ring_protocol: str | None = None) -> NcclTime:
    """A fact's all-reduce (its whole gradients, or one full bucket) as NCCL's cost model
    prices it, term by term: the same collective its API answer times (or, with
    ``ring_protocol``, NCCL's ring on that protocol)."""
    inp = fact["result"].input
    size = min(inp.bucket_bytes, inp.grad_bytes) if bucket else inp.grad_bytes
    return nccl_all_reduce(size, inp.gpus, get_link(inp.link), inp.nics_per_node,
                           ring_protocol)


@lru_cache(maxsize=1)
def nccl_terms() -> dict:
    """The collectives steps 4 to 6 write out: step 4's ring over 8 servers, step 5's 25 MiB
    bucket on the same 64 GPUs, step 6's 1 MiB and 25 MiB buckets on 1,024 (NCCL's tree),
    and the ring NCCL does not run for the 1 MiB bucket, on Simple (step 4's constants) and
    on LL (step 6's note)."""
    f = facts()
    return {"ib64": _nccl(f["ib64"]), "bucket64": _nccl(f["bad_overlap"], bucket=True),
            # Step 5's InfiniBand aside: the protocol NCCL runs its 25 MiB bucket on, and its
            # ring on LL, which LL's cap makes slower (issue 36, error 7).
            "bucket64_ib": _nccl(f["ib64_overlap"], bucket=True),
            "bucket64_ib_ll": _nccl(f["ib64_overlap"], bucket=True, ring_protocol="LL"),
            "tiny": _nccl(f["ib1024_tiny"], bucket=True),
            "ddp": _nccl(f["ib1024_ddp"], bucket=True),
            "ring_tiny": _nccl(f["ib1024_tiny"], bucket=True, ring_protocol="Simple"),
            "ring_tiny_ll": _nccl(f["ib1024_tiny"], bucket=True, ring_protocol="LL")}


@lru_cache(maxsize=1)
def ring_steps() -> dict[str, DataParallelPoint]:
    """Step 6's 1 MiB buckets on 1,024 GPUs had NCCL run its ring (Simple, LL) instead of
    the tree its model picks: the same step (``labs.data_parallel.lab.data_parallel_point``),
    every bucket timed as that ring."""
    inp = facts()["ib1024_tiny"]["result"].input
    return {proto: data_parallel_point(inp, inp.gpus, inp.link, ring_protocol=proto)
            for proto in ("Simple", "LL")}


# NCCL 2.8's tree constants step 6's note states (tuning.cc, labs.hardware.nccl).
TREE_CONSTANTS = {
    "base_ll": BASE_LATENCY["tree"]["LL"], "nvlink_ll": HOP_LATENCY["nvlink"]["tree"]["LL"],
    "net_ll": HOP_LATENCY["net"]["tree"]["LL"], "ll_intra": MULTI_NODE_LL_INTRA,
    "nvlink_simple": HOP_LATENCY["nvlink"]["tree"]["Simple"],
    "net_simple": HOP_LATENCY["net"]["tree"]["Simple"], "share": TREE_SHARE,
    "cap_two": TREE_CAP[0] / 1e9, "cap_more": TREE_CAP[1] / 1e9, "ll": 1 / TREE_LL,
}


def crossover_as_printed(gpus: int, link_id: str) -> float:
    """T* = ⅔ × (N−1)/N × rate ÷ busBW at the rate and busBW as the page prints them (the
    rate of the GPU the link is timed with, ``timed_gpu``: the H100 PCIe's 515.3 TFLOP/s on
    PCIe; 26.24 GB/s): the worked line's own result, so its arithmetic checks. The lab's T*
    (``compute_to_comm``) also counts NCCL's latency in the all-reduce: a token or two more."""
    link = get_link(link_id)
    busbw = round(link.ring_busbw / 1e9, 2) * 1e9
    return 2 / 3 * (gpus - 1) / gpus * tflops(gpu_rate(timed_gpu(link))) * 1e12 / busbw



def socket_bound(api: dict, host: str = "zen3-4") -> dict:
    """The PCIe speedup with the all-reduce at the socket link's rate alone (NCCL's topo.h,
    ``SOCKET_LINK``): the bytes each GPU sends ÷ that link, against the same compute. The host
    is AMD Zen 3's, a PCIe 4.0 host that runs the H100 PCIe at Gen4 as the preset times it;
    Sapphire Rapids is PCIe 5.0, where the card runs at Gen5 (fix E, finding 1)."""
    comm_s = api["allreduce_bytes_per_gpu"] / SOCKET_LINK[host]
    gpus = api["gpus"]
    return {"rate": SOCKET_LINK[host], "comm_s": comm_s,
            "speedup": gpus * api["compute_s"] / (api["compute_s"] + comm_s)}
