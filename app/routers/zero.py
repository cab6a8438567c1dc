"""EP03 Sharding state, ZeRO and FSDP: page, embeds and JSON for the ZeRO lab. Its controls, run
and answers are ``app.routers.zero_state``, the lesson's states and the figures their whys work
out ``app.routers.zero_lesson``; here its figures, what of them waits for which guess, page
context, cases and drills."""

from fastapi import APIRouter

from app.charts import veiled_after
from app.charts.crossover import crossover_figure
from app.charts.zero import (
    STAGE_NAMES,
    memory_figure,
    offload_figure,
    recompute_figure,
    recompute_name,
)
from app.charts.zero_traffic import (
    OFFLOAD_STEP,
    STEP_TIME,
    TRAFFIC,
    exposed_keys,
    fall_keys,
    held_text,
    overlap_figure,
    overlap_keys,
    owned,
    traffic_figure,
    traffic_keys,
)
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, Drill, LabView, Mistake, register
from app.lesson_drills import LESSON_DRILLS
from app.model_controls import model_choices
from app.options import SEQ_LENGTHS, gpu_options, link_choices, model_options, with_value
from app.routers.memory import LESSON_RECIPE_LABELS, own_layer
from app.routers.zero_lesson import (
    ETHERNET,
    adam_sizing,
    facts,
    host_ddr,
    opening_mfu,
    opening_mfu_terms,
)
from app.routers.zero_state import (
    DP_OPTIONS,
    GPUS_PER_NODE_OPTIONS,
    ZeroQuery,
    run,
    to_api,
)
from app.schemas import ZeroAnswer
from labs.core.limits import (
    GPU_HOST_LINK,
    HOST_LINKS,
    TRAIN_RECIPES,
)
from labs.hardware.gpus import get_gpu
from labs.hardware.links import links
from labs.recipe.runs import megatron_compute
from labs.zero.inputs import ZeroResult
from labs.zero.lab import FSDP_NAMES, achieved_mfu, crossover
from labs.zero.published import (
    LLAMA3_MFU,
    eq3_over_6pt,
    fall,
    fixed_cost_s,
    gap_split,
    hardware_flops_per_step,
    lab_fall,
    megatron_table_1,
    share_shown,
    t_star_between,
)

router = APIRouter()

# The link step 9 asks ZeRO-3's T* on (and step 5 its exposure): on it, any stage's T* gives
# step 9's answer (the bad case's plain DP: 15,966 tokens, x 1.5 for ZeRO-3), so the crossover
# there waits for step 9's guess.
T_STAR_STEP = "step-9"
CROSSOVER = "This crossover"  # what its held figures say meanwhile
# The steps whose answer a state's memory per GPU (verdict, readout, the memory, DeepSpeed,
# recompute and offload panels) gives, with the fact each asks: steps 1 and 2 ask a state at
# any state of their model (the memory table prints every stage at D = 1 and the state's D),
# steps 3 and 6 a total at their model's tokens per GPU (round-13 cold reading, BENCH_STATES).
STATE_STEPS = {"step-1": "l8_z0", "step-2": "l405_z2"}
MEMORY_STEPS = {"step-3": "q7_z3_8k", "step-6": "g9_full_16k"}
MEMORY = "Memory per GPU at this state"  # what its held figures say meanwhile
# Step 8 asks how many GB per GPU DeepSpeed counts above the lab for its model: the lab's own
# figure is step 2's formula, so DeepSpeed's cell at that model answers it by one subtraction
# (round-15 cold reading of EP03, finding 2: 237 GB printed before the guess).
DEEPSPEED_STEP = "step-8"


def figures(result: ZeroResult) -> dict:
    held = memory_keys(result)
    return {"memory": veiled_after(memory_figure(result), held),
            "traffic": traffic_figure(result), "overlap": overlap_figure(result),
            "recompute": veiled_after(recompute_figure(result), held),
            # Step 7's diagram, whose summary prints the PCIe time step 7 weighs.
            "offload": veiled_after(offload_figure(result), (*held, OFFLOAD_STEP)),
            "crossover": crossover_chart(result)}


def memory_keys(result: ZeroResult) -> tuple[str, ...]:
    """The steps whose answer this state's memory per GPU gives: any state of the model step
    1 or 2 asks prints its state (the memory table's cells); a state of the model and tokens
    per GPU step 3 or 6 asks prints its total (the verdict, a bar, a recompute mode, offload's
    "without") or its state beside its activations, whatever the stage, D or recomputation
    chosen."""
    inp, lesson = result.input, facts()

    def tokens(them) -> tuple:
        return them.model.id, them.seq_len * them.micro_batch, them.activation_model

    state = [step for step, key in STATE_STEPS.items()
             if lesson[key]["result"].input.model.id == inp.model.id]
    # A predict drill's model on its D: the stage table prints every stage's state there,
    # the drill's among them (round-14 review: zero-predict-stage2-16's 23.1 GB showed at
    # its own state before it was answered).
    drills = [f"drill-{d.id}" for d in LESSON_DRILLS["zero"]
              if getattr(d, "see", None) and d.see.get("model") == inp.model.id
              and d.see.get("dp") == inp.dp]
    return (*state, *drills, *(step for step, key in MEMORY_STEPS.items()
                               if tokens(lesson[key]["result"].input) == tokens(inp)))


