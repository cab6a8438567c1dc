"""EP08's predict and decide drills (``LESSON_DRILLS["recipe"]``): the overlap drill's plans and
figures are ``recipe_overlap``'s, the 2-D against 3-D drill's ``recipe_two_d``'s."""

import math

from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.recipe_overlap import (
    QWEN,
    QWEN_EP,
    QWEN_EP16,
    expert_weight_bytes,
    overlap_deepep_why,
    overlap_ep8_why,
    overlap_ep_why,
    overlap_tp_why,
    qwen_memory,
)
from app.lesson_drills.recipe_two_d import TWO_D_CHOICES, crossover_why, two_d_solution
from app.lesson_drills.units import gb, ms, ms_or_unfit, pct
from labs.hardware.gpus import get_gpu
from labs.hardware.nccl_constants import RING_CTAS
from labs.model.presets import get_model


def dp_bytes(answer: dict) -> float:
    """The bytes a GPU's data-parallel (or ZeRO-3) traffic sends a step (the answer's
    traffic row for DP)."""
    return next(t["bytes_per_step"] for t in answer["traffic"] if t["name"] == "dp")


# EP08's FSDP drill (step 13): Llama 3.1 8B on 2 H100 nodes as FSDP16 over InfiniBand HDR,
# 16 micro-batches of one 2,048-token sequence, backward prefetch off. Step 13's 70B cannot
# keep its gathered weights (99.7 GB a GPU); this 8B can, so reading the step is not enough.
# Round-18 cold reading B, finding 6: the 8B of the old case kept its gathered weights with
# room to spare, so step 13's why ("keep the gathered weights: the backward gathers nothing")
# answered the drill. Llama 3.1 70B as TP8 x FSDP4 is tight: keeping a layer's weights adds
# 2 B x P / TP, and twice the tokens a micro-batch, or half the TP, double the activations; the
# student must work out which still fits.
FSDP_70B = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "nodes": 4, "gpus_per_node": 8,
            "intra_link": "nvlink-4", "inter_link": "ib-hdr", "seq_len": 8192, "tp": 8,
            "pp": 1, "dp": 4, "zero": 3, "recompute": "flash", "microbatches": 16,
            "fsdp_prefetch": False}


def fsdp_case_memory() -> float:
    """The drill's plan's memory a GPU, by the lab (the question states it)."""
    from app.routers.recipe_state import RecipeQuery, run

    return run(RecipeQuery(**FSDP_70B), two_d=False).result.memory_per_gpu_bytes


def _fsdp_fit(answer: dict, why: str) -> str:
    """An option's reason: its own why where it fits, else its memory against the GPU's."""
    if answer["fits"]:
        return why
    return (f"It does not fit: {gb(answer['memory_per_gpu_bytes'])} a GPU, over the H100's "
            f"{gb(get_gpu(FSDP_70B['gpu']).memory_bytes)}. {why}")


def _fsdp_keep_why(answer: dict) -> str:
    kept = 2 * get_model(FSDP_70B["model"]).params / FSDP_70B["tp"]
    return _fsdp_fit(answer, (
        "The backward gathers nothing: one gather a layer and micro-batch, not two, "
        f"{gb(dp_bytes(answer))} a step, and no gather to wait for. The gathered weights stay: "
        f"2 B × {get_model(FSDP_70B['model']).params / 1e9:.1f}B ÷ TP{FSDP_70B['tp']} = "
        f"{gb(kept)} more, {gb(answer['memory_per_gpu_bytes'])} a GPU, within the H100's "
        f"{gb(get_gpu(FSDP_70B['gpu']).memory_bytes)}. Step {{value}}."))


