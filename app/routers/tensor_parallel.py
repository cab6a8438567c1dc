"""EP04 Tensor parallelism: the split of every matrix, its cost against TP degree and link,
and the memory it saves (the EP01 ledger). Its controls, run, answers and figures are
``tensor_parallel_state.py``, its charts app/charts/tensor_parallel_efficiency.py and
tensor_parallel_cost.py, what of them waits for which guess app/charts/tensor_parallel.py;
here the lesson's states (``facts``), the page context, cases, drills and view."""

from functools import cache, lru_cache

from fastapi import APIRouter

from app.charts.tensor_parallel import (
    CROSSING_LINK,
    MODEL_70B,
    SLOW_LINK,
    STEP_4,
    crossing_key,
    drill_key,
    held_keys,
    row_keys,
    step_keys,
    waits,
)
from app.charts.tp_split import split_view
from app.charts.units import fmt_bytes, fmt_pct
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, Drill, LabView, Mistake, lesson_state, register
from app.lesson_drills import LESSON_DRILLS
from app.model_controls import model_choices
from app.options import SEQ_LENGTHS, gpu_options, with_value
from app.routers.tensor_parallel_state import (
    TPQuery,
    dense_model_options,
    figures,
    link_options,
    run,
    to_api,
)
from app.schemas import TensorParallelAnswer
from labs.core.limits import TP_DEGREES
from labs.hardware.gpus import get_gpu
from labs.hardware.kernels import rates
from labs.hardware.links import get_cluster, link_name, links
from labs.hardware.nccl import current_nccl, nvls_latency_check, simple_ring_latency
from labs.tensor_parallel.comm import LAYER_COLLECTIVES
from labs.tensor_parallel.crossover import tp_crossover
from labs.tensor_parallel.inputs import TPResult
from labs.tensor_parallel.notes import assumptions

router = APIRouter()

GOOD = {"tp": 8}  # the good case: TP = 8 inside an NVLink 4 node


@lru_cache(maxsize=1)
def facts() -> dict:
    """The states the lesson's steps link to, each with the figures its prose quotes (the same
    query model, lab and to_api as GET /api/tp; tests/app/test_prose.py)."""
    state = lesson_state(TPQuery, run, to_api)

    return {
        "good": state(**GOOD),
        # The rough estimate's flat MFU: a GPU that slow hides the same bytes better.
        "flat": state(**GOOD, mfu=0.4),
        "t1": state(tp=1),
        "t2": state(tp=2),
        "t4": state(tp=4),  # step 2 asks t = 4's heads, which the opening bench (t = 8) omits
        "sp_off": state(tp=8, sp=False),
        "sp_on": state(tp=8, sp=True),
        "eth100": state(tp=8, gpus_per_node=1, inter_link="eth-100g"),
        "bad": state(tp=8, gpus_per_node=1, inter_link=SLOW_LINK),  # step 4's
        "gpt3_t8": state(model="gpt-3-175b", tp=8),
        "gpt3_t16": state(model="gpt-3-175b", tp=16),
        # t = 16 across two nodes on a network twice as fast: the same efficiency, so the drop
        # from t = 8 is not the network's (half the compute per GPU, and NCCL's ring across
        # the nodes instead of NVLS inside one).
        "gpt3_t16_xdr": state(model="gpt-3-175b", tp=16, inter_link="ib-xdr"),
        # Where the crossing hop is the bottleneck.
        "gpt3_t16_eth": state(model="gpt-3-175b", tp=16, inter_link="eth-100g"),
        # An NVL72 rack holds only Blackwell GPUs: its state times B200s.
        "gpt3_nvl72": state(model="gpt-3-175b", tp=32, link="nvl72", gpu="b200"),
        "gpt3_nvl72_t8": state(model="gpt-3-175b", tp=8, link="nvl72", gpu="b200"),
        "l70": state(model="llama-3.1-70b", tp=8, sp=False),
        # Step 6: the crossover across InfiniBand NDR, one GPU per node (not the bad case's
        # Ethernet, which step 4 links).
        "ib": state(tp=8, gpus_per_node=1, inter_link=CROSSING_LINK),
    }


