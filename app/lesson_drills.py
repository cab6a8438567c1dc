"""Every episode's predict and decide drills (issue 36: each episode has at least one of each).

A *predict* drill asks what the lab gives for a state the page does not show; the guess counts
within 10%, and only then does the drill link to that state. A *decide* drill asks for the
plan, the change or the cause among 3-4 choices; the lab runs every choice's state, the best
figure is the right one, and each choice's feedback quotes the lab's figure for it. No answer
is typed in: each is read off the lab's own JSON answer (app.labkit.drills.lab_value), and
none is in the page before the drill is answered (tests/app/test_drills.py).

Each lab's router adds ``LESSON_DRILLS[<view name>]`` to its own drills.
"""


import math

from app.labkit import Decide, Drill, decide, predict
from app.labkit.drills import lab_value
from labs.hardware.gpus import get_gpu
from labs.hardware.nccl import RING_CTAS
from labs.model.presets import get_model
from labs.parallel.dispatch import copies
from labs.parallel.layer_time import COMM_SMS
from labs.parallel.layout import ParallelLayout
from labs.recipe.groups import spread


def gb(value: float) -> str:
    return f"{value / 1e9:,.1f} GB"


def ms(value: float) -> str:
    return f"{value * 1e3:,.1f} ms"


def pct(value: float) -> str:
    return f"{value * 100:,.1f}%"


def per_s(value: float) -> str:
    return f"{value:,.2f} samples/s"


def finetune_bytes(method: str):
    return lambda answer: next(f["total_bytes"] for f in answer["finetune"]
                               if f["method"] == method)


SEVENTY = {"model": "llama-3.1-70b"}
FOUR_OH_FIVE = {"model": "llama-3.1-405b"}  # EP03's decide drill: a model its table does not show
# EP01's predict drill: 405B's 16-byte state sharded over 64 H200s. It asks the state a GPU
# holds, which no readout prints (the bench prints the fewest GPUs at any model and GPU, so
# asking that was one select away from its answer).
P405, H200 = get_model("llama-3.1-405b").params, get_gpu("h200").memory_bytes
H200_SHARDS = 64
P8 = get_model("llama-3.1-8b").params  # EP03's predict drill: a model its table does not show


# EP07's network drill: DeepSeek-V3's step-6 layout under leaves of 4 nodes and a 4:1 spine.
V3_NET = {"model": "deepseek-v3", "nodes": 256, "pp": 16, "ep": 64, "link": "hgx-h800",
          "leaf_nodes": 4, "oversubscription": 4.0}


def heaviest_stage(answer: dict) -> float:
    return max(answer["memory"]["per_rank_bytes"])


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


def _overlap_ep_why(answer: dict) -> str:
    base = lab_value("recipe", QWEN_EP16, lambda a: a)
    ndr = {**QWEN_EP16, "inter_link": "ib-ndr"}
    ndr_answer = lab_value("recipe", ndr, lambda a: a)
    return (f"Another micro-batch's compute hides the all-to-all only layer by layer, as long "
            f"as that layer's compute lasts, and here the all-to-all is the longer: "
            f"{ms(a2a_s(base))} a micro-batch against {ms(micro_compute_s(base))} of compute. "
            f"Overlapped, {ms(a2a_s(answer))} of it still blocks the compute stream, and the "
            f"{COMM_SMS} of {get_gpu(QWEN_EP16['gpu']).kernels.sm_count} SMs its kernels hold "
            f"slow the compute. On InfiniBand NDR, twice HDR's rate, the all-to-all "
            f"would take {ms(a2a_s(ndr_answer))}, under the compute, and overlap would leave "
            f"{ms(a2a_s(lab_value('recipe', {**ndr, 'ep_overlap': True}, lambda a: a)))}. Here: "
            "step {value}.")


def _overlap_deepep_why(answer: dict) -> str:
    base = lab_value("recipe", QWEN_EP16, lambda a: a)
    e, k, n, g = QWEN.experts, QWEN.top_k, QWEN_EP.size, QWEN_EP.per_node
    held, others = e * g // n, QWEN_EP.nodes - 1
    deepep = network_copies("deepep")
    return (f"A token picks {k} of {e} experts, {held} on each of {QWEN_EP.nodes} nodes. NCCL's "
            f"all-to-all sends it once per expert, and {n - g} of the {n} EP ranks are on "
            f"another node: {k} × {n - g}/{n} = {network_copies('alltoall'):.1f} copies over "
            f"the network. DeepEP sends it once to each other node holding one of its experts, "
            f"{others} × (1 − C({e - held},{k})/C({e},{k})) = {deepep:.2f} copies, and forwards "
            f"it on NVLink there. The all-to-all drops from {ms(a2a_s(base))} to "
            f"{ms(a2a_s(answer))} a micro-batch, less than overlap leaves exposed: "
            "step {value}.")


def _overlap_tp_why(answer: dict) -> str:
    return (f"TP2's collectives are already short, {ms(answer['timeline']['exposed_s']['tp'])} "
            "a micro-batch left after 'all'; the all-to-all, which blocks far longer, is "
            "untouched: step {value}.")


# EP04's drills quote the lab's figures for their states, read when a drill is answered
# (lab_value: the same query model, run and to_api as GET /api/tp), never typed in.
TP_GOOD, TP_70B = {"tp": 8}, {"model": "llama-3.1-70b", "tp": 8}


def tp_figures(params: dict) -> dict:
    return lab_value("tp", params, lambda answer: answer)


ALGORITHMS = {"nvls": "NVLS", "ring": "a ring", "hierarchical": "hierarchical", "direct": "direct"}


def _busbw(answer: dict) -> str:
    name = ALGORITHMS.get(answer["algorithm"], answer["algorithm"])
    return f"{answer['bus_bandwidth'] / 1e9:.0f} GB/s ({name})"


