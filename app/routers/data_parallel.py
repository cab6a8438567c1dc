"""EP02 Data parallelism: speedup per link against GPU count, where a step's time goes, and
the replica every GPU still holds. Its controls, run and answers are
``data_parallel_state.py``, the lesson's states (``facts``) and the derivations their whys
write out ``data_parallel_lesson.py``; here the page context, cases, drills and view."""

from fastapi import APIRouter

from app.charts.data_parallel import (
    ALLREDUCE_WHAT,
    PCIE_DRILL,
    STEP3,
    STEP3_LINK,
    STEP3_MASK,
    algorithm_keys,
    allreduce_keys,
    crossover_keys,
    crossover_what,
    replica_keys,
    sent_keys,
    speed_keys,
    step3_state,
    waits,
)
from app.charts.data_parallel_scaling import FAMILY_COLOURS, curve_names
from app.charts.data_parallel_time import PARTS, crossover_inputs
from app.charts.memory import COMPONENTS
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, Drill, LabView, Mistake, register
from app.lesson_drills import LESSON_DRILLS
from app.model_controls import model_choices
from app.options import model_options, with_value
from app.routers.data_parallel_lesson import (
    TREE_CONSTANTS,
    crossover_as_printed,
    facts,
    hierarchical,
    nccl_terms,
    ring_steps,
    socket_bound,
)
from app.routers.data_parallel_state import (
    BUCKET_CHOICES,
    DEFAULT_GRAD_BYTES,
    GPU_CHOICES,
    GRAD_CHOICES,
    MICRO_CHOICES,
    MICROBATCH_CHOICES,
    SEQ_CHOICES,
    DataParallelQuery,
    figures,
    is_custom,
    link_names,
    run,
    to_api,
)
from app.routers.memory_lesson import own_layer
from app.schemas import DataParallelAnswer
from labs.data_parallel.inputs import DDP_BUCKET_BYTES
from labs.data_parallel.lab import (
    CURVE_LINKS,
    SERVER_GPU,
    all_reduce,
    link_family,
    timed_gpu,
)
from labs.hardware.gpus import get_gpu
from labs.hardware.kernels import SLOWEST_GPU
from labs.hardware.links import get_link, links
from labs.hardware.nccl import current_nccl, plateau_bytes, simple_ring_latency
from labs.hardware.nccl_constants import (
    BASE_LATENCY,
    HOP_LATENCY,
    LL_MAX_ACROSS,
    SOCKET_LINK,
)

router = APIRouter()


def _mb(value: float) -> str:
    return f"{value / 1e6:,.1f} MB" if value < 1e9 else f"{value / 1e9:,.0f} GB"


def bucket_label(value: float) -> str:
    """A bucket size as the steps name it, in MiB (DDP's bucket_cap_mb counts MiB), the MB in
    brackets: "25 MiB (26.2 MB; DDP default)". A size that is no whole MiB reads in MB or GB
    (round-21 cold reading P, finding 18: the menu read 1.0, 26.2 and 524.3 MB beside steps 5
    and 6's 1, 25 and 500 MiB)."""
    mib, default = value / 2**20, "; DDP default" if value == DDP_BUCKET_BYTES else ""
    if value >= 1e9 or mib != int(mib):
        return _mb(value) + default.replace("; ", " (", 1) + (")" if default else "")
    return f"{int(mib):,} MiB ({value / 1e6:.3g} MB{default})"  # 1.05 MB, not 1.0




