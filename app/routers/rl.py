"""EP09 Placement for RL training: the cluster by role, memory per pool, a step's timeline.
Its controls, ``run`` and answers are ``app.routers.rl_state``'s, the lesson's states and the
derivations its notes print ``app.routers.rl_lesson``'s; here are the page context, the cases,
the drill, the view and GET /api/presets/recipes."""

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.charts.rl import (
    MEMORY_STEPS,
    ROLES,
    TIMELINE_MASK,
    cache_keys,
    replica_keys,
    timeline_keys,
)
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, Drill, LabView, Mistake, register
from app.lesson_drills import LESSON_DRILLS
from app.model_controls import model_choices
from app.options import gpu_options, model_options
from app.routers.rl_lesson import (
    SLIME_R1,
    busiest,
    facts,
    flops_text,
    serving_terms,
    slime_split,
    stage_text,
    step_places,
    train_sum,
    workspace_view,
)
from app.routers.rl_state import EXP, RLQuery, figures, run, to_api
from app.schemas import PlacementAnswer
from labs.hardware.gpus import GIB
from labs.recipe.inputs import SEGMENT_LABELS
from labs.rl.recipes import get_recipe, recipes
from labs.rl.serving import WEIGHT_BYTES, dp_attention_requests, kv_bytes_per_token
from labs.rl.serving_time import DEEPEP_LOW_LATENCY_US

router = APIRouter()
PLACEMENT_LABELS = {
    "colocated": "colocated (one pool, phases take turns)",
    "separate": "separate pools (overlapped, one step off-policy)",
    "separate-pd": "separate, rollout split into prefill and decode engines",
}


def stand_in_label(recipe) -> str:
    """The Recipe control's label: a preset whose model shape is guessed says so in the list
    a student picks from (round-4 cold reading of EP09, item 7): "GLM-5.3 (744B, stand-in)"."""
    name = recipe.name
    if not recipe.spec.stand_in:
        return name
    return f"{name[:-1]}, stand-in)" if name.endswith(")") else f"{name} (stand-in)"


def extra_context(state) -> dict:
    return {
        "facts": facts(),
        "flops_text": flops_text,
        "train_sum": train_sum,
        "step_places": step_places,  # the places a step's printed sum holds at
        "stage_text": stage_text(facts()["r1_sep"]["api"]),
        "serving": serving_terms(facts()["glm9"]["result"]),
        # Step 3's workspace, part by part (round-21 cold reading R, finding 9; round-25
        # reading F, finding 1: each part split as its weights are).
        "workspace": workspace_view(facts()["r1_sep"]["result"].input),
        "deepep_ll_us": DEEPEP_LOW_LATENCY_US,
        "preset_options": [(k, stand_in_label(r)) for k, r in recipes().items()],
        # The presets, and the pasted model ("Your model (…)") when the state uses a code.
        "model_options": model_choices(model_options(), (getattr(getattr(state, "query", None),
                                                                 "model", None) or ""),
                                       custom=False),
        "recipe_models": {k: r.model for k, r in recipes().items()},
        "gpu_options": gpu_options(),
        "placements": PLACEMENT_LABELS,
        "roles": ROLES,
        "memory_steps": MEMORY_STEPS,  # the step each pool's memory answers, masked till its guess
        "timeline_keys": timeline_keys, "timeline_mask": TIMELINE_MASK,  # and each time's
        "replica_keys": replica_keys,  # and the replica count's (step 1)
        "cache_keys": cache_keys,  # and R1's rollout phase's, colocated (step 3)
        "recipe": get_recipe(state.query.preset),
        "exp": EXP,
        "slime_r1": SLIME_R1,
        # SGLang's --mem-fraction-static takes its share of the free memory CUDA reports at
        # engine start (model_runner.py: total_gpu_memory = get_available_gpu_memory(), then
        # rest = available - total x (1 - fraction)): at most what CUDA gives a process, the
        # one figure the lab states for it (labs.hardware capacity_note, the HBM tip), not the
        # driver's 81,559 MiB (round-26 reading B, finding 2).
        "process_gib": facts()["r1_sep"]["result"].input.gpu.cuda_memory_gib,
        "gib": GIB,
        "slime_split": slime_split(),
        "busiest_odds": busiest(),
        "segment_labels": SEGMENT_LABELS,  # EP08's step bar, which times the training
    }