def tp_70b_worked() -> str:
    """From 405B's layer: compute ÷ 4 (h²), bytes ÷ 2 (h), then what the lab adds."""
    big, small = tp_figures(TP_GOOD), tp_figures(TP_70B)
    estimate = (big["single_gpu_s"] / 8 / 4) / (big["compute_s"] / 4 + big["comm_s"] / 2)
    return (f"{{answer}}%. From 405B's layer (one GPU {big['single_gpu_s'] * 1e3:.2f} ms ÷ 8 "
            f"against {big['compute_s'] * 1e3:.2f} ms of compute and "
            f"{big['comm_s'] * 1e3:.2f} ms of collectives), compute shrinks 4× and the bytes "
            f"2×, which gives about {100 * estimate:.0f}%. The lab gives less: 70B's narrower "
            f"GEMMs run a little slower ({small['gemm_tflops']} against {big['gemm_tflops']} "
            f"TFLOP/s), and NCCL reaches a lower busBW on the half-size tensor "
            f"({small['bus_bandwidth'] / 1e9:.0f} against {big['bus_bandwidth'] / 1e9:.0f} "
            "GB/s), since its fixed start-up time weighs more: one GPU "
            f"{small['single_gpu_s'] * 1e3:.2f} ms ÷ 8 against "
            f"{small['compute_s'] * 1e3:.2f} + {small['comm_s'] * 1e3:.2f} ms.")


def tp_span_why(answer: dict) -> str:
    """Nodes of 4: the engine's algorithm and busBW across the two nodes, against NVLink's."""
    good = tp_figures(TP_GOOD)
    return (f"Across two nodes NCCL reaches {_busbw(answer)} of busBW, against "
            f"{_busbw(good)} inside one NVLink node: the switch adds (NVLS) only for the "
            "GPUs of one NVLink domain, and the hops between the nodes share each node's 4 "
            "InfiniBand ports. One "
            f"all-reduce takes {answer['collective_s'] * 1e3:.2f} ms against "
            f"{good['collective_s'] * 1e3:.2f} ms: {{value}}.")


def tp_pcie_why(answer: dict) -> str:
    """PCIe: the same bytes at a fraction of NVLink's busBW."""
    good = tp_figures(TP_GOOD)
    return (f"Every layer's all-reduces now cross PCIe at {_busbw(answer)} of busBW against "
            f"NVLink's {_busbw(good)}: one takes {answer['collective_s'] * 1e3:.2f} ms "
            f"against {good['collective_s'] * 1e3:.2f} ms, beside "
            f"{answer['compute_s'] * 1e3:.2f} ms of compute a layer: {{value}}.")


def tp_sp_why(answer: dict) -> str:
    """SP: more bytes (the backward's extra all-gather), less repeated compute."""
    good = tp_figures(TP_GOOD)
    return (f"Sequence parallelism sends more ({good['comm_bytes'] / 1e6:,.0f} → "
            f"{answer['comm_bytes'] / 1e6:,.0f} MB a layer: one more all-gather in backward), "
            "but no GPU repeats the norms on every token any more (compute "
            f"{good['compute_s'] * 1e3:.2f} → {answer['compute_s'] * 1e3:.2f} ms): "
            "{value}.")


# EP08's 2-D against 3-D drill (step 14): Llama 3.1 70B on 32 H100 nodes, 64 sequences of
# 8,192 tokens a step, a cluster and batch the step's chart does not show.
TWO_D_256 = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "nodes": 32, "gpus_per_node": 8,
             "intra_link": "nvlink-4", "inter_link": "ib-ndr", "seq_len": 8192, "zero": 1,
             "recompute": "flash", "pp": 1}


# EP08's FSDP drill (step 13): Llama 3.1 8B on 2 H100 nodes as FSDP16 over InfiniBand HDR,
# 16 micro-batches of one 2,048-token sequence, backward prefetch off. Step 13's 70B cannot
# keep its gathered weights (99.7 GB a GPU); this 8B can, so reading the step is not enough.
FSDP_8B = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "nodes": 2, "gpus_per_node": 8,
           "intra_link": "nvlink-4", "inter_link": "ib-hdr", "seq_len": 2048, "tp": 1,
           "pp": 1, "dp": 16, "zero": 3, "recompute": "flash", "microbatches": 16,
           "fsdp_prefetch": False}


def _fsdp_keep_why(answer: dict) -> str:
    dp = answer["traffic"][4]
    return ("The backward gathers nothing: one gather per layer and micro-batch instead of "
            f"two, {gb(dp['bytes_per_step'])} a step, and no gather for the backward to wait "
            "for or to lend SMs to. Every layer's gathered weights stay from its forward to "
            f"its backward: {gb(answer['memory_per_gpu_bytes'])} a GPU, which an 8B model's "
            f"{gb(2 * get_model(FSDP_8B['model']).params)} of bf16 weights leave within the "
            f"H100's {gb(get_gpu(FSDP_8B['gpu']).memory_bytes)}. Step {{value}}.")


def _step_or_unfit(answer: dict) -> float:
    """A plan's step, or infinity where it does not fit its GPUs (no step at all)."""
    return answer["step_s"] if answer["fits"] else math.inf


def ms_or_unfit(value: float) -> str:
    return "does not fit" if math.isinf(value) else ms(value)