def extra_context(state) -> dict:
    query = state.query
    return {
        "facts": facts(),
        "busbw": {"pcie": get_link("pcie-4"), "nvlink": get_link("nvlink-4"),
                  "ib": get_link("ib-ndr"), "eth": get_link("eth-100g")},
        # Step 2 names the two measured factors of the achieved share; step 1 NCCL's ring
        # latencies on its Simple protocol (tuning.cc, labs.hardware.nccl).
        "kernels": get_gpu(SERVER_GPU).kernels,
        # PCIe is timed on the H100 sold as a PCIe card (round-21 cold reading P, finding 1):
        # steps 1, 2 and 8 name it and its figures, measured or assumed.
        "pcie_gpu": timed_gpu(get_link("pcie-4")),
        # ... and the socket link an 8-card server's ring crosses, which its busBW leaves out
        # (NCCL's topo.h; round-22 cold reading P, finding 11): step 1 says which way it errs.
        "socket": SOCKET_LINK,
        # Step 2's note nets the socket link against the clock (round-23 cold reading P, 5).
        "socket_pcie8": socket_bound(facts()["pcie8"]["api"]),
        # EP08 (and every op-by-op lesson) also times the slowest GPU of a node; step 2 says
        # this episode leaves that factor out (labs.hardware.kernels.SLOWEST_GPU).
        "slowest_gpu": SLOWEST_GPU,
        "ring_lat": simple_ring_latency(),
        # Steps 4 to 6 write NCCL's latency (and the tree's bandwidth) out term by term.
        "nccl": nccl_terms(), "tree_consts": TREE_CONSTANTS, "nccl_now": current_nccl(),
        "ll_cap": LL_MAX_ACROSS,
        # Step 10's 34·s·h is GPT's layer; EP01 step 3 counts the 8B's own (round 18, E 8).
        "own_8b": own_layer(facts()["l8_1024"]["result"].input.model),
        # Step 8's worked T* from its printed rate and busBW (8 GPUs on PCIe).
        "cross_printed": crossover_as_printed(8, "pcie-4"),
        # Step 6 sets the ring NCCL does not run beside the tree it does, and says from what
        # size its ring pays the plateau.
        "ring_steps": ring_steps(), "plateau_1024": plateau_bytes(facts()["ib1024_tiny"][
            "params"]["gpus"]),
        "model_options": (("custom", "Custom gradient size…"),
                          *model_choices(model_options(), query.model or "", custom=False)),
        "model_value": "custom" if is_custom(query) else query.model,
        "grad_value": round(query.grad_bytes if query.grad_bytes is not None else
                            DEFAULT_GRAD_BYTES),
        "grad_options": [(round(v), f"{v / 1e9:,.0f} GB") for v in GRAD_CHOICES],
        "link_options": [(i, f"{link.name}, {link.bandwidth / 1e9:g} GB/s")
                         for i, link in links().items()],
        "gpu_options": [(n, f"{n:,}") for n in with_value(GPU_CHOICES, query.gpus)],
        "micro_options": [(v, f"{v:,}") for v in with_value(MICRO_CHOICES, query.micro_batch)],
        "microbatch_options": [(v, f"{v:,}") for v in
                               with_value(MICROBATCH_CHOICES, query.microbatches)],
        "seq_options": [(v, f"{v:,}") for v in with_value(SEQ_CHOICES, query.seq_len)],
        "bucket_options": [(round(v), bucket_label(v)) for v in
                           with_value(BUCKET_CHOICES, query.bucket_bytes)],
        "parts": PARTS, "components": COMPONENTS,
        # Step 3's all-reduce (100 Gb/s Ethernet) waits on the lesson for its guess: the
        # Ethernet row at every state, the bench's all-reduce figures at an Ethernet state.
        "step3": STEP3, "step3_link": STEP3_LINK, "step3_mask": STEP3_MASK,
        "step3_state": step3_state(state.result),
        # Step 3: a hierarchical all-reduce still sends its bytes through the one port.
        "hier": hierarchical(facts()["bad"]),
        # The crossover's note and T* wait for the step it answers (step 3's, step 8's).
        # Its note also prints the bytes a GPU sends (step 1's at its state).
        "cross_inputs": crossover_inputs(state.result.ratio, state.result.input.gpus),
        "cross_keys": " ".join(keys := (*crossover_keys(state.result),
                                        *sent_keys(state.result))),
        "cross_mask": waits(crossover_what(state.result, keys), keys) if keys else "",
        # A drill's state (or step 1's, step 10's): what answers it waits for it.
        "ar_keys": allreduce_keys(state.result), "sent_keys": sent_keys(state.result),
        "replica_keys": replica_keys(state.result),
        "algo_keys": {k: " ".join(v) for k, v in algorithm_keys(state.result).items()},
        "row_keys": {link: " ".join(speed_keys(state.result, link))
                     for link in state.result.curve_links},
        # The state's speedup and efficiency (the verdict, the readout): on one port a server
        # across servers they wait for step 3 as well (speed_keys).
        "speed_keys": " ".join(speed_keys(state.result)),
        "ar_mask": waits(ALLREDUCE_WHAT, allreduce_keys(state.result)),
        "link_colours": {i: FAMILY_COLOURS[link_family(link)] for i, link in links().items()},
        "link_names": link_names(), "curve_links": CURVE_LINKS,
        # The table's rows as the chart's curves: a curve on other GPUs says so (PCIe's).
        "curve_names": curve_names(state.result, link_names()),
        # The scale-up links the chart draws, with the most GPUs each joins: their curves stop
        # there (labs.data_parallel.lab.curve_counts).
        "scale_up_curves": [(links()[i].name, links()[i].domain) for i in CURVE_LINKS
                            if links()[i].kind == "scale-up" and links()[i].domain],
    }