def deepspeed_keys(result: ZeroResult) -> tuple[str, ...]:
    """The steps whose answer DeepSpeed's per-GPU figure gives at this state: the lab's (its
    memory_keys), and at step 8's model step 8, whose answer is that figure less the lab's."""
    asked = facts()["l405_z3"]["result"].input.model.id == result.input.model.id
    return (*memory_keys(result), *((DEEPSPEED_STEP,) if asked else ()))


def crossover_chart(result: ZeroResult) -> dict:
    c = crossover(result)
    figure = crossover_figure(c.tokens_per_gpu, c.compute_s, c.comm_s, c.crossover_tokens,
                              c.sweep, f"ZeRO-{result.input.zero} communication",
                              result.input.dp, hidden=c.hidden_tokens,
                              exposed_s=result.chosen_traffic.exposed_seconds)
    return owned(figure, crossover_keys(result), CROSSOVER)


def crossover_keys(result: ZeroResult) -> tuple[str, ...]:
    """The steps whose answers the crossover at this state gives: at a ZeRO-3 state its
    communication is ZeRO-3's traffic (traffic_keys), at another stage's where ZeRO-3 exposes
    some, 1.5 times it is (exposed_keys); across nodes on step 9's Ethernet its T* is step 9's
    answer, or a factor of 1.5 from it."""
    inp = result.input
    keys = traffic_keys(result) if inp.zero == 3 else exposed_keys(result)
    return keys + ((T_STAR_STEP,) if inp.link == ETHERNET and inp.nodes > 1 else ())


def extra_context(state) -> dict:
    query = state.query
    return {
        "facts": facts(),
        # Step 3's model's own count of a layer's activations, beside the 34 the lab keeps
        # (round-14 cold reading of EP01-EP03, finding 4: Qwen2.5 7B's is 44.3, 34 is low).
        "own_q": own_layer(facts()["q7_z3_8k"]["result"].input.model),
        "defaults": ZeroQuery(),  # the disclosure opens when the state leaves these
        "crossover": crossover(state.result),
        "model_options": model_choices(model_options(), query.model_value),
        "model_value": query.model_value,
        "gpu_options": gpu_options(),
        "recipes": {k: LESSON_RECIPE_LABELS[k] for k in TRAIN_RECIPES},
        "link_options": link_choices(links()),
        "host_links": {GPU_HOST_LINK: f"The GPU's own "
                                      f"({links()[get_gpu(query.gpu).host_link].name})",
                       **{k: links()[k].name for k in HOST_LINKS}},
        "dp_options": with_value(DP_OPTIONS, query.dp),
        "gpn_options": with_value(GPUS_PER_NODE_OPTIONS, query.gpus_per_node),
        "seq_options": with_value(SEQ_LENGTHS, query.seq_len),
        "stage_names": STAGE_NAMES, "recompute_name": recompute_name,
        "fsdp_names": FSDP_NAMES,
        # What waits for which step's guess: ZeRO-3's traffic, and the crossover.
        "traffic_keys": traffic_keys(state.result), "crossover_keys": crossover_keys(state.result),
        "exposed_keys": exposed_keys(state.result), "fall_keys": fall_keys(state.result),
        "host_ddr": host_ddr(),  # step 7's DGX H100 host: how its DDR5 peak is worked
        "memory_keys": memory_keys(state.result), "memory_what": MEMORY,
        "deepspeed_keys": deepspeed_keys(state.result),
        "overlap_keys": overlap_keys(state.result), "offload_step": (OFFLOAD_STEP,),
        "step_time": STEP_TIME,
        "held_text": held_text, "traffic": TRAFFIC, "crossover_what": CROSSOVER,
        "mfu": achieved_mfu(state.result.input, state.result.compute_seconds),
        "published_fall": fall(), "fall_shown": share_shown(fall()),
        "lab_fall": lab_fall(fall()),
        "eq3_flops": hardware_flops_per_step(),
        "eq3_ratio": eq3_over_6pt(),
        "fixed_cost": fixed_cost_s(fall()), "t_star_between": t_star_between(fall()),
        "megatron_table_1": megatron_table_1(),
        "gap_split": gap_split(fall(), megatron_compute().compute_flops),
        "megatron_compute": megatron_compute(),
        "llama3_mfu": LLAMA3_MFU,
        "facts_mfu": opening_mfu(), "mfu_terms": opening_mfu_terms(),
        "adam_sizing": adam_sizing(),  # step 7's limit: CPU Adam below the datasheet's peak
    }


