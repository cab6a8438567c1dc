"""EP06 Context parallelism: the causal mask by rank, pairs per rank, and the cost of K/V: the
derivations its steps quote, its page context, cases and drills, over the state and answers of
``app.routers.context_parallel_state``."""

from functools import lru_cache

from fastapi import APIRouter

from app.charts.context_parallel import pairs_step
from app.charts.context_parallel_cost import (
    CROSSOVER_KEYS,
    STEP_6_ASKS,
    bytes_step,
    step_6_points,
)
from app.episodes import BY_SLUG
from app.labkit import Case, Diagram, Drill, LabView, Mistake, register
from app.lesson_drills import LESSON_DRILLS
from app.lesson_drills.context_parallel import cp_mistakes, crossover_inputs
from app.model_controls import model_choices
from app.options import gpu_options, link_choices, with_value
from app.routers.context_parallel_state import CPQuery, facts, figures, run, to_api
from app.routers.memory import own_layer
from app.routers.plan import PlanQuery, plan_links
from app.routers.plan import run as plan_run
from app.routers.recipe import planner_query
from app.routers.recipe_state import RecipeQuery
from app.routers.tensor_parallel import facts as tp_facts
from app.schemas import CPAnswer
from labs.context_parallel.crossover import cp_crossover
from labs.context_parallel.inputs import attention_heads
from labs.context_parallel.lab import LAYOUT_NAMES, mask_layout, pairs_of_ranges
from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_link, links
from labs.hardware.nccl import simple_ring_latency
from labs.model.presets import models

router = APIRouter()

CP_OPTIONS = (1, 2, 3, 4, 8, 16, 32, 64)
SEQ_OPTIONS = tuple(2**k for k in range(12, 21))  # 4,096 ... 1,048,576 tokens

BALANCED_MASK = {
    "zigzag": "Zigzag: each rank keeps an early chunk and its mirror",
    "ulysses": "DeepSpeed-Ulysses: each rank attends every token for its own heads",
    "contiguous": "Contiguous: one slice of the tokens",
    "allgather": "All-gather: one slice of the tokens",
}


def _p2p_latency(hop: str) -> float:
    """A point-to-point send's start-up, s: NCCL's Simple base latency and one hop."""
    lat = simple_ring_latency()
    return (lat["base"] + lat[hop]) * 1e-6