def extra_context(state) -> dict:
    query = state.query
    return {
        "facts": facts(),
        "model_options": model_choices(dense_model_options(), query.model_value),
        "model_value": query.model_value,
        "gpu_options": gpu_options(),
        "link_options": link_options(),
        "links": links(),  # the presets the prose quotes (bandwidth, NVL72's domain)
        "link_name": link_name,  # the tables name each link, never its id
        "tp_options": with_value(TP_DEGREES, query.tp),
        "seq_options": with_value(SEQ_LENGTHS, query.seq_len),
        "notes": assumptions(state.result),
        "split": split_view(state.result),
        "tp_drill_key": drill_key,  # the drill whose answer a state's efficiency gives
        "tp_crossover_key": crossover_key,
        # What the state's time figures wait for (steps 4 and 5 and the 70B drill).
        "tp_held_keys": held_keys, "tp_step_keys": step_keys, "tp_waits": waits,
        "tp_row_keys": row_keys,  # a sweep row's: step 4's t = 8 at the bad case
        "tp_bytes_key": bytes_key,
        "crossover": tp_crossover(state.result),
        "gpu_peak": lambda gpu_id: get_gpu(gpu_id).bf16_flops,  # step 6 names the peak
        "gpu_hbm": lambda gpu_id: rates(get_gpu(gpu_id)),  # step 5 times the norms' bytes
        "ring_lat": simple_ring_latency(),  # step 4 sums a two-node ring's latency (EP02's)
        # Step 3's note: NVLS charged a ring's latency against NCCL's own model, measured.
        "nccl_now": current_nccl(),  # current NCCL's NVLS latency, steps 3 and 4 name
        "nvls_check": nvls_latency_check(get_cluster("dgx-h100")),
    }


def crossover_key(result: TPResult) -> str:
    """'tp-crossover' where the state's collectives cross the link of step 6's prediction (its
    bottleneck): there the readout's collective times, beside its compute, give that step's
    (h/t)* by one division, so lab.js holds them until its guess; '' elsewhere."""
    return crossing_key(result)


def bytes_key(result: TPResult) -> str:
    """The derive drill's form where the readout's one collective gives its answer: held
    until it is answered. At every state of the drill's model, Llama 3.1 70B (round-13 cold
    reading of EP04, finding 4: its all-reduce at t = 8; round 16, finding 5: with SP one
    reduce-scatter's 58.7 MB is half of it, at t = 4 its 101 MB 3/4 ÷ 7/8 of it), and
    wherever the figure printed is the drill's (with SP at 405B's t = 8, 117 MB)."""
    halves = 2 if result.input.sp and result.input.tp > 1 else 1
    at_70b = result.input.model.id == MODEL_70B
    return "drill-tp-allreduce-bytes" if at_70b or fmt_bytes(
        result.cost.collective_sent / halves) == printed_drill_answer() else ""


@cache
def printed_drill_answer() -> str:
    return fmt_bytes(drill_answer() * 1e6)


def drill_answer() -> float:
    """MB one GPU sends in one ring all-reduce of Llama 3.1 70B's layer at t = 8, s = 4096."""
    result = run(TPQuery(model=MODEL_70B, tp=8, sp=False))
    return result.cost.comm_bytes / len(LAYER_COLLECTIVES) / 1e6