# Step 4's derive drill (round-2 cold reading, item 9; first reading, item 14): DeepSeek-R1
# colocated as in steps 3-4, but served by engines of 32 GPUs instead of 64. The student builds
# the serving bill as step 3 does (each GPU's share of the weights doubles), then takes step 4's
# max: serving, not training, is now the larger phase. A published model, not a stand-in; its
# question states every input, read from the lab.
DRILL_STATE = {"preset": "deepseek-r1", "engine_gpus": 32}
_R1 = run(RLQuery(**DRILL_STATE))
_R1_API = to_api(_R1)


def drill_answer() -> float:
    """GB per GPU the colocated recipe needs: max(training, rollout) + transition."""
    return _R1.colocated_bytes / 1e9


def _drill_terms() -> dict:
    a, inp = _R1_API, _R1.input
    requests = a["samples"] // a["engines"]
    tokens = EXP.prompt_len + EXP.response_len
    kv = kv_bytes_per_token(inp.model, inp.kv_dtype)
    e, sw = a["engine_gpus"], a["serving_weights"]
    groups, group = sw["attention_groups"], sw["group_gpus"]
    busiest = dp_attention_requests(requests, groups)  # whole requests per group (step 3)
    routed = WEIGHT_BYTES * sw["params"]["routed_experts"]
    weights = _R1.rollout_breakdown["weights"]
    return {"params": inp.model.params, "experts": inp.model.expert_params,
            "gpus": a["train_gpus"], "e": e, "groups": groups, "group": group,
            "engines": a["engines"], "samples": a["samples"], "requests": requests,
            "busiest": busiest, "tokens": tokens, "kv": kv, "weights": weights,
            "rest": weights - routed, "cache": _R1.rollout_breakdown["kv_cache"],
            "workspace": _R1.rollout_breakdown["workspace"],
            "train": _R1.train_memory_bytes, "rollout": _R1.rollout_memory_bytes,
            "overhead": _R1.transition_overhead_bytes}


T = _drill_terms()


def _waits(query: dict) -> dict:
    """What a case's headline (its samples a second, the step time's ``timeline_keys`` at its
    state) waits for on the lesson page (round 17, as EP11's cases)."""
    return {"waiting": "Its samples a second show",
            "waits_for": timeline_keys(run(RLQuery(**query)))["step"]}