# The drill: an 8B model's bf16 gradients on 8 GPUs over PCIe. Not the lesson's 14 GB: step 2
# links 8 GPUs on PCIe with 14 GB, whose time chart would show the answer before it is asked.
DRILL_GPUS, DRILL_GRAD = PCIE_DRILL["gpus"], PCIE_DRILL["grad_bytes"]


def drill_answer() -> float:
    """ms for one ring all-reduce of 16 GB over 8 GPUs on PCIe 4.0 x16, as the lab times it."""
    return 1e3 * all_reduce(DRILL_GRAD, DRILL_GPUS, get_link("pcie-4")).seconds


def _drill_inputs() -> dict[str, float]:
    """What the drill states: the link's datasheet bandwidth, NCCL's achieved bus bandwidth on
    it (nccl-tests' busBW, ``Link.ring_busbw``) and NCCL's ring latencies on PCIe (tuning.cc
    baseLat and hwLat, Simple protocol, ``labs.hardware.nccl``): every input the lab's time
    uses, so the derivation from them is the checker's answer."""
    link = get_link("pcie-4")
    return {"link_gbs": link.bandwidth / 1e9, "busbw_gbs": link.ring_busbw / 1e9,
            "share": link.ring_busbw / link.bandwidth,
            "base_us": BASE_LATENCY["ring"]["Simple"],
            "hop_us": HOP_LATENCY[link.hw]["ring"]["Simple"]}


_DI = _drill_inputs()
_STEPS = 2 * (DRILL_GPUS - 1)


def _ring_ms(share: float, gbs: float) -> float:
    """The drill's all-reduce, in ms, had each GPU sent ``share`` of the gradients at ``gbs``
    GB/s (a wrong derivation's; the right one sends 2(N-1)/N at the busBW), with the ring's
    latency."""
    return (share * DRILL_GRAD / (gbs * 1e9) + (_DI["base_us"] + _STEPS * _DI["hop_us"]) / 1e6
            ) * 1e3


_RING = 2 * (DRILL_GPUS - 1) / DRILL_GPUS

def _waits(query: dict) -> dict:
    """What a case's headline (its speedup and efficiency, ``allreduce_keys`` at its state)
    waits for on the lesson page (round 17, as EP11's cases)."""
    return {"waiting": "Its speedup and efficiency show",
            "waits_for": allreduce_keys(run(DataParallelQuery(**query)))}