VIEW = LabView(
    name="tp",
    episode=BY_SLUG["tensor-parallel"],
    query_model=TPQuery,
    run=run,
    to_api=to_api,
    figures=figures,
    diagrams=(
        Diagram("split", "Where Megatron cuts each matrix, one colour per GPU",
                element_id="tp-split", embed_height=900, template="partials/_tp_split.html"),
        Diagram("efficiency", "Efficiency against TP degree, per link", embed_height=520),
        Diagram("cost", "Time per layer: compute ÷ t plus the collectives", embed_height=480),
        Diagram("memory", "Memory per GPU against TP degree (EP01 ledger)", embed_height=480),
        Diagram("crossover", "Compute against the collectives, by hidden size per GPU",
                embed_height=440),
    ),
    labels={
        "model": "Model", "params": "Custom params", "gpu": "GPU", "tp": "TP degree t",
        "sp": "Sequence parallelism",
        "link": "Link for the whole group", "gpus_per_node": "GPUs per node",
        "intra_link": "Link inside a node", "inter_link": "Link between nodes",
        "seq_len": "Sequence length s", "micro_batch": "Micro-batch b",
        "mfu": "Matmul rate override",
        "recompute": "Recomputation",
    },
    response_model=TensorParallelAnswer,
    embed_height=1900,
    extra_context=extra_context,
    summary="Tensor parallelism: the split, time per layer and per step against TP degree and "
            "link, and memory per GPU (bytes, seconds)",
    good=Case(
        "Good case: TP = 8 inside an NVLink node",
        GOOD,
        lambda: "Eight GPUs on NVLink 4 share every matrix: "
                f"{fmt_pct(facts()['good']['api']['step_efficiency'])} efficient.",
        diagram="tp-efficiency",
    ),
    bad=Case(
        "Bad case: TP = 4 across Ethernet nodes",
        # TP = 4, not step 4's 8: at 8 the bench drew that step's all-reduce time one click
        # before its guess (test_answers_hidden).
        {"tp": 4, "gpus_per_node": 1, "inter_link": "eth-25g"},
        # The setup only: what it gives shows once clicked.
        "A four-way split, one GPU per node, joined by 25 Gb/s Ethernet.",
        diagram="tp-efficiency",  # the split does not change; the efficiency does
        # Its figures land beside step 4's answer: they wait for its guess (step_keys).
        waiting="Its efficiency and speed-up show",
        waits_for=(STEP_4,),
    ),
    drills=(
        Drill(
            id="tp-allreduce-bytes",
            question=(
                "Llama 3.1 70B (hidden size h = 8,192) runs with TP = 8, no sequence "
                "parallelism, one sequence of s = 4,096 tokens (b = 1), bf16 activations. "
                "How many MB (10⁶ bytes) does each GPU send in one ring all-reduce of a "
                "layer's output?"
            ),
            answer=drill_answer,
            unit="MB",
            hint="The all-reduced tensor is s·b·h values of 2 bytes; a ring all-reduce sends "
                 "2(t − 1)/t of it from every GPU.",
            explanation=(
                "{answer} MB: the tensor is 4,096 × 8,192 × 2 B = 67.1 MB, and a ring "
                "all-reduce sends 2 × 7/8 of it from each GPU."
            ),
            mistakes=(
                Mistake("tensor", lambda: drill_answer() / (2 * 7 / 8),
                        "that is the tensor itself. A ring all-reduce is a reduce-scatter "
                        "then an all-gather: each GPU sends 2(t − 1)/t of it."),
                Mistake("one-pass", lambda: drill_answer() / 2,
                        "that is one pass of the ring. The all-reduce is a reduce-scatter "
                        "and an all-gather, (t − 1)/t of the tensor each."),
                Mistake("whole-twice", lambda: drill_answer() / (7 / 8),
                        "each of the ring's two passes sends (t − 1)/t of the tensor, not "
                        "all of it: a GPU keeps its own share."),
                Mistake("split", lambda: drill_answer() / (2 * 7 / 8) / 8,
                        "the layer's output is not split over the GPUs: each holds a partial "
                        "sum of the whole s·b·h tensor, and the all-reduce adds them."),
                Mistake("fp32", lambda: drill_answer() * 2,
                        "bf16 activations are 2 bytes a value, not 4."),
            ),
        ),
        *LESSON_DRILLS["tp"],  # predict and decide (app/lesson_drills/tensor_parallel.py)
    ),
)

register(router, VIEW)