def drill_answer() -> float:
    """GB of training state per GPU for Llama 3.1 70B under ZeRO-3 on 48 GPUs (16-byte): the
    lesson prints the figures at 8 to 64 GPUs, so the drill asks for another."""
    return run(ZeroQuery(model="llama-3.1-70b", dp=48, zero=3)).state_bytes / 1e9



# The case buttons' states; their captions name the setup only (round-2 cold reading, issue 36:
# figures there answered steps 1 and 5 before the guess).
_GOOD = {"model": "llama-3.1-70b", "dp": 32, "zero": 3, "recompute": "full"}
# The bad case on 64 GPUs: on 32 it drew step 5's answer (ZeRO-3's exposed ms on Ethernet,
# the overlap chart's fourth bar) one click before the guess (test_answers_hidden).
_BAD = {"model": "llama-3.1-70b", "dp": 64, "zero": 0, "link": ETHERNET}


VIEW = LabView(
    name="zero",
    episode=BY_SLUG["zero"],
    query_model=ZeroQuery,
    run=run,
    to_api=to_api,
    figures=figures,
    diagrams=(
        # No unit in the title: the axis reads GB or TB as the sizes call for (gb_axis).
        Diagram("memory", "Memory per GPU by ZeRO stage and DP degree", embed_height=560),
        Diagram("traffic", "Wire traffic per GPU per step, by stage (GB)", embed_height=480),
        Diagram("overlap", "Step time: compute and exposed communication (ms)",
                embed_height=480),
        Diagram("crossover", "Compute against ZeRO's communication, per tokens per GPU",
                embed_height=420),
        Diagram("recompute", "Activation checkpointing: memory and extra compute",
                embed_height=480),
        Diagram("offload", "Optimizer offload: GPU and host memory", embed_height=480),
    ),
    labels={
        "model": "Model", "params": "Custom params", "gpu": "GPU", "recipe": "Recipe",
        "dp": "DP degree D", "zero": "ZeRO stage", "offload": "Optimizer offload",
        "gpus_per_node": "GPUs per node", "link": "Link", "host_link": "Host link",
        "seq_len": "Sequence length", "micro_batch": "Micro-batch",
        "recompute": "Recomputation", "activation_model": "Activation model",
    },
    response_model=ZeroAnswer,
    embed_height=1600,
    extra_context=extra_context,
    summary="Per-GPU memory and wire traffic by ZeRO stage, checkpointing, offload, and "
            "DeepSpeed's own estimate (bytes, seconds)",
    good=Case(
        "Good case: 70B, ZeRO-3 on 32 GPUs, full recomputation", _GOOD,
        "Llama 3.1 70B sharded 32 ways with ZeRO-3, full recomputation, 400 Gb/s InfiniBand "
        "(steps 3–6).",
    ),
    bad=Case(
        "Bad case: 70B, plain DP on 64 GPUs over 25 Gb/s Ethernet", _BAD,
        "Llama 3.1 70B copied whole onto 64 GPUs (ZeRO-0), joined by 25 Gb/s Ethernet "
        "(steps 1 and 5).",
        # Round-19 cold reading X, finding 18: the case is named for its Ethernet, whose cost
        # (the exposed traffic) is the overlap chart's, not the memory chart's.
        diagram="zero-overlap",
        # Round-20 cold reading P, finding 15: before steps 4-5 the overlap chart it lands on
        # is all grey; held, as EP05's bad case, until step 5's guess.
        held_until="step-5",
    ),
    drills=(
        Drill(
            id="zero3-state-70b",
            question=(
                "Llama 3.1 70B (70.6B parameters) trains with mixed-precision Adam, 16 bytes per "
                "parameter, under ZeRO-3 across 48 data-parallel GPUs. How many GB of weights, "
                "gradients and optimizer state does each GPU hold?"
            ),
            answer=drill_answer,
            unit="GB",
            hint="ZeRO-3 shards all four kinds of state: 16 B x P / D.",
            explanation="{answer} GB: 16 B x 70.6B parameters / 48 GPUs; activations come on "
                        "top, unsharded.",
            mistakes=(
                Mistake("weights-only", lambda: drill_answer() * 2 / 16,
                        "that is the bf16 weights alone, 2 of the 16 bytes. ZeRO-3 shards "
                        "the gradients, master weights and Adam's moments too."),
                Mistake("unsharded", lambda: drill_answer() * 48,
                        "that is the whole state; ZeRO-3 gives each of the 48 GPUs an equal "
                        "share."),
                Mistake("zero2", lambda: drill_answer() * (2 * 48 + 14) / 16,
                        "that keeps the bf16 weights whole on every GPU, as ZeRO-2 does. "
                        "ZeRO-3 shards the weights too."),
            ),
        ),
        *LESSON_DRILLS["zero"],  # predict and decide (app/lesson_drills/zero.py)
    ),
)

register(router, VIEW)