VIEW = LabView(
    name="dp",
    episode=BY_SLUG["data-parallel"],
    query_model=DataParallelQuery,
    run=run,
    to_api=to_api,
    figures=figures,
    diagrams=(
        Diagram("scaling", "Speedup and efficiency against GPU count, per link",
                element_id="dp-scaling", embed_height=620),
        Diagram("time", "Where one step’s time goes (ms)", element_id="dp-time",
                embed_height=360),
        Diagram("ratio", "Compute against the all-reduce, per tokens per GPU",
                element_id="dp-ratio", embed_height=420),
        Diagram("replica", "What every replica holds (GB), whatever N",
                element_id="dp-replica", embed_height=520),
    ),
    labels={
        "model": "Model", "grad_bytes": "Gradients (bf16)", "gpus": "GPUs N", "link": "Link",
        "compute_s": "Compute per step", "scaling": "Scaling", "overlap": "Overlap",
        "bucket_bytes": "Bucket size", "nics_per_node": "Network ports per server",
        "global_batch": "Global batch (sequences)", "seq_len": "Sequence length",
        "micro_batch": "Micro-batch (sequences)", "microbatches": "Micro-batches per step",
        "gpu": "GPU",
    },
    response_model=DataParallelAnswer,
    embed_height=1600,
    extra_context=extra_context,
    summary="Data-parallel speedup: compute plus gradient all-reduce per link and GPU count",
    good=Case(
        "Good case: 8 GPUs on NVLink",
        facts()["good"]["params"],
        "One server's 8 GPUs, joined by NVSwitch, the switch that adds their 14 GB of bf16 "
        "gradients (a 7B model) itself (steps 1–2).",
        diagram="dp-scaling",  # pressed at the last step, the replica chart would not change
        **_waits(facts()["good"]["params"]),
    ),
    bad=Case(
        "Bad case: 64 GPUs on 100 Gb/s Ethernet",
        facts()["bad"]["params"],
        "8 servers of 8 GPUs, each server with one 100 Gb/s Ethernet port (step 3).",
        diagram="dp-scaling",
        **_waits(facts()["bad"]["params"]),
    ),
    drills=(
        Drill(
            id="dp-allreduce-pcie",
            question=(
                f"An 8B model's {DRILL_GRAD / 1e9:g} GB of bf16 gradients are ring all-reduced "
                f"over {DRILL_GPUS} GPUs on PCIe 4.0 x16. The link's datasheet gives "
                f"{_DI['link_gbs']:g} GB/s per direction; NCCL's achieved bus bandwidth "
                f"(busBW) on it is {_DI['share']:.0%} of the link, {_DI['busbw_gbs']:.2f} GB/s. "
                f"NCCL's ring pays {_DI['base_us']:g} µs to start and {_DI['hop_us']:g} µs "
                "per ring step. How many ms does the all-reduce take?"
            ),
            answer=drill_answer,
            unit="ms",
            hint="Each GPU sends 2·(N−1)/N of the gradients at the bus bandwidth (not the "
                 "datasheet's); add the start and 2·(N−1) ring steps.",
            explanation=(
                f"{{answer}} ms: each GPU sends 2·{DRILL_GPUS - 1}/{DRILL_GPUS} × "
                f"{DRILL_GRAD / 1e9:g} GB = "
                f"{2 * (DRILL_GPUS - 1) / DRILL_GPUS * DRILL_GRAD / 1e9:g} GB at "
                f"{_DI['busbw_gbs']:.2f} GB/s busBW "
                f"({_DI['share']:.0%} of {_DI['link_gbs']:g} GB/s), "
                f"{2 * (DRILL_GPUS - 1) / DRILL_GPUS * DRILL_GRAD / _DI['busbw_gbs'] / 1e6:,.1f}"
                f" ms, plus {_DI['base_us']:g} + {_STEPS} × {_DI['hop_us']:g} µs of latency "
                f"({(_DI['base_us'] + _STEPS * _DI['hop_us']) / 1e3:.2f} ms). At the datasheet's "
                f"{_DI['link_gbs']:g} GB/s it would be "
                f"{2 * (DRILL_GPUS - 1) / DRILL_GPUS * DRILL_GRAD / _DI['link_gbs'] / 1e6:,.0f}"
                " ms: NCCL reaches less than the link."),
            mistakes=(
                Mistake("datasheet", lambda: _ring_ms(_RING, _DI["link_gbs"]),
                        "that is the datasheet's rate. NCCL's ring moves data at its bus "
                        f"bandwidth, {_DI['busbw_gbs']:.2f} GB/s here, less than the link's."),
                Mistake("one-pass", lambda: _ring_ms(_RING / 2, _DI["busbw_gbs"]),
                        "a ring all-reduce is two passes, a reduce-scatter then an "
                        "all-gather: each GPU sends (N − 1)/N of the gradients twice, not "
                        "once."),
                Mistake("whole-twice", lambda: _ring_ms(2, _DI["busbw_gbs"]),
                        "each of the ring's two passes sends (N − 1)/N of the gradients, not "
                        "all of them: a GPU keeps its own share."),
                Mistake("whole-once", lambda: _ring_ms(1, _DI["busbw_gbs"]),
                        "each GPU sends 2·(N − 1)/N of the gradients, not the gradients "
                        "once: a reduce-scatter and an all-gather."),
            ),
        ),
        *LESSON_DRILLS["dp"],  # predict and decide (app/lesson_drills/data_parallel.py)
    ),
)

register(router, VIEW)
