"""EP08's overlap drills' plans (step 12): Mixtral 8x7B's, which the lesson and the timeline
chart show, and Qwen3-235B-A22B's across nodes, which recipe-decide-overlap asks, with the
figures its feedback quotes (``app.lesson_drills.recipe`` builds the drill)."""

from app.labkit.drills import lab_value
from app.lesson_drills.units import gb, ms
from labs.hardware.gpus import get_gpu
from labs.model.presets import get_model
from labs.parallel.dispatch import copies
from labs.parallel.layer_time import COMM_SMS
from labs.parallel.layout import ParallelLayout
from labs.recipe.groups import spread

# EP08's overlap plan: Mixtral 8x7B on 8 H100 nodes, TP2 x EP8 x DP32, where TP, EP, DP and
# ZeRO all have traffic to hide (the lesson's step 12 shows it at 4 micro-batches; tests and the
# timeline chart's checks use it at 8).
MIXTRAL_64 = {"model": "mixtral-8x7b", "gpu": "h100-sxm", "nodes": 8, "gpus_per_node": 8,
              "intra_link": "nvlink-4", "inter_link": "ib-ndr", "seq_len": 4096, "zero": 1,
              "tp": 2, "pp": 1, "dp": 32, "ep": 8, "microbatches": 8}

# EP08's overlap drill asks a state step 12 does not describe: EP groups across nodes on a
# slow network, where the all-to-all outlasts the compute beside it (step 12's limit), so
# cutting its bytes (DeepEP, EP07 step 3) beats hiding it. Qwen3-235B-A22B (128 experts, 8 a
# token) on 16 H100 nodes over InfiniBand HDR; the experts take no TP (Megatron's expert TP 1),
# so each EP group of 16 is 8 GPUs on each of 2 nodes; full recomputation makes it fit (60.5 GB
# a GPU).
QWEN_EP16 = {"model": "qwen3-235b-a22b", "gpu": "h100-sxm", "nodes": 16, "gpus_per_node": 8,
             "intra_link": "nvlink-4", "inter_link": "ib-hdr", "seq_len": 4096, "zero": 1,
             "tp": 2, "pp": 2, "dp": 32, "ep": 16, "microbatches": 8, "recompute": "full"}
QWEN_EP = spread(ParallelLayout(tp=QWEN_EP16["tp"], pp=QWEN_EP16["pp"], dp=QWEN_EP16["dp"],
                                ep=QWEN_EP16["ep"]), "ep", QWEN_EP16["gpus_per_node"])
QWEN = get_model(QWEN_EP16["model"])
COMPUTE_CAUSES = ("gemm", "attention", "memory")


def micro_compute_s(answer: dict) -> float:
    """One micro-batch's compute on the slowest stage (its kernels: GEMMs, attention and the
    memory-bound ops), from the lab's micro_causes."""
    return sum(c["exposed_s"] for c in answer["micro_causes"] if c["name"] in COMPUTE_CAUSES)


def a2a_s(answer: dict) -> float:
    """The EP all-to-all's time on one micro-batch's critical path."""
    return answer["timeline"]["exposed_s"]["ep"]


def network_copies(dispatch: str) -> float:
    """Copies of a token one GPU of the drill's EP groups sends over the network a dispatch."""
    return copies(QWEN, dispatch, QWEN_EP.size, QWEN_EP.per_node).network


def a2a_hidden_s(answer: dict) -> float:
    """The EP all-to-all's time a micro-batch that runs beside the kernels (the timeline's):
    its hidden bar less the SMs it slows them by, which the bar runs beside too."""
    ep = next(k for k in answer["timeline"]["by_kind"] if k["kind"] == "ep")
    return ep["hidden_s"] - ep["sm_s"]