def _bubble_why(answer: dict) -> str:
    """The state's 1F1B bubble as (p − 1)/(v·m + p − 1) of the pipeline's time, and its share
    of the whole step, the step bar's grey (round-19 cold reading Y, finding 1: the step also
    holds DP's exposed sync and the optimizer step, outside the pipeline)."""
    p, m = answer["plan"]["pp"], answer["plan"]["microbatches"]
    v = answer["plan"]["virtual"] if answer["plan"]["schedule"].startswith("interleaved") else 1
    slots = f"{v}·{m} + {p - 1}" if v > 1 else f"{m} + {p - 1}"
    step = answer["segments_s"]["bubble"] / answer["step_s"]
    return (f"{p - 1}/({slots}) = {pct(answer['bubble_fraction'])} of the pipeline's time "
            f"({pct(step)} of the whole step)")


def _exposed(answer: dict, name: str) -> float:
    """A cause's exposed seconds a step (the answer's causes)."""
    return sum(c["exposed_s"] for c in answer["causes"] if c["name"] == name)


def _step_or_unfit(answer: dict) -> float:
    """A plan's step, or infinity where it does not fit its GPUs (no step at all)."""
    return answer["step_s"] if answer["fits"] else math.inf


# Step 11's decide: changes to the seed plan (app.routers.recipe_lesson.SEED, the view's
# default state) that keep its global batch of 16 micro-batches × DP2 (round-8 cold reading
# of EP08, item 3: the old right option, 64 micro-batches, grew the batch 4×).
def _mfu_gap(found: dict[str, float]) -> str:
    """How far recipe-decide-mfu's right option stands from the next, against the lab's error
    on Megatron-LM's calibration runs (labs.recipe.runs.summary): round-10 cold reading of
    EP08, finding 4, and round 16's finding 2 (a margin inside that error is a coin-flip)."""
    from labs.recipe.runs import checks, summary

    first, second = sorted(found.values(), reverse=True)[:2]
    errs = summary(checks())
    spread = errs["max_ratio"] - errs["min_ratio"]
    wide = first / second - 1 > spread
    return (f"The margin is {(first - second) * 100:.1f} points, {first / second - 1:.1%} of "
            f"MFU: {'wider' if wide else 'less'} than the spread of the lab's own error on "
            f"Megatron-LM's {errs['runs']} A100 runs (fast by {errs['min_ratio'] - 1:.1%} to "
            f"{errs['max_ratio'] - 1:.1%})" + (
                ", so a real run ranks them the same way." if wide else
                ", so a real run could rank the two the other way."))


# Each option moves what step 11's chart splits by cause: the bubble (two chunks halve it; 8
# stages or 8 micro-batches of two sequences grow it, by the bubble's formula; 2 stages shrink
# it but stretch TP over InfiniBand). The old 'TP overlap all' option tied with interleaving
# on what the page had taught (round-16 cold reading, finding 2); 'full recomputation' lost
# by the 39.6% steps 10 and 11 print (round-29 reading C, finding 7): TP16 x PP2 needs
# working out, the bubble it saves against the TP it exposes.
MFU_CHOICES = {"interleaved": {"schedule": "interleaved-1f1b", "virtual": 2},
               "mb2": {"micro_batch": 2, "microbatches": 8}, "tp16pp2": {"tp": 16, "pp": 2},
               "tp4pp8": {"tp": 4, "pp": 8}}


def _seed() -> dict:
    """The seed plan's answer (the recipe view's default state)."""
    return lab_value("recipe", {}, lambda a: a)


def _interleaved_why(answer: dict) -> str:
    seed = _seed()
    return (f"Two chunks a GPU make each idle slot half as long: the bubble is "
            f"{_bubble_why(answer)}, not 3/19, and falls from "
            f"{ms(_exposed(seed, 'bubble'))} to {ms(_exposed(answer, 'bubble'))} a step. Each "
            f"micro-batch crosses the stages twice as often, and DP's gradient sync hides "
            f"behind one chunk's backward, half the stage's: {ms(_exposed(answer, 'dp'))} of "
            f"it waits, against {ms(_exposed(seed, 'dp'))}. MFU {{value}}.")