LESSON_DRILLS: dict[str, tuple[Drill | Decide, ...]] = {
    "memory": (
        predict(
            "memory-predict-405b-h200",
            f"Llama 3.1 405B ({P405 / 1e9:.1f} billion parameters), 16 bytes of training "
            f"state per parameter, sharded evenly over {H200_SHARDS} H200s "
            f"({H200 / 1e9:.0f} GB each) with ZeRO-3. Predict the GB of state each GPU holds.",
            "memory", {"model": "llama-3.1-405b", "gpu": "h200", "dp": H200_SHARDS, "zero": 3},
            lambda answer: answer["state_bytes"] / H200_SHARDS, unit="GB", scale=1e-9,
            hint=f"16 B × {P405 / 1e9:.1f} billion parameters is the whole state; ZeRO-3 "
                 f"gives each of the {H200_SHARDS} GPUs an equal share.",
            explanation=f"{{answer}} GB: 16 B × {P405 / 1e9:.1f}B parameters = "
                        f"{16 * P405 / 1e9:,.0f} GB, ÷ {H200_SHARDS} GPUs. That "
                        f"leaves {H200 / 1e9 - 16 * P405 / H200_SHARDS / 1e9:.0f} of the "
                        f"{H200 / 1e9:.0f} GB for activations. ZeRO shards the state, not the "
                        "activations (step 5's 70B case): whether the step fits depends on "
                        "them.",
            rel_tol=0.01),
        decide(
            "memory-decide-cut",
            "Llama 3.1 70B does not fit on one H100. Which single change cuts the bytes each "
            "GPU holds the most?",
            "memory", "total_bytes",
            (("zero1", "Data parallelism over 8 GPUs with ZeRO-1", {"dp": 8, "zero": 1},
              "ZeRO-1 shards only the 12 bytes of optimizer state; the 4 bytes of weights and "
              "gradients and all activations stay on every GPU: {value} per GPU."),
             ("tp8", "Tensor parallelism over 8 GPUs, with sequence parallelism",
              {"tp": 8, "sp": True},
              "TP cuts every weight matrix, so weights, gradients, optimizer state and most "
              "activations all shrink about 8 times: {value} per GPU."),
             ("full", "Full activation recomputation", {"recompute": "full"},
              "Recomputation shrinks only the activations; the 16 bytes per parameter of "
              "state stay whole: {value} per GPU."),
             ("pp8", "Pipeline parallelism over 8 GPUs (1F1B, 8 micro-batches)",
              {"pp": 8, "microbatches": 8},
              "Each stage holds an eighth of the layers, but the first stage keeps up to p "
              "micro-batches of activations in flight, and the embedding table's state "
              "(1.05B parameters × 16 B): {value} on the heaviest GPU.")),
            best="min", fmt=gb,
            hint="Which choice divides all four kinds of state and the activations?",
            solution="{best}. TP8 {tp8}, PP8 {pp8}, ZeRO-1 {zero1}, full recomputation "
                     "{full}: only a cut of the weights shrinks all of the state at once."),
    ),
    "dp": (
        predict(
            "dp-predict-16-ib",
            "16 GPUs in 2 servers on InfiniBand NDR, two 400 Gb/s ports per server (48 GB/s "
            "busBW each; NVLink's ring inside a server 367 GB/s), weak scaling, 1,020 ms of "
            "compute a step (the page's 16,384 tokens per GPU), no overlap. Predict the "
            "speedup over one GPU.",
            "dp", {"gpus": 16, "link": "ib-ndr", "nics_per_node": 2}, "speedup", unit="×",
            hint="Speedup = N × compute / (compute + all-reduce). Inside a server: 2 × 7/8 × "
                 "14 GB over NVLink; across: the servers' rings push 2 × ½ × 14 GB through "
                 "the server's two ports.",
            explanation="{answer}×: inside, 2 × 7/8 × 14 GB ÷ 367 GB/s = 66.8 ms; across, "
                        "14 GB through 2 × 48 GB/s = 145.8 ms; the all-reduce 212.7 ms with "
                        "latency, and 16 × 1,020 ÷ (1,020 + 213)."),
        decide(
            "dp-decide-exposed",
            "64 GPUs (8 servers) on 100 Gb/s Ethernet, one network port per server: the "
            "gradient all-reduce is exposed, added to every step. Which change cuts the "
            "exposed all-reduce the most?",
            "dp", "exposed_comm_s",
            (("ports", "Give each server 8 Ethernet ports instead of 1",
              {"gpus": 64, "link": "eth-100g", "nics_per_node": 8},
              "Eight ports carry eight rings at once: 8 × 12 GB/s of busBW out of each "
              "server; one ring through all 64 at that rate, 27.56 GB ÷ 96 GB/s, is the "
              "faster way. Exposed: {value}."),
             ("overlap", "Overlap the all-reduce with the backward pass, in buckets",
              {"gpus": 64, "link": "eth-100g", "overlap": "bucketed"},
              "Overlap hides only as much as the backward pass lasts; the bytes and the link "
              "are unchanged. Exposed: {value}."),
             ("compute", "Double the compute per step (a bigger micro-batch)",
              {"gpus": 64, "link": "eth-100g", "micro_batch": 8},
              "Without overlap the all-reduce waits for the backward pass whatever its "
              "length: the same bytes over the same link. Exposed: {value}."),
             ("ib", "Move to one InfiniBand NDR port (400 Gb/s) per server",
              {"gpus": 64, "link": "ib-ndr"},
              "Four times the bandwidth of one Ethernet port. Exposed: {value}.")),
            best="min", fmt=ms,
            hint="The ring's time is bytes over the slowest link. Compare the bandwidth out "
                 "of each server in each choice.",
            solution="{best}. Exposed all-reduce: 8 ports {ports}, one NDR port {ib}, "
                     "bucketed overlap {overlap}, double compute {compute}. The server's "
                     "bandwidth out, 800 Gb/s against 400, decides it."),
        decide(
            "dp-decide-bound",
            "128 GPUs (16 servers) on 100 Gb/s Ethernet, one port per server, 4 sequences of "
            "4,096 tokens per GPU per step, no overlap: compute is under half the all-reduce. "
            "Which change raises the efficiency most?",
            "dp", "efficiency",
            (("accum", "Accumulate 4 micro-batches per step",
              {"gpus": 128, "link": "eth-100g", "microbatches": 4},
              "Four times the tokens per all-reduce: compute grows 4×, the one all-reduce a "
              "step does not. Efficiency {value}."),
             ("seq", "Double the sequence length to 8,192",
              {"gpus": 128, "link": "eth-100g", "seq_len": 8192},
              "Twice the tokens per GPU, so compute a little more than doubles (attention "
              "grows with s, which the lab's 6·P·T leaves out) against the same all-reduce, "
              "and the activations double too. Efficiency {value}."),
             ("ports", "Give each server 2 Ethernet ports",
              {"gpus": 128, "link": "eth-100g", "nics_per_node": 2},
              "Twice the bandwidth out of each server halves the all-reduce's network part. "
              "Efficiency {value}."),
             ("overlap", "Overlap the all-reduce with backward, in buckets",
              {"gpus": 128, "link": "eth-100g", "overlap": "bucketed"},
              "Only the backward pass, two thirds of compute, can hide it; most of the "
              "all-reduce stays exposed. Efficiency {value}.")),
            best="max", fmt=pct,
            hint="Efficiency without overlap is ratio ÷ (1 + ratio), ratio = compute ÷ "
                 "all-reduce. Which choice multiplies the ratio most?",
            solution="{best}. Efficiency: 4 micro-batches {accum}, 8,192 tokens {seq}, 2 ports "
                     "{ports}, bucketed overlap {overlap}. Accumulation multiplies compute by 4 "
                     "and leaves the once-a-step all-reduce alone; the others gain 2× or less."),
    ),
    "zero": (
        predict(
            "zero-predict-stage2-16",
            f"Llama 3.1 8B ({P8 / 1e9:.2f}B parameters, a model the page's table does not "
            "show), 16 bytes of state per parameter, ZeRO-2 over 16 GPUs. Predict the training "
            "state (no activations) on each GPU, in GB.",
            "zero", {"model": "llama-3.1-8b", "dp": 16, "zero": 2}, "state_bytes", unit="GB",
            scale=1e-9,
            hint="ZeRO-2 shards gradients and optimizer state (2 + 12 B); the 2 B of bf16 "
                 "weights stay whole: 2·P + 14·P/16.",
            explanation=f"{{answer}} GB: 2 B × {P8 / 1e9:.2f}B + 14 B × {P8 / 1e9:.2f}B / 16.",
            rel_tol=0.05),
        decide(
            "zero-decide-memory",
            "Llama 3.1 405B on 16 GPUs with ZeRO-1. Which change cuts each GPU's memory most?",
            "zero", "total_bytes",
            (("z2", "ZeRO-2 on the same 16 GPUs", {**FOUR_OH_FIVE, "dp": 16, "zero": 2},
              "Adds the gradients to what is sharded; the bf16 weights stay whole on every "
              "GPU: {value}."),
             ("z1x128", "ZeRO-1 on 128 GPUs instead of 16",
              {**FOUR_OH_FIVE, "dp": 128, "zero": 1},
              "More GPUs shrink only the sharded optimizer part; the 4 bytes of weights and "
              "gradients per parameter stay on each: {value}."),
             ("z3", "ZeRO-3 on the same 16 GPUs", {**FOUR_OH_FIVE, "dp": 16, "zero": 3},
              "Shards all 16 bytes, weights included: {value}, at about 1.5 times the "
              "traffic."),
             ("z0x128", "Plain data parallelism on 128 GPUs",
              {**FOUR_OH_FIVE, "dp": 128, "zero": 0},
              "Plain DP copies every byte of state to every GPU, however many: {value}.")),
            best="min", fmt=gb,
            hint="What stays whole on every GPU under each choice?",
            solution="{best}. ZeRO-3 on 16 {z3}, ZeRO-2 on 16 {z2}, ZeRO-1 on 128 {z1x128}, "
                     "plain DP on 128 {z0x128}: what a stage leaves unsharded sets the floor, "
                     "and more GPUs cannot lower it."),
    ),
    "tp": (
        predict(
            "tp-predict-70b",
            "Switch the model to Llama 3.1 70B (hidden size 8,192, half of 405B's 16,384), "
            "still TP8 on NVLink. Predict the TP efficiency, in %.",
            "tp", TP_70B, "efficiency", unit="%", scale=100,
            hint="Compute per layer grows with h², the bytes all-reduced with h: a smaller "
                 "model spends a larger share of its time communicating.",
            explanation=tp_70b_worked),
        decide(
            "tp-decide-efficiency",
            "Llama 3.1 405B runs TP8 inside an NVLink node. Which change costs the most TP "
            "efficiency?",
            "tp", "efficiency",
            (("pcie", "The same 8 GPUs joined by PCIe 5.0 instead of NVLink",
              {"tp": 8, "intra_link": "pcie-5"},
              tp_pcie_why),
             ("span", "Nodes of 4 GPUs, so TP8 spans two nodes over InfiniBand",
              {"tp": 8, "gpus_per_node": 4}, tp_span_why),
             ("sp", "Turn on sequence parallelism", {"tp": 8, "sp": True}, tp_sp_why),
             ("long", "Train on 8,192-token sequences instead of 4,096",
              {"tp": 8, "seq_len": 8192},
              "Compute and the bytes sent both double; attention grows a little faster: "
              "{value}.")),
            best="min", fmt=pct,
            hint="TP's traffic runs every layer, forward and backward: what sets its speed?",
            solution="{best}. TP efficiency: PCIe {pcie}, across two nodes {span}, "
                     "sequence parallel {sp}, longer sequences {long}. TP needs the fastest "
                     "link on every GPU of its group."),
    ),
    "pipeline": (
        predict(
            "pipeline-predict-gpipe-memory",
            "GPipe keeps each micro-batch's activations until its backward pass. Run the "
            "memory panel's plan (Llama 3.1 70B, TP 8, 4,096-token sequences, micro-batch 1) "
            "as 4 stages with 32 micro-batches under GPipe. Predict the heaviest stage's "
            "memory, in GB.",
            "pipeline", {"schedule": "gpipe", "stages": 4, "microbatches": 32},
            heaviest_stage, unit="GB", scale=1e-9,
            hint="The stage's state plus 32 micro-batches of its layers' activations "
                 "(the memory chart's unit per micro-batch).",
            explanation="{answer} GB, on the last stage: its share of the state plus 32 "
                        "micro-batches of its layers' activations, since every micro-batch "
                        "is in flight on every stage at the turn from forward to backward. "
                        "The last stage is heavier than the first: for each micro-batch it "
                        "also keeps the fp32 logits, 4 × s × vocabulary ÷ t = 4 × 4,096 × "
                        "128,256 ÷ 8 = 263 MB, and the final norm's fp32 output, 4 × 4,096 × "
                        "8,192 ÷ 8 = 16.8 MB. 1F1B would hold at most 4 micro-batches."),
        decide(
            "pipeline-decide-bubble",
            "4 stages, 8 micro-batches, 1F1B. Which change shrinks the bubble the most?",
            "pipeline", "bubble_fraction",
            (("gpipe", "Switch to GPipe", {"schedule": "gpipe", "stages": 4, "microbatches": 8},
              "GPipe runs the same warm-up and cool-down as 1F1B; it differs in memory, not "
              "time: 3/11, {value} idle."),
             ("interleaved", "Interleaved 1F1B with 2 chunks per rank",
              {"schedule": "interleaved-1f1b", "stages": 4, "microbatches": 8, "virtual": 2},
              "Each chunk is half a stage, so the warm-up is half as long: 3/(16 + 3), "
              "{value} idle."),
             ("zb", "Zero bubble (ZB-H1): split the backward into I and W (F = I = W)",
              {"schedule": "zb-h1", "stages": 4, "microbatches": 8},
              "The weight-gradient work W has no one waiting on it, so it fills the idle "
              "slots: 3 idle slots over 3m + 3 = 27, {value} idle. With W shorter than I "
              "the gain shrinks."),
             ("m16", "16 micro-batches instead of 8",
              {"schedule": "1f1b", "stages": 4, "microbatches": 16},
              "The same p − 1 idle slots over twice the work: 3/19, {value} idle.")),
            best="min", fmt=pct,
            hint="Which choice puts work into the idle slots rather than spreading them "
                 "thinner?",
            solution="{best}. Bubble: ZB-H1 {zb}, interleaved {interleaved}, 16 "
                     "micro-batches {m16}, GPipe {gpipe}. (p − 1)/(m + p − 1) with p = 4: "
                     "3/11 at m = 8, 3/19 at m = 16."),
    ),
    "cp": (
        predict(
            "cp-predict-busiest-32",
            "32 tokens split contiguously over CP = 8 ranks (4 tokens each). Predict the "
            "causal (query, key) pairs of the busiest rank.",
            "cp", {"tokens": 32, "cp": 8}, "busiest_pairs", unit="pairs",
            hint="The last rank holds tokens 28–31; query q sees keys 0..q.",
            explanation="{answer}: 29 + 30 + 31 + 32, on the rank holding the last tokens.",
            rel_tol=0.005),
        decide(
            "cp-decide-layout",
            "GPT-3 175B (96 heads, each with its own K and V: no grouped-query attention), "
            "one 131,072-token sequence over CP = 8 on NVLink 4. Which layout sends the fewest "
            "bytes per GPU per layer?",
            "cp", "comm_bytes_per_gpu",
            tuple((key, label, {"model": "gpt-3-175b", "seq_len": 131072, "cp": 8,
                                "tokens": 64, "layout": layout, "link": "nvlink-4"}, why)
                  for key, label, layout, why in (
                ("ring", "Zigzag ring: pass K/V blocks c − 1 times", "zigzag",
                 "7 blocks of 16,384 tokens, each token's K and V 2 × 12,288 × 2 B = "
                 "49,152 B: {value}."),
                ("allgather", "All-gather the whole sequence's K/V", "allgather",
                 "7/8 of 131,072 tokens × 49,152 B, the same bytes as the ring: {value}."),
                ("ulysses", "Ulysses: all-to-all by heads", "ulysses",
                 "7/8 of each rank's 16,384 tokens of Q, K, V and the output, 98,304 B a "
                 "token: {value}. Without grouped-query attention K and V are as large as "
                 "Q, and Ulysses' 1/c shard wins."))),
            best="min", fmt=gb,
            hint="The ring and the all-gather send the whole sequence's K/V; Ulysses sends a "
                 "1/c shard of Q, K, V and the output. Which is smaller when K/V is big?",
            solution="{best}. Bytes per GPU: ring {ring}, all-gather {allgather}, Ulysses "
                     "{ulysses}. With Llama 3.1 70B's 8 KV heads (grouped-query attention) "
                     "the ring sends less than Ulysses instead."),
    ),
    "moe": (
        predict(
            "moe-predict-params-dsv3",
            "DeepSeek-V3 (671B parameters, 256 routed experts a layer) on 8 nodes with EP = 64 "
            "and no TP or PP: each GPU keeps 4 of each layer's routed experts. Predict the "
            "parameters each GPU holds, in billions.",
            "moe", {"model": "deepseek-v3", "nodes": 8, "ep": 64}, "params_per_gpu",
            unit="B params", scale=1e-9,
            hint="Each GPU keeps all the shared weights (attention, embeddings, routers, the "
                 "shared expert and the dense layers) and 1/EP of the routed experts.",
            explanation="{answer} billion. Each routed expert is 3 × 7,168 × 2,048 = 44.0M "
                        "parameters; 58 MoE layers × 256 × 44.0M = 654B are routed experts, "
                        "so 671 − 654 = 17B are shared and sit whole on every GPU: "
                        "654 / 64 + 17 = {answer}."),
        decide(
            "moe-decide-skew",
            "Mixtral 8×7B, EP8 on 2 nodes, routing skew 0.8: one MoE layer takes far longer "
            "than with uniform routing. Which change cuts the layer's time most?",
            "moe", "layer_s",
            (("balance", "Balance the router (skew 0: the best a balancing loss or DeepSeek's "
                          "bias can reach)",
              {"nodes": 2, "ep": 8, "skew": 0.0},
              "The layer waits for the GPU with the most tokens; balanced, none has more "
              "than its share: {value}. That is the ideal: a real router stays somewhat "
              "uneven (step 4's limit), so a run lands between this and the skewed time."),
             ("capacity", "Cap each expert at 1.25 × its fair share of tokens",
              {"nodes": 2, "ep": 8, "skew": 0.8, "capacity_factor": 1.25},
              "Capping drops the overflow tokens (they skip the expert), so it buys time "
              "with quality: {value}."),
             ("deepep", "Dispatch with DeepEP instead of NCCL's all-to-all",
              {"nodes": 2, "ep": 8, "skew": 0.8, "ep_dispatch": "deepep"},
              "A faster dispatch trims the communication, not the hot expert's compute: "
              "{value}."),
             ("nodes", "Run on 4 nodes instead of 2",
              {"nodes": 4, "ep": 8, "skew": 0.8},
              "More nodes add expert-data-parallel copies; each EP group still has one hot "
              "expert: {value}.")),
            best="min", fmt=ms,
            hint="The cause is what makes one GPU slower than the rest.",
            solution="{best}. Layer time: balanced {balance}, capped {capacity}, DeepEP "
                     "{deepep}, 4 nodes {nodes}. The cause is the skew; capping hides it by "
                     "dropping tokens."),
        decide(
            "moe-decide-network",
            "DeepSeek-V3 on 256 H800 nodes as PP16 × EP64, on a network whose leaf switches "
            "hold 4 nodes each with a 4:1 spine: every EP group spans 8 nodes, so its "
            "dispatch crosses the spine. Which one change cuts a MoE layer's time most?",
            "moe", "layer_s",
            tuple((key, label, {**V3_NET, **change}, why) for key, label, change, why in (
                ("ep32", "EP 32: each EP group on 4 nodes, under one leaf",
                 {"ep": 32},
                 "Nothing of the dispatch climbs to the spine, and fewer of its bytes leave "
                 "the node's NVLink: {value}. Each GPU now holds 8 experts a layer, not 4."),
                ("leaf8", "Place the job on leaves of 8 nodes (same 4:1 spine)",
                 {"leaf_nodes": 8},
                 "Each EP group now sits under one leaf, so the spine carries none of it; "
                 "the dispatch still crosses 8 nodes' NICs: {value}."),
                ("spine2", "Rebuild the spine at 2:1", {"oversubscription": 2.0},
                 "4/7 of each GPU's network bytes still climb to the spine, now at half the "
                 "shortfall: 4/7 × 2 = 1.14 times the network leg: {value}."),
                ("deepep", "Dispatch with DeepEP instead of NCCL's all-to-all",
                 {"ep_dispatch": "deepep"},
                 "One copy per destination node instead of one per expert, but half of "
                 "those nodes are still across the spine: {value}."))),
            best="min", fmt=ms,
            hint="What crosses the spine is the share of an all-to-all's bytes bound for "
                 "another leaf. Which change makes that share zero, and which also sends "
                 "fewer bytes over the network at all?",
            solution="{best}. Layer time: EP 32 {ep32}, leaves of 8 {leaf8}, a 2:1 spine "
                     "{spine2}, DeepEP {deepep}. Fitting the group under one leaf beats "
                     "buying back the spine."),
    ),
    "recipe": (
        predict(
            "recipe-predict-bubble-40",
            "GPT-3 175B as TP8 × PP4 × DP2: raise the micro-batches from 16 to 40. Predict "
            "the pipeline bubble, in %.",
            "recipe", {"microbatches": 40}, "bubble_fraction", unit="%", scale=100,
            hint="1F1B's bubble is (p − 1)/(m + p − 1).",
            explanation="{answer}%: 3 / 43.", rel_tol=0.05),
        decide(
            "recipe-decide-mfu",
            "GPT-3 175B on 64 A100s as TP8 × PP4 × DP2 with 16 micro-batches. Which change "
            "raises MFU the most?",
            "recipe", "mfu",
            (("tp4pp8", "TP4 × PP8 (TP groups of 4, half the layers per GPU)", {"tp": 4, "pp": 8},
              "Less TP traffic, but twice the stages: the bubble grows to 7 slots: MFU "
              "{value}."),
             ("m64", "64 micro-batches instead of 16 (a 4× larger global batch)",
              {"microbatches": 64},
              "The 3 idle slots now spread over 64 micro-batches: MFU {value}."),
             ("full", "Full activation recomputation", {"recompute": "full"},
              "Recomputing every layer's forward costs about a third more compute, which "
              "MFU does not count: MFU {value}."),
             ("nooverlap", "Stop overlapping DP's gradient sync with the backward pass",
              {"dp_overlap": False},
              "The sync (a reduce-scatter of the gradients with ZeRO-1) then sits exposed at "
              "the end of the step: MFU {value}.")),
            best="max", fmt=pct,
            hint="Which of the step's losses is largest at 16 micro-batches, and which "
                 "choice shrinks it?",
            solution="{best}. MFU: 64 micro-batches {m64}, no DP overlap {nooverlap}, TP4 × "
                     "PP8 {tp4pp8}, full recomputation {full}. The bubble, 3/19 of the step, "
                     "is the largest loss here."),
        decide(
            "recipe-decide-overlap",
            f"Qwen3-235B-A22B ({QWEN.experts} experts a layer, {QWEN.top_k} a token) on 128 "
            "H100s: 16 nodes of 8, "
            "NVLink inside, InfiniBand HDR between. TP2 × PP2 × EP16 × DP32, 8 micro-batches "
            "of 4,096 tokens, full recomputation, TP overlap 'backward', DP overlap on. The "
            f"experts take no TP, so each EP group is {QWEN_EP.per_node} GPUs on each of "
            f"{QWEN_EP.nodes} nodes, and a micro-batch's all-to-alls take longer than its "
            "compute. Which one change shortens the step most?",
            "recipe", "step_s",
            (("ep", "Overlap the EP all-to-all with another micro-batch's compute",
              {**QWEN_EP16, "ep_overlap": True}, _overlap_ep_why),
             ("tp", "TP overlap 'all' (Transformer Engine's userbuffers)",
              {**QWEN_EP16, "tp_overlap": "all"}, _overlap_tp_why),
             ("deepep", "Dispatch with DeepEP instead of NCCL's all-to-all",
              {**QWEN_EP16, "ep_dispatch": "deepep"}, _overlap_deepep_why),
             ("zero3", "ZeRO-3, each layer's weights gathered one layer ahead",
              {**QWEN_EP16, "zero": 3},
              "Every micro-batch now gathers each layer's weights twice and reduce-scatters "
              "its gradients over the same InfiniBand HDR the all-to-all already fills: step "
              "{value}.")),
            best="min", fmt=ms,
            hint="How much of an all-to-all longer than the compute can another micro-batch's "
                 "compute hide? And how many copies of a token cross the network in each "
                 "dispatch (EP07 step 3)?",
            solution="{best}. Step: DeepEP {deepep}, EP overlap {ep}, TP overlap 'all' {tp}, "
                     "ZeRO-3 {zero3}. Overlap hides a collective only behind the compute "
                     "beside it, and here the all-to-all is longer. DeepEP sends fewer copies "
                     "across the network, so there is less to hide."),
        decide(
            "recipe-decide-fsdp",
            "Llama 3.1 8B on 16 H100s: 2 nodes of 8, NVLink inside, InfiniBand HDR between. "
            "FSDP16 (ZeRO-3 over all 16), 16 micro-batches of one 2,048-token sequence, "
            "flash attention, and FSDP's backward prefetch switched off, so each layer's "
            "backward waits for its own gather. Keeping the global batch, which one change "
            "shortens the step most on GPUs that still fit it?",
            "recipe", _step_or_unfit,
            (("prefetch", "Switch backward prefetch on",
              {**FSDP_8B, "fsdp_prefetch": True},
              "Each layer's backward gather now runs beside the layer before it, but it still "
              f"runs, twice a micro-batch with the forward's, and NCCL's {RING_CTAS} channels "
              "take SMs from the GEMMs beside it. Step {value}."),
             ("keep", "Keep each layer's gathered weights after the forward "
              "(reshard_after_forward off)",
              {**FSDP_8B, "reshard_after_forward": False}, _fsdp_keep_why),
             ("mb2", "Two sequences per micro-batch, 8 micro-batches",
              {**FSDP_8B, "micro_batch": 2, "microbatches": 8},
              "Each gather now feeds twice the tokens, so half as many gathers a step, but "
              "each layer's backward still waits for its own. Step {value}."),
             ("tp2", "TP2 inside a node × FSDP8, 32 micro-batches",
              {**FSDP_8B, "tp": 2, "dp": 8, "microbatches": 32},
              "TP halves each GPU's weights and its compute, but adds TP's collectives to "
              "every layer, and twice the micro-batches each gather again. Step {value}.")),
            best="min", fmt=ms_or_unfit,
            hint="What does the backward's gather cost with prefetch, and what does it cost "
                 "not to gather at all? Then: do the gathered weights fit?",
            solution="{best}. Step: prefetch on {prefetch}, kept weights {keep}, two "
                     "sequences a micro-batch {mb2}, TP2 × FSDP8 {tp2}. Where the gathered "
                     "weights fit, keeping them removes the backward's gather, where "
                     "prefetch only hides it. Step 13's Llama 3.1 70B could not afford it."),
        decide(
            "recipe-decide-2d",
            "Llama 3.1 70B on 256 H100s (32 nodes of 8, NVLink inside, InfiniBand NDR "
            "between), 64 sequences of 8,192 tokens a step, flash attention, no "
            "recomputation. Which plan gives the shortest step?",
            "recipe", "step_s",
            (("fsdp4", "FSDP + TP: TP4 × DP64, ZeRO-3, one micro-batch",
              {**TWO_D_256, "tp": 4, "dp": 64, "zero": 3, "microbatches": 1},
              "No bubble, and each GPU still computes a whole 8,192-token sequence per "
              "micro-batch: enough to hide most of FSDP's gathers one layer ahead. Step "
              "{value}."),
             ("fsdp8", "FSDP + TP: TP8 × DP32, ZeRO-3, two micro-batches",
              {**TWO_D_256, "tp": 8, "dp": 32, "zero": 3, "microbatches": 2},
              "TP8 halves each GPU's compute but not its TP traffic (EP04), and its FSDP group "
              "now has one GPU per node, so the gathers hide less too. Step {value}."),
             ("interleaved", "TP4 × PP4 × DP16, interleaved 1F1B with 4 chunks, 4 "
              "micro-batches",
              {**TWO_D_256, "tp": 4, "pp": 4, "dp": 16, "microbatches": 4,
               "schedule": "interleaved-1f1b", "virtual": 4},
              "Interleaving cuts the bubble of 4 stages and 4 micro-batches from 3/7 to "
              "3/(4·4 + 3) = 3/19 of the step, but it still idles, longer than FSDP's "
              "exposed gathers. Step {value}."),
             ("pipeline", "TP8 × PP4 × DP8, 1F1B, 8 micro-batches",
              {**TWO_D_256, "tp": 8, "pp": 4, "dp": 8, "microbatches": 8},
              "8 micro-batches on 4 stages idle 3/11 of the step, and TP8 pays TP's traffic "
              "on half the compute. Step {value}.")),
            best="min", fmt=ms,
            hint="How many micro-batches does each 3-D replica get to fill its bubble, and "
                 "how many tokens does each GPU compute per FSDP gather?",
            solution="{best}. Step: TP4 × DP64 FSDP {fsdp4}, TP8 × DP32 FSDP {fsdp8}, "
                     "TP4 × PP4 × DP16 interleaved {interleaved}, TP8 × PP4 × DP8 "
                     "{pipeline}. With 64 sequences on 256 GPUs a 3-D replica has few "
                     "micro-batches to fill its bubble, while FSDP needs only one sequence "
                     "per group of t GPUs and hides its gathers behind it."),
    ),
    "placement": (
        predict(
            "placement-predict-rollout-2x",
            "GLM-4-9B colocated: double the responses per prompt from 8 to 16, so twice the "
            "tokens are generated. Predict the rollout phase's seconds.",
            "placement", {"preset": "glm-4-9b", "responses_per_prompt": 16}, "rollout_seconds",
            unit="s",
            hint="Step 6's why splits the rollout into three parts: which grow with the "
                 "requests an engine holds, and which is read once for the whole batch?",
            explanation="{answer} s: not twice the time. Take step 6's split of the rollout: "
                        "each decode step reads the weights once for the whole batch, so "
                        "their part stays; the prefill and the cache reads double with the "
                        "requests. Weights + 2 × (prefill + cache) = {answer} s."),
        decide(
            "placement-decide-throughput",
            "You have 16 H100s for GLM-4-9B's RL recipe (64 samples a step: TP 2 × CP 2 "
            "replicas, rollout engines of 2 GPUs). Which plan gives the most samples per "
            "second?",
            "placement", "samples_per_second",
            (("colocated", "All 16 colocated: DP 4 and 8 engines, taking turns",
              {"placement": "colocated", "train_gpus": 16, "engines": 8},
              "The phases still take turns, so a step is rollout + training + sync. Twice the "
              "replicas halve the training, but twice the engines barely shorten the rollout: "
              "decoding is bound by reading the weights, which each engine does every token "
              "whatever its batch, so half the requests per engine take nearly as long: "
              "{value}."),
             ("separate", "8 training GPUs and 8 rollout GPUs (4 engines), working at once",
              {"placement": "separate", "train_gpus": 8, "engines": 4},
              "The pools work at the same time, so a step is max(rollout, training) + sync: "
              "training on 8 GPUs takes about half the rollout's time and hides behind it. "
              "The price: samples come from weights one step old: {value}."),
             ("more-training", "12 training GPUs and 4 rollout GPUs (2 engines), working "
              "at once", {"placement": "separate", "train_gpus": 12, "engines": 2},
              "The pools still overlap, but the step waits for the slower one, and that was "
              "already the rollout. Half the engines now hold twice the requests each: every "
              "decode step reads twice the KV cache, so the rollout grows, while the faster "
              "training only waits longer for it: {value}.")),
            best="max", fmt=per_s,
            hint="A step of separate pools takes as long as its slower pool, plus the sync. "
                 "Which pool is the slower one for this recipe, and which plan starves it?",
            solution="{best}. Samples per second: 8 + 8 {separate}, 12 + 4 {more-training}, "
                     "all 16 colocated {colocated}. "
                     "Overlap wins when neither pool waits long for the other."),
    ),
    "precision": (
        predict(
            "precision-predict-lora-24",
            "LoRA on all seven linear layers of Llama 3.1 8B (32 layers; q and o map 4,096 "
            "to 4,096, k and v 4,096 to 1,024, gate and up 4,096 to 14,336, down 14,336 to "
            "4,096) with rank r = 24. Predict the trainable parameters, in millions.",
            "precision", {"rank": 24, "modules": "all"},
            lambda a: a["finetune"][1]["trainable_params"], unit="M params", scale=1e-6,
            hint="Each adapted matrix adds r·(d_in + d_out); add the seven.",
            explanation="{answer} million: 32 × 24 × (8,192 + 5,120 + 5,120 + 8,192 + 3 × "
                        "18,432). The MLP's three matrices are two thirds of it.",
            rel_tol=0.02),
        decide(
            "precision-decide-qlora-fit",
            "You fine-tune Llama 3.1 70B with QLoRA (a 4-bit base, small adapters on q and "
            "v) on 8,192-token sequences, with selective recomputation only: each layer keeps "
            "its activations (the QLoRA paper checkpoints every layer; this run does not yet). "
            "It does not fit one GPU. Which single change, on the same data, cuts the bytes "
            "QLoRA holds on the GPU the most?",
            "precision", finetune_bytes("qlora"),
            (("recompute", "Full recomputation (gradient checkpointing)",
              {**SEVENTY, "recompute": "full"},
              "Each layer keeps only its input and recomputes the rest in the backward: the "
              "activations of 8,192 tokens, most of the bill, shrink: {value}."),
             ("every2", "Full recomputation of every second layer only",
              {**SEVENTY, "recompute": "every-2nd"},
              "Half the layers keep only their input; the other half still keep everything, "
              "so the activations about halve: {value}. Recomputing every layer cuts more, "
              "for one more forward pass of the other half."),
             ("paged", "A paged optimizer", {**SEVENTY, "paged": True},
              "It moves only the adapters' optimizer state to host RAM, a fraction of a GB: "
              "{value}."),
             ("rank", "A smaller LoRA rank: 8", {**SEVENTY, "rank": 8},
              "The adapters shrink, but they were already small beside the base and the "
              "activations: {value}.")),
            best="min", fmt=gb,
            hint="What grows with the tokens, and which change stops keeping it?",
            solution="{best}. QLoRA on the GPU: full recomputation {recompute}, every second "
                     "layer {every2}, paged optimizer {paged}, rank 8 {rank}. At 8,192 "
                     "tokens the activations, not the 4-bit base, are most of the bill."),
    ),
    "failures": (
        predict(
            "failures-predict-mtbi-32k",
            "Llama 3.1 405B's job grows from 16,384 to 32,768 GPUs, each GPU failing at the "
            "same rate. Predict the minutes between interruptions.",
            "failures", {"gpus": 32768}, "mtbi_s", unit="minutes", scale=1 / 60,
            hint="Interruptions come from any GPU: twice the GPUs, twice the rate.",
            explanation="{answer} minutes: half the time between interruptions at 16,384 "
                        "GPUs."),
        decide(
            "failures-decide-goodput",
            "Llama 3.1 405B on 16,384 GPUs saves asynchronously every 30 minutes and takes 10 "
            "minutes to restart. Which change raises the goodput the most?",
            "failures", "chosen.goodput",
            (("often", "Save every 10 minutes instead of 30", {"interval": 600},
              "An asynchronous save barely stops training, and a failure now loses at most "
              "10 minutes of work, not 30: goodput {value}."),
             ("restart", "Restart in 5 minutes instead of 10", {"restart": 300},
              "Each interruption costs 5 minutes less, but the lost work since the last "
              "save is unchanged: goodput {value}."),
             ("storage", "Twice the storage bandwidth", {"storage_bw": 4e12},
              "The save's write runs in the background already; faster storage shortens "
              "what no one waits for: goodput {value}.")),
            best="max", fmt=pct,
            hint="Of the lost time (saving, re-doing lost work, restarting), which is largest "
                 "here, and which choice shrinks it?",
            solution="{best}. Goodput: saving every 10 minutes {often}, restarting in 5 "
                     "{restart}, faster storage {storage}. Re-doing the work since the last "
                     "save costs half an interval per failure on average."),
    ),
    "playground": (
        # A recap's predict combines two episodes (EP12 cold reading, item 10: 1/33 at 32
        # micro-batches was EP05's formula again): EP02's global batch = DP x micro-batches,
        # held while DP doubles, then EP05's bubble at the micro-batches each replica is left.
        predict(
            "playground-predict-bubble",
            "The worked plan trains 32 sequences a step: DP 2 replicas × 16 micro-batches of "
            "one sequence, each replica a TP8 × PP2 pipeline. Double the cluster to 8 nodes "
            "at the same TP8 × PP2, so DP is 4, and keep the 32 sequences a step. Predict the "
            "pipeline's bubble as a share of the step (idle time over the whole step), in %.",
            "playground", {"nodes": 8, "dp": 4, "microbatches": 8},
            "panels.pipeline.answer.bubble_fraction", unit="%", scale=100,
            hint="How many micro-batches does each replica get now? Then EP05's bubble, "
                 "a share of the step, (p − 1)/(m + p − 1); not the papers' idle over busy, "
                 "(p − 1)/m.",
            explanation="{answer}%: 32 sequences ÷ 4 replicas = 8 micro-batches each, so "
                        "(2 − 1)/(8 + 2 − 1) = 1/9. More replicas at the same global batch "
                        "leave each pipeline fewer micro-batches to fill its bubble (step 3's "
                        "limit).", rel_tol=0.05),
        decide(
            "playground-decide-memory",
            "Start from the worked plan. Which change cuts the 3D recipe's memory on its "
            "heaviest GPU most?",
            "playground", "panels.recipe.answer.memory_per_gpu_bytes",
            (("zero3", "ZeRO-3 instead of ZeRO-1", {"zero": 3},
              "Shards the bf16 weights and gradients as well, over DP = 2 only: {value}."),
             ("tp4pp4", "TP4 × PP4 instead of TP8 × PP2", {"tp": 4, "pp": 4},
              "Each GPU holds as many weights as before (a quarter of each layer, but half "
              "as many layers). Its activations double: TP 4 splits each layer's activations "
              "4 ways, not 8, and the first stage now keeps 4 micro-batches in flight, not 2: "
              "{value}."),
             ("full", "Full activation recomputation", {"recompute": "full"},
              "At 8,192 tokens the saved activations are the largest item: keeping only each "
              "layer's input leaves {value}."),
             ("m32", "32 micro-batches instead of 16", {"microbatches": 32},
              "1F1B keeps at most p micro-batches in flight, however many there are: "
              "{value}.")),
            best="min", fmt=gb,
            hint="Which item of the ledger is largest at 8,192 tokens?",
            solution="{best}. Memory per GPU: full recomputation {full}, ZeRO-3 {zero3}, "
                     "32 micro-batches {m32}, TP4 × PP4 {tp4pp4}."),
    ),
}