def overlap_ep_why(answer: dict) -> str:
    """Round-21 cold reading Q, finding 7: "793.6 ms against 409.4 ms: 402.0 ms still blocks"
    left 17.8 ms unsaid. The all-to-all runs beside its own MoE layers' kernels only (each
    pass's dispatch and combine beside that pass: labs.parallel.layer_time ``_ep``), so the
    last stage's output layer and loss hide none of it."""
    base = lab_value("recipe", QWEN_EP16, lambda a: a)
    ndr = lab_value("recipe", {**QWEN_EP16, "inter_link": "ib-ndr"}, lambda a: a)
    compute, beside = micro_compute_s(base), a2a_hidden_s(answer)
    return (f"Overlapped, the all-to-all ({ms(a2a_s(base))} a micro-batch) hides only "
            f"behind the MoE layers' own kernels, {ms(beside)} of the stage's {ms(compute)} "
            f"(the rest is the last stage's output layer and loss): {ms(a2a_s(base))} − "
            f"{ms(beside)} = {ms(a2a_s(answer))} still blocks, and its kernels hold "
            f"{COMM_SMS} of {get_gpu(QWEN_EP16['gpu']).kernels.sm_count} SMs. On NDR, twice "
            f"HDR's rate, it would take {ms(a2a_s(ndr))}, {_against(a2a_s(ndr), beside)}. "
            "Step {value}.")


def _against(a2a: float, beside: float) -> str:
    """Round-22 cold reading Q, finding 1: NDR's all-to-all set against the MoE kernels it
    hides behind (``beside``), not the stage's whole compute the sentence before rules out."""
    if a2a <= beside:
        return f"under the {ms(beside)} beside it"
    return f"still {ms(a2a - beside)} past the {ms(beside)} beside it"


def overlap_deepep_why(answer: dict) -> str:
    base = lab_value("recipe", QWEN_EP16, lambda a: a)
    e, k, n, g = QWEN.experts, QWEN.top_k, QWEN_EP.size, QWEN_EP.per_node
    held, others = e * g // n, QWEN_EP.nodes - 1
    return (f"DeepEP sends a token once to each other node holding one of its experts, "
            f"{others} × (1 − C({e - held},{k})/C({e},{k})) = {network_copies('deepep'):.2f} "
            f"copies over the network instead of NCCL's {k} × {n - g}/{n} = "
            f"{network_copies('alltoall'):.1f}, and forwards it on NVLink: the all-to-all "
            f"falls from {ms(a2a_s(base))} to {ms(a2a_s(answer))} a micro-batch. "
            "Step {value}.")


def overlap_tp_why(answer: dict) -> str:
    return (f"TP2's collectives were already short: 'all' leaves "
            f"{ms(answer['timeline']['exposed_s']['tp'])} of them a micro-batch, and the "
            f"all-to-all, {ms(a2a_s(answer))} a micro-batch, is untouched. Step {{value}}.")


def qwen_memory() -> float:
    """The overlap drill's plan's memory a GPU, by the lab (the question states it; built at
    import, before the views register, as ``fsdp_case_memory``)."""
    from app.routers.recipe_state import RecipeQuery, run

    return run(RecipeQuery(**QWEN_EP16), two_d=False).result.memory_per_gpu_bytes


def expert_weight_bytes(ep: int) -> float:
    """The bf16 weights of the routed experts one GPU of the overlap drill's plan holds at EP
    ``ep``: its stage's layers (the plan's even split) × experts ÷ EP × 3 matrices of hidden
    × expert width."""
    layers = QWEN.layers // QWEN_EP16["pp"]
    return 2 * layers * QWEN.experts // ep * 3 * QWEN.hidden * QWEN.expert_ffn


def overlap_ep8_why(answer: dict) -> str:
    """EP 8 in a node: the all-to-all on NVLink, and twice the experts' weights and gradients
    a GPU (ZeRO-1's optimizer state, over twice the expert-DP, stays)."""
    base = lab_value("recipe", QWEN_EP16, lambda a: a)
    extra = expert_weight_bytes(answer["plan"]["ep"]) - expert_weight_bytes(QWEN_EP16["ep"])
    fit = (f"It does not fit: {QWEN.experts // answer['plan']['ep']} experts a layer on each "
           f"GPU, not {QWEN.experts // QWEN_EP16['ep']}, so the experts' weights and their "
           f"gradients each grow by {gb(extra)} (their optimizer state, ZeRO-1 over twice the "
           f"expert-DP, stays): {gb(base['memory_per_gpu_bytes'])} + 2 × {gb(extra)} = "
           f"{gb(answer['memory_per_gpu_bytes'])} a GPU, over the H100's "
           f"{gb(get_gpu(QWEN_EP16['gpu']).memory_bytes)}. " if not answer["fits"] else "")
    return (fit + f"On NVLink its all-to-all would take {ms(a2a_s(answer))} a micro-batch, "
            f"against {ms(a2a_s(base))} across the nodes. Step {{value}}.")