def _bubble_40() -> float:
    """The predict drill's bubble, a share of the step, as the lab gives it."""
    return lab_value("recipe", {"microbatches": 40}, "bubble_fraction")


DRILLS: tuple[Drill | Decide, ...] = (
    predict(
        "recipe-predict-bubble-40",
        "GPT-3 175B as TP8 × PP4 × DP2: raise the micro-batches from 16 to 40. Predict "
        "the pipeline bubble, as a share of the pipeline's time, in %.",
        "recipe", {"microbatches": 40}, "bubble_fraction", unit="%", scale=100,
        hint="1F1B's bubble is (p − 1)/(m + p − 1).",
        explanation="{answer}%: 3 / 43.", rel_tol=0.05,
        mistakes=(
            Mistake("papers", lambda: 100 * _bubble_40() * 43 / 40,
                    "that is (p − 1)/m, the papers' idle over busy time. As a share of the "
                    "pipeline's time the idle p − 1 stage-steps divide by all m + p − 1."),
            Mistake("unchanged", lambda: 100 * lab_value("recipe", {}, "bubble_fraction"),
                    "that is the bubble at 16 micro-batches. The same p − 1 idle stage-steps "
                    "now sit among 40 micro-batches of work."),
        )),
    decide(
        "recipe-decide-mfu",
        "GPT-3 175B on 64 A100s as TP8 × PP4 × DP2, 1F1B, 16 micro-batches of one sequence. "
        "The global batch, 32 sequences, is the optimiser's choice (step 3): keeping it, "
        "which one change raises MFU the most?",
        "recipe", "mfu",
        (("interleaved", "Interleaved 1F1B: 2 model chunks a GPU, 12 layers each",
          MFU_CHOICES["interleaved"], _interleaved_why),
         ("mb2", "2 sequences a micro-batch, 8 micro-batches (wider GEMMs, the same batch)",
          MFU_CHOICES["mb2"],
          lambda a: "Half as many micro-batches leave the same 3 idle stage-slots among fewer: "
                    f"the bubble is {_bubble_why(a)}, not 3/19, "
                    f"{ms(_exposed(a, 'bubble'))} a step against "
                    f"{ms(_exposed(_seed(), 'bubble'))}. The wider GEMMs win back far less: "
                    f"{ms(_exposed(_seed(), 'gemm'))} → {ms(_exposed(a, 'gemm'))}. MFU {{value}}."),
         ("tp16pp2", "TP16 × PP2 (TP groups of two nodes, 48 layers a stage)",
          MFU_CHOICES["tp16pp2"],
          # The bubble in ms only: its share, 1/17, is step 7's predict.
          lambda a: "Two stages idle less than four: the bubble falls from "
                    f"{ms(_exposed(_seed(), 'bubble'))} to {ms(_exposed(a, 'bubble'))} a step. "
                    "But a TP group of 16 spans two nodes, so every TP collective crosses "
                    f"InfiniBand: TP's exposed time grows from {ms(_exposed(_seed(), 'tp'))} to "
                    f"{ms(_exposed(a, 'tp'))} (step 2: TP within a server). MFU {{value}}."),
         ("tp4pp8", "TP4 × PP8 (TP groups of 4, half the layers per GPU)",
          MFU_CHOICES["tp4pp8"],
          lambda a: "TP4 halves each layer's TP traffic, but 8 stages idle "
                    f"{_bubble_why(a)}, where PP4's idled 3/19: MFU {{value}}.")),
        best="max", fmt=pct,
        solution=lambda found: (
            "{best}. MFU: interleaved 1F1B {interleaved}, 2 sequences × 8 micro-batches "
            "{mb2}, TP16 × PP2 {tp16pp2}, TP4 × PP8 {tp4pp8}. After the GEMMs "
            "themselves, the bubble is the largest loss: two chunks a GPU halve it, though "
            "DP's sync, now hidden behind one chunk's backward, waits longer. Fewer "
            "micro-batches or more stages grow it; fewer stages shrink it only by sending TP "
            "over InfiniBand. "
            "More micro-batches would cut it too, but they change the global batch. "
            + _mfu_gap(found)),
        reveals=("the bubble is the largest loss",)),
    decide(
        "recipe-decide-overlap",
        f"Qwen3-235B-A22B ({QWEN.experts} experts a layer, {QWEN.top_k} a token) on 128 "
        "H100s: 16 nodes of 8, "
        "NVLink inside, InfiniBand HDR between. TP2 × PP2 × EP16 × DP32, 8 micro-batches "
        "of 4,096 tokens, full recomputation, TP overlap 'backward', DP overlap on. The "
        f"experts take no TP, so each EP group is {QWEN_EP.per_node} GPUs on each of "
        f"{QWEN_EP.nodes} nodes. Each GPU holds {gb(qwen_memory())} of its "
        f"{gb(get_gpu(QWEN_EP16['gpu']).memory_bytes)}, among them "
        f"{gb(expert_weight_bytes(QWEN_EP.size))} of the experts' bf16 weights and as much of "
        "their gradients. Which one change shortens the step most on GPUs that still fit "
        "it?",
        "recipe", _step_or_unfit,
        (("ep", "Overlap the EP all-to-all with another micro-batch's compute",
          {**QWEN_EP16, "ep_overlap": True}, overlap_ep_why),
         # Round-23 cold reading Q, finding 9: "userbuffers" came before step 13 defined it.
         ("tp", "TP overlap 'all': the forward's TP collectives too, each GEMM cut into chunks "
                "that send one while computing the next",
          {**QWEN_EP16, "tp_overlap": "all"}, overlap_tp_why),
         ("deepep", "DeepEP's dispatch: a token crosses the network once a node, then NVLink",
          {**QWEN_EP16, "ep_dispatch": "deepep"}, overlap_deepep_why),
         # Round-24 cold reading B, finding 6: "ZeRO-3" only added gathers where memory did
         # not bind, so it could not win. EP 8 inside a node puts the all-to-all on NVLink,
         # and the question's memory says whether its doubled experts still fit.
         ("ep8", "EP 8: each EP group inside one node, its all-to-all on NVLink",
          {**QWEN_EP16, "ep": 8}, overlap_ep8_why)),
        best="min", fmt=ms_or_unfit,
        solution="{best}. Step: DeepEP {deepep}, EP overlap {ep}, TP overlap 'all' {tp}, "
                 "EP 8 {ep8}. Overlap hides a collective only behind the compute "
                 "beside it, and here the all-to-all is longer: where the compute is shorter "
                 "than the collective (few tokens per GPU, slow links), no overlap setting "
                 "helps. DeepEP sends fewer copies across the network, so there is less to "
                 "hide.",
        reveals=("DeepEP sends fewer copies across the network",)),
    decide(
        "recipe-decide-fsdp",
        "Llama 3.1 70B on 32 H100s: 4 nodes of 8, NVLink inside, InfiniBand HDR between. "
        "TP8 inside each node × FSDP4 (ZeRO-3 over the 4 nodes), 16 micro-batches of one "
        "8,192-token sequence, flash attention, and FSDP's backward prefetch switched off, so "
        "each layer's backward waits for its own gather. Each GPU holds "
        f"{fsdp_case_memory() / 1e9:.1f} GB of its 80 GB. Keeping the global batch, which one "
        "change shortens the step most on GPUs that still fit it?",
        "recipe", _step_or_unfit,
        (("prefetch", "Switch backward prefetch on",
          {**FSDP_70B, "fsdp_prefetch": True},
          lambda a: "Each layer's backward gather now runs beside the layer before it, "
                    f"but it still runs: {gb(dp_bytes(a))} gathered a step, and NCCL's "
                    f"{RING_CTAS} channels take SMs from the GEMMs beside it. Step {{value}}."),
         ("keep", "Keep each layer's gathered weights after the forward "
          "(reshard_after_forward off)",
          {**FSDP_70B, "reshard_after_forward": False}, _fsdp_keep_why),
         ("mb2", "Two sequences per micro-batch, 8 micro-batches",
          {**FSDP_70B, "micro_batch": 2, "microbatches": 8},
          lambda a: _fsdp_fit(a, "Twice the tokens a micro-batch hold twice the activations; "
                                 "half as many gathers a step would have been the gain.")),
         ("tp4", "TP4 × FSDP8, 8 micro-batches (half the TP traffic)",
          {**FSDP_70B, "tp": 4, "dp": 8, "microbatches": 8},
          lambda a: _fsdp_fit(a, "TP4 splits each layer's activations 4 ways, "
                                 "not 8: each GPU keeps twice as many."))),
        best="min", fmt=ms_or_unfit,
        solution="{best}. Step: prefetch on {prefetch}, kept weights {keep}, two "
                 "sequences a micro-batch {mb2}, TP4 × FSDP8 {tp4}. Keeping the gathered "
                 "weights costs 2 B a parameter over TP's 8 and removes the backward's gather, "
                 "where prefetch only hides it. Twice the tokens a micro-batch, or half the TP, "
                 "double the activations instead, and those no longer fit.",
        reveals=("removes the backward's gather",)),
    decide(
        "recipe-decide-2d",
        "Llama 3.1 70B on 256 H100s: 32 nodes of 8, NVLink inside, and between the nodes "
        "100 Gb/s Ethernet, a port a GPU, a quarter of NDR's rate. 64 sequences of 8,192 "
        "tokens a step, flash attention, no recomputation. Which plan gives the shortest "
        "step?",
        "recipe", "step_s",
        (("fsdp4", "FSDP + TP: TP4 × DP64, ZeRO-3, one micro-batch",
          TWO_D_CHOICES["fsdp4"],
          lambda a: "No bubble, but FSDP gathers every layer twice a micro-batch across the "
                    f"nodes, {gb(dp_bytes(a))} a step. {crossover_why(a)}, far past a "
                    f"micro-batch's {a['plan']['seq_len']:,} tokens: "
                    f"{ms(_exposed(a, 'dp'))} of it waits. Step {{value}}."),
         ("fsdp8", "FSDP + TP: TP8 × DP32, ZeRO-3, two micro-batches",
          TWO_D_CHOICES["fsdp8"],
          lambda a: "TP8 leaves each FSDP group one GPU a node, so every ring crosses on one "
                    f"port, and two micro-batches gather twice: {gb(dp_bytes(a))} a step, "
                    f"{ms(_exposed(a, 'dp'))} of it waiting. Step {{value}}."),
         ("interleaved", "TP4 × PP4 × DP16, interleaved 1F1B with 4 chunks, 4 "
          "micro-batches",
          TWO_D_CHOICES["interleaved"],
          lambda a: "The 3-D plan sends its gradients across the nodes once a step, "
                    f"{gb(dp_bytes(a))}, far fewer bytes than FSDP's gathers, even where "
                    "much of it waits; interleaving cuts 4 stages' bubble over 4 "
                    f"micro-batches from 3/7 to {_bubble_why(a)}. Step {{value}}."),
         ("stages", "TP4 × PP8 × DP8, 1F1B, 8 micro-batches",
          TWO_D_CHOICES["stages"],
          lambda a: "Eight stages send the gradients across the nodes once a step too, "
                    f"{gb(dp_bytes(a))}, but 8 micro-batches on 8 stages idle "
                    f"{_bubble_why(a)}. Step {{value}}.")),
        best="min", fmt=ms,
        solution=two_d_solution,
        reveals=("and pays a bubble instead is faster",)),
)