VIEW = LabView(
    name="placement",
    episode=BY_SLUG["rl-placement"],
    query_model=RLQuery,
    run=run,
    to_api=to_api,
    figures=figures,
    diagrams=(
        Diagram("cluster", "The cluster: every GPU by role", embed_height=520),
        Diagram("memory", "Memory per GPU of each pool (GB)", embed_height=460),
        Diagram("timeline", "One step in time: rollout, training, weight sync (s)",
                embed_height=360),
    ),
    labels={
        "preset": "Recipe", "gpu": "GPU", "placement": "Placement",
        "train_gpus": "Training GPUs", "tp": "TP", "pp": "PP", "cp": "CP", "ep": "EP",
        "engine_gpus": "GPUs per engine", "engines": "Rollout engines",
        "prefill_engines": "Prefill engines", "response_len": "Response length",
        "prompt_len": "Prompt length", "prompts": "Prompts", "responses_per_prompt":
        "Responses per prompt", "cpu_adam": "CPU Adam",
        "ref_model": "Reference model (KL loss)", "recompute": "Recomputation",
        "kv_dtype": "KV dtype", "external_engines": "External engines",
        "model": "Model shape",
    },
    response_model=PlacementAnswer,
    embed_height=1500,
    extra_context=extra_context,
    summary="Place an RL job: GPU roles, memory per pool, checks and a step's timeline",
    good=Case(
        "Good case: DeepSeek-R1, colocated",
        {"preset": "deepseek-r1", "placement": "colocated"},
        "Rollout, training, weight sync in turn; the lab keeps the sync in the node (step 6).",
        **_waits({"preset": "deepseek-r1", "placement": "colocated"}),
    ),
    bad=Case(
        "Bad case: GLM-4.7 on 60 GPUs",
        {"preset": "glm-4.7", "train_gpus": 60, "placement": "separate"},
        "GLM-4.7's recipe (TP 8, PP 4, CP 2, EP 16) asked to train on 60 GPUs.",
        **_waits({"preset": "glm-4.7", "train_gpus": 60, "placement": "separate"}),
        # Round-21 cold reading R, finding 5: its check table divides 60 by TP·PP·CP = 64 and
        # by EP·expert-TP·PP = 64, step 7's why at step 7's degrees: held, as EP03's and
        # EP05's bad cases are, until step 7's guess.
        held_until="step-7",
    ),
    drills=(
        Drill(
            id="placement-colocated-r1",
            question=(f"DeepSeek-R1 ({T['params'] / 1e9:.0f}B parameters) colocated on its "
                      f"{T['gpus']} GPUs, but served by engines of {T['e']} GPUs instead of 64: "
                      f"{T['engines']} engines share the {T['samples']} samples, each of "
                      f"{T['tokens']:,} tokens ({EXP.prompt_len:,} prompt + "
                      f"{EXP.response_len:,} response). Weights are served in bf16 (the "
                      "published checkpoint is FP8). An engine's GPUs split the routed "
                      f"experts' {T['experts'] / 1e9:.1f}B parameters; with attention data "
                      f"parallelism in {T['groups']} groups of {T['group']} GPUs, the rest comes "
                      f"to {T['rest'] / 1e9:.2f} GB a GPU (attention and output head split "
                      "over a group; the dense layers' MLPs, shared experts, routers and "
                      "embedding whole, as in step 3). Each group keeps the KV cache of whole "
                      "requests of its own, and each of its GPUs their whole MLA latent "
                      f"({T['kv'] / 1e3:.1f} KB a token); each keeps "
                      f"{T['workspace'] / 1e9:.2f} GB of "
                      f"workspace. Training needs {T['train'] / 1e9:.1f} GB per GPU, and the "
                      f"switch between the phases keeps {T['overhead'] / 1e9:g} GB (the lab's "
                      "round estimate, as in step 4). How many GB per GPU does the colocated "
                      "recipe need?"),
            answer=drill_answer,
            unit="GB",
            hint="Build the serving bill as step 3 does, for engines of "
                 f"{T['e']} GPUs, and compare it with training's: which phase is larger "
                 "now? Then step 4: the phases take turns; add what the switch keeps.",
            explanation=(f"{{answer}} GB. Serving: {T['experts'] / 1e9:.1f}B × 2 B ÷ {T['e']} "
                         f"= {(T['weights'] - T['rest']) / 1e9:.2f} GB of routed experts + "
                         f"{T['rest'] / 1e9:.2f} GB of the rest = "
                         f"{T['weights'] / 1e9:.2f} GB of weights, + the busiest group's "
                         f"⌈{T['requests']} requests ÷ {T['groups']}⌉ = {T['busiest']} × "
                         f"{T['tokens']:,} tokens × {T['kv'] / 1e3:.1f} KB = "
                         f"{T['cache'] / 1e9:.2f} GB of cache on each of its GPUs, + "
                         f"{T['workspace'] / 1e9:.2f} GB of workspace = "
                         f"{T['rollout'] / 1e9:.1f} GB. Halving an engine's GPUs doubled each "
                         "one's share of the experts and halved each group, so serving, not "
                         f"training ({T['train'] / 1e9:.1f} GB), is the larger phase by far: "
                         f"{T['rollout'] / 1e9:.1f} + {T['overhead'] / 1e9:g} = {{answer}} GB. "
                         "The cache is that small only because each group keeps whole "
                         "requests of its own (attention data parallelism): MLA's latent is "
                         "shared by every head, so under plain TP each GPU would keep all "
                         f"{T['requests']} requests', "
                         f"{T['requests'] * T['tokens'] * T['kv'] / 1e9:.2f} GB."),
            # 0.2%: ±0.12 GB, less than the 1 GB switch the step is about and than the
            # 0.36 GB a request per GPU leaves out (the "per-gpu" mistake), more than the
            # rounding of the stated inputs (round-4 cold reading, item 2: 3% let the serving
            # bill without the switch pass).
            rel_tol=0.002,
            mistakes=(
                Mistake("training", lambda: (T["train"] + T["overhead"]) / 1e9,
                        f"that takes training as the larger phase. With engines of {T['e']} "
                        "GPUs each GPU holds twice the share of the routed experts: build "
                        "the serving bill and compare."),
                Mistake("no-switch", lambda: T["rollout"] / 1e9,
                        "that is the serving bill alone; the switch between the phases keeps "
                        f"{T['overhead'] / 1e9:g} GB as well."),
                Mistake("both", lambda: (T["train"] + T["rollout"] + T["overhead"]) / 1e9,
                        "colocated phases take turns on the same GPUs: the larger of the "
                        "two counts, not their sum."),
                Mistake("even-split",
                        lambda: (T["rollout"] - T["weights"]
                                 + WEIGHT_BYTES * T["params"] / T["e"] + T["overhead"]) / 1e9,
                        f"that splits all {T['params'] / 1e9:.0f}B parameters evenly over the "
                        f"{T['e']} GPUs. Attention data parallelism keeps the dense layers' MLPs, "
                        "shared experts, routers and embedding whole on every GPU and splits "
                        f"attention only over a group: the rest is {T['rest'] / 1e9:.2f} GB."),
                Mistake("plain-tp",
                        lambda: (T["rollout"] - T["cache"] + T["requests"] * T["tokens"] * T["kv"]
                                 + T["overhead"]) / 1e9,
                        "with attention data parallelism each group keeps only its own whole "
                        "requests' latent: the busiest holds "
                        f"⌈{T['requests']} ÷ {T['groups']}⌉ = {T['busiest']}, not all of them."),
                Mistake("per-gpu",
                        lambda: (T["rollout"] - T["cache"]
                                 + -(-T["requests"] // T["e"]) * T["tokens"] * T["kv"]
                                 + T["overhead"]) / 1e9,
                        "that hands whole requests to single GPUs. A request is served by a "
                        f"group of {T['group']} GPUs, and MLA's latent, shared by every head, "
                        "does not split among them: each keeps the whole latent of its "
                        f"group's ⌈{T['requests']} ÷ {T['groups']}⌉ = {T['busiest']} "
                        "requests."),
            ),
        ),
        *LESSON_DRILLS["placement"],  # predict and decide (app/lesson_drills/rl.py)
    ),
)

register(router, VIEW)


class RecipePreset(BaseModel):
    id: str
    name: str
    model: str = Field(description="Model preset id (GET /api/models).")
    stand_in: bool = Field(description="The model's shape is a stand-in (config unpublished).")
    train_gpus: int
    tp: int
    pp: int
    cp: int
    ep: int
    engine_gpus: int = Field(description="GPUs per serving (rollout) engine.")
    cpu_adam: bool
    kl_loss: bool = Field(description="A KL loss against a reference model (--use-kl-loss): "
                          "its forward runs each step.")
    recompute: str
    source: str


@router.get("/api/presets/recipes", tags=["presets"], response_model=list[RecipePreset],
            summary="The RL recipe presets (EP09), each with its source")
def list_recipes() -> list[dict]:
    return [{"id": r.id, "name": r.name, "model": r.model, "stand_in": r.spec.stand_in,
             "train_gpus": r.train_gpus, "tp": r.tp, "pp": r.pp, "cp": r.cp, "ep": r.ep,
             "engine_gpus": r.engine_gpus, "cpu_adam": r.cpu_adam, "kl_loss": r.kl_loss,
             "recompute": r.recompute, "source": r.source} for r in recipes().values()]