def ranks_per_kv_head(first_heads, heads: int, kv_heads: int) -> int:
    """The Ulysses ranks that need KV head 0's K and V: those whose query heads (each rank's
    first, as the engine deals them out in order) fall in its group of heads/kv_heads. Past
    CP = kv_heads that is c/kv_heads ranks, the copies cp_cost sends (step 5's answer)."""
    return sum(1 for first in first_heads if first < heads // kv_heads)


def own_layer_activations() -> dict:
    """Step 1's second count: Llama 3.1 70B's activations at step 1's 131,072 tokens by EP01
    step 3's count of its own layer (app.routers.memory ``own_layer``: 33.5 bytes per token
    per unit of h against GPT's 34), the one count every lesson quotes (round-12 cold
    reading: EP06 taught Megatron-LM's 32 where EP01 taught 33.5)."""
    spec = facts()["contiguous8"]["result"].input.model
    s = facts()["contiguous8"]["api"]["seq_len"]
    own = own_layer(spec)
    return {**own, "bytes": own["coefficient"] * s * spec.hidden * spec.layers}


def degrees(plan) -> str:
    """A plan's degrees as "TP 4, PP 8, CP 2, DP 1": EP08's label ("TP4 × PP8 × CP2 × DP1")
    would print "4 ×" in step 7's limit, on screen before step 4's answer, 4×."""
    return ", ".join(f"{k.upper()} {getattr(plan, k)}" for k in ("tp", "pp", "cp", "dp"))


def settings(plan) -> str:
    """The rest of a plan a reader needs to redo it in EP08 (round-23 cold reading Q, finding
    5: step 7's limit quoted two plans without their schedule, chunks or recomputation)."""
    schedule = (f"interleaved 1F1B, {plan.virtual} chunks a GPU" if plan.virtual > 1
                else plan.schedule.upper())
    recompute = {"flash": "fused attention, nothing recomputed",
                 "none": "unfused attention, nothing recomputed"}.get(
                     plan.recompute, f"{plan.recompute} recomputation")
    return f"{schedule}, ZeRO-{plan.zero}, {recompute}"


@lru_cache(maxsize=1)
def planner_on_short_sequences() -> dict:
    """Step 7's limit: EP08's planner at that page's opening state (GPT-3 175B, 2,048-token
    sequences, 64 A100s, its global batch), its best plan and its best without CP. Short
    sequences go to DP over a slow network, but inside an NVLink node CP 2 can come first:
    it keeps every sequence one pipeline's micro-batch where DP 2 halves them (round-21 cold
    reading Q, finding 14: the limit said short sequences always go to DP). ``lead``: by how
    much, beside the spread of the lab's error on Megatron-LM's published runs (EP08 step 10,
    ``marks``' errs), which is wider: a tie (round-22 cold reading Q, finding 17)."""
    from app.routers.recipe_lesson import marks

    query = PlanQuery(**planner_query(RecipeQuery()))
    found = plan_run(query)
    plans, links = found.plans, plan_links(query, found)
    first = next(i for i, r in enumerate(plans) if r.plan.cp == 1)
    best, no_cp = plans[0], plans[first]

    def row(r, link: str) -> dict:
        # fixD #2: ``link``, the plan's own page (the planner's link: EP08's bench with its
        # controls set), which prints the step and the tokens/s the limit quotes.
        return {"label": degrees(r.plan), "tokens_per_s": r.tokens_per_s, "step_s": r.step_s,
                "link": link, "microbatches": r.plan.microbatches, "cp": r.plan.cp,
                "tp": r.plan.tp, "settings": settings(r.plan)}

    return {"model": query.model_spec().name, "gpus": query.gpus, "gpu": get_gpu(query.gpu).name,
            "seq_len": query.seq_len, "global_batch": query.global_batch,
            "gpus_per_node": query.gpus_per_node,
            "best": row(best, links[0]), "no_cp": row(no_cp, links[first]),
            "lead": best.tokens_per_s / no_cp.tokens_per_s - 1, "errs": marks()["errs"]}


def tp_sp_bytes() -> dict:
    """The bytes a GPU sends a layer at EP04 step 5's states, TP 8 without and with Megatron's
    sequence parallelism (its facts, the engine's): step 5's table says SP sends more, as
    EP04 teaches (round-18 cold reading of EP06, finding 12)."""
    off, on = (tp_facts()[k]["api"] for k in ("sp_off", "sp_on"))
    # Its model and sequence, named beside the bytes: this page's sequences are far longer
    # (round-20 cold reading Q, finding 9).
    inp = tp_facts()["sp_on"]["result"].input
    return {"tp": on["tp"], "model": inp.model.name, "seq_len": inp.seq_len,
            "off": off["comm_bytes"], "on": on["comm_bytes"],
            "ratio": on["comm_bytes"] / off["comm_bytes"]}


def extra_context(state) -> dict:
    query = state.query
    u16 = facts()["ulysses_cp16"]["api"]
    mask = state.result.mask
    heads, kv = attention_heads(state.result.input.model)
    return {
        "facts": facts(),
        "own_layer": own_layer_activations(),
        "tp_sp_bytes": tp_sp_bytes(),  # step 5's table quotes EP04 step 5's SP bytes
        "short_plans": planner_on_short_sequences(),  # step 7's limit: EP08's planner
        "kv_head_ranks": ranks_per_kv_head([r["heads"][0] for r in u16["ranks"]],
                                           u16["heads"], u16["kv_heads"]),
        "kv_head_ranks_here": ranks_per_kv_head([r.heads[0] for r in mask.ranks], heads, kv)
        if mask.layout == "ulysses" else None,
        "layouts": LAYOUT_NAMES,
        "model_options": model_choices(tuple(
            (id_, f"{spec.name} ({spec.heads} heads, {attention_heads(spec)[1]} KV)")
            for id_, spec in models().items()), query.model_value),
        "model_value": query.model_value,
        "gpu_options": gpu_options(),
        "link_options": link_choices(links()),
        "cp_options": with_value(CP_OPTIONS, query.cp),
        "seq_options": with_value(SEQ_OPTIONS, query.seq_len),
        "crossover": cp_crossover(state.result),
        # Step 8's rate and B, printed to the places its sums need (and the 8B drill's).
        "l_star_inputs": crossover_inputs(),
        "crossover_keys": CROSSOVER_KEYS,  # the guesses its figures wait for (steps 7 and 8)
        "attention_kv": attention_heads(state.result.input.model),
        # The guess the pair counts wait for, and the headline's text until then (a balanced
        # state says how it splits, not that it balances: round-10 cold reading, item 5).
        "pairs_key": pairs_step(query.layout),
        # The guess the bytes sent and their time wait for (step 4's, step 6's without GQA
        # and at step 6's sequence and CP degree: app/charts/context_parallel_cost.py bytes_step).
        "bytes_key": bytes_step(state.result.input),
        # The cost chart's points held for step 6 (``step_6_points``): the bench says why
        # its lines break there until then.
        "step_6_held": "step-6" not in bytes_step(state.result.input)
        and bool(step_6_points(state.result.sweep, state.result.input)),
        "step_6_cp": STEP_6_ASKS["cp"],
        "balanced_mask": BALANCED_MASK,
        # Step 8 names the NDR port's rate and NCCL's measured send rate on it, and derives
        # the effective rate B from them and a send's start-up across nodes (NCCL's Simple
        # base latency and one network hop, labs.hardware.nccl: what a p2p send pays).
        "ndr": get_link("ib-ndr"),
        "nvlink4": get_link("nvlink-4"),
        "eth25": get_link("eth-25g"),  # step 7 derives its effective rate from the port's
        "eth100": get_link("eth-100g"),  # step 8 names its port's rate
        "p2p_net": _p2p_latency("net"),
        "p2p_nvlink": _p2p_latency("nvlink"),  # step 6's ring sends on NVLink 4
        # Step 6's all-gather start-up: NCCL's Simple ring base and one NVLink step per hop
        # (round-19 cold reading Y, finding 8: the 1.31 ms gave the bandwidth alone).
        "ring_lat": simple_ring_latency(),
    }


def drill_answer() -> float:
    """Causal pairs of the busiest rank: 24 tokens, CP = 4, contiguous (the last rank). Not the
    lesson's 16 tokens, whose figures the mask and the table show."""
    return float(mask_layout(24, 4, "contiguous").busiest.causal_pairs)


def zigzag_drill_answer() -> float:
    """Causal pairs of the busiest rank: 24 tokens, CP = 4, 8 chunks of 3, rank r keeping
    chunks r and r + 4 instead of zigzag's mirror 7 - r (the engine's pair count of those
    ranges). Zigzag itself gives every rank s(s+1)/(2c), the formula step 3 shows, so asking
    its busiest rank was one division from the page (round-2 cold reading, item 9)."""
    chunk = 24 // 8
    return float(max(pairs_of_ranges(((r * chunk, (r + 1) * chunk),
                                      ((r + 4) * chunk, (r + 5) * chunk))) for r in range(4)))


def _case_why(layout: str) -> str:
    # The setup only: the pair counts are what steps 2 and 3 ask (round-2 cold reading).
    if layout == "zigzag":
        return "Each rank keeps an early chunk and its mirror."
    return "Each rank keeps one contiguous slice; the last rank holds the last tokens."


def _waits(layout: str) -> dict:
    """What a case's headline (its pairs and imbalance, ``pairs_step`` at its layout) waits
    for on the lesson page (round 17, as EP11's cases): step 3's guess, or the pairs chart's,
    which is step 2's diagram (templates/episodes/context_parallel.html)."""
    key = pairs_step(layout)
    return {"waiting": "Its pairs and imbalance show",
            "waits_for": ("step-2" if key == "cp-pairs" else key,)}


VIEW = LabView(
    name="cp",
    episode=BY_SLUG["context-parallel"],
    query_model=CPQuery,
    run=run,
    to_api=to_api,
    figures=figures,
    diagrams=(
        Diagram("mask", "Causal attention mask: each cell in the colour of the rank computing "
                        "it", embed_height=560),
        Diagram("pairs", "Causal (query, key) pairs per rank", embed_height=420),
        Diagram("cost", "Traffic per layer (Ulysses: Q, K, V and O): time to send it against "
                        "CP, on the chosen link",
                embed_height=480),
        Diagram("crossover", "Attention against moving the keys and values, by tokens per "
                             "rank", embed_height=440),
    ),
    labels={
        "tokens": "Tokens drawn", "cp": "CP degree c", "layout": "Layout", "model": "Model",
        "params": "Custom params",
        "seq_len": "Sequence length (cost)", "link": "Link", "gpu": "GPU",
    },
    response_model=CPAnswer,
    embed_height=1500,
    extra_context=extra_context,
    summary="Split one sequence's causal attention over CP ranks: pairs per rank, imbalance, "
            "K/V traffic per GPU (bytes) and time (seconds) per layer",
    good=Case(
        "Good case: zigzag, 64 tokens over 8 ranks on NVLink",
        # Inside an NVLink node: over InfiniBand its crossover chart printed step 8's L*
        # (2,535 tokens) one click before the guess (test_answers_hidden).
        {"tokens": 64, "cp": 8, "layout": "zigzag", "link": "nvlink-4"},
        _case_why("zigzag"),
        # Its mask's mirrored bands show equal areas a rank, step 3's choice: held, as EP05
        # holds its bad case, until that guess (round-18 cold reading of EP06, finding 13),
        # so its line needs no wait note.
        held_until="step-3",
    ),
    bad=Case(
        "Bad case: contiguous, 40 tokens over 8 ranks",
        # 40 tokens, not step 2's 64 (the bench printed that step's pair count one click
        # before its guess) nor 32 (its table printed the 122 pairs a former predict drill
        # asked: round-5b cold reading, item 2), nor 48, whose rank 3 computes
        # cp-busiest-contiguous's 129 (test_answers_hidden).
        {"tokens": 40, "cp": 8, "layout": "contiguous"},
        _case_why("contiguous"),
        **_waits("contiguous"),
    ),
    drills=(
        Drill(
            id="cp-busiest-contiguous",
            question=(
                "A 24-token sequence is split contiguously over CP = 4 ranks (6 tokens each). "
                "How many causal (query, key) pairs does the busiest rank compute?"
            ),
            answer=drill_answer,
            unit="pairs",
            hint="The last rank holds tokens 18–23; query q sees keys 0..q, q + 1 of them.",
            explanation="{answer}: 19 + 20 + 21 + 22 + 23 + 24, on the rank holding the last "
                        "tokens.",
            rel_tol=0.005,
            mistakes=cp_mistakes(drill_answer, 24, 4),
        ),
        Drill(
            id="cp-busiest-zigzag",
            question=(
                "The same 24 tokens over CP = 4, cut into 8 chunks of 3, but rank r keeps "
                "chunks r and r + 4 instead of its mirror 7 − r. How many causal pairs does "
                "the busiest rank compute?"
            ),
            answer=zigzag_drill_answer,
            unit="pairs",
            hint="Chunk i holds tokens 3i to 3i + 2, and query q sees q + 1 keys. Which rank "
                 "holds the two latest chunks it can?",
            explanation="{answer}: rank 3 keeps chunk 3 (tokens 9–11: 10 + 11 + 12 = 33) and "
                        "chunk 7 (tokens 21–23: 22 + 23 + 24 = 69), where rank 0 keeps 6 + 42 = "
                        "48. Only the mirror pairs each late chunk with an early one: zigzag "
                        "gives every rank 24 · 25 / 2 ÷ 4 = 75.",
            rel_tol=0.005,
            mistakes=(
                *cp_mistakes(zigzag_drill_answer, 24, 4,
                             "that is what the mirror layout gives every rank. Chunks r and "
                             "r + 4 pair a late chunk with a middle one, not an early one: "
                             "the ranks are not even."),
                Mistake("contiguous", drill_answer,
                        "that is the contiguous split's busiest rank. Two chunks of 3 per "
                        "rank spread the late tokens over two ranks' worth of queries."),
            ),
        ),
        *LESSON_DRILLS["cp"],  # predict and decide (app/lesson_drills/context_parallel.py)
    ),
)

register(router, VIEW)
