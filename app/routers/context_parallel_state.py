"""EP06's state: the context-parallel lab's controls (``CPQuery``), the state they describe run
through labs.context_parallel (``run``), its answers (``to_api``, the figures) and the states
the lesson's steps link to (``facts``). ``app.routers.context_parallel`` serves them, with the
lesson's page context, cases and drills."""

from functools import lru_cache
from typing import Literal

from pydantic import Field

from app.charts.context_parallel import mask_figure, pairs_figure
from app.charts.context_parallel_cost import STEP_6_ASKS, cost_figure, crossover_figure
from app.labkit import lesson_state
from app.model_controls import GpuChoice, ModelChoice, ModelControls, gpu_field, model_field
from labs.context_parallel.crossover import cp_crossover
from labs.context_parallel.inputs import CPInput, CPResult, attention_heads
from labs.context_parallel.lab import simulate_cp
from labs.core.limits import CP_LAYOUTS, MAX_CP, MAX_CP_TOKENS, MAX_SEQ_LEN
from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_link


class CPQuery(ModelControls):
    """The controls of the context-parallel lab: the mask picture (tokens, cp, layout) and the
    cost of one sequence of seq_len tokens through one layer of model on link."""

    tokens: int = Field(16, ge=1, le=MAX_CP_TOKENS,
                        description="Tokens of the sequence drawn in the mask picture.")
    cp: int = Field(4, ge=1, le=MAX_CP, description="Context-parallel degree c (ranks).")
    layout: Literal[CP_LAYOUTS] = Field(
        "contiguous", description="How the sequence is split: contiguous (ring), zigzag "
        "(2c chunks, ring), allgather (contiguous, K/V all-gathered) or ulysses (all-to-all "
        "to head shards).")
    model: ModelChoice = model_field("llama-3.1-70b", "Model (its heads, KV heads, head size)")
    seq_len: int = Field(131072, ge=1, le=MAX_SEQ_LEN,
                         description="Tokens of the real sequence whose cost is computed.")
    link: str = Field("ib-ndr", max_length=64,
                      description="Link preset the CP group talks over (GET /api/links).")
    gpu: GpuChoice = gpu_field("h100-sxm", "GPU timing the attention a ring hides behind")


def run(query: CPQuery) -> CPResult:
    return simulate_cp(CPInput(
        tokens=query.tokens, cp=query.cp, layout=query.layout, model=query.model_spec(),
        seq_len=query.seq_len, link=get_link(query.link), gpu=get_gpu(query.gpu)))


def _number(value):
    """A pair count as JSON: an int when whole (always, but for Ulysses' 1/c shares)."""
    return int(value) if value.denominator == 1 else float(value)


def to_api(result: CPResult) -> dict:
    inp, mask, cost = result.input, result.mask, result.cost
    heads, kv = attention_heads(inp.model)
    return {
        "tokens": inp.tokens,
        "cp": inp.cp,
        "layout": inp.layout,
        "model": inp.model.id,
        "seq_len": inp.seq_len,
        "link": inp.link.id,
        "gpu": inp.gpu.id,
        "heads": heads,
        "kv_heads": kv,
        "ranks": [
            {"rank": r.rank, "tokens": list(r.tokens), "causal_pairs": _number(r.causal_pairs),
             **({"heads": list(r.heads)} if r.heads else {})}
            for r in mask.ranks
        ],
        "total_pairs": mask.total_pairs,
        "busiest_pairs": _number(mask.busiest.causal_pairs),
        "imbalance": mask.imbalance,
        "collective": cost.collective,
        "steps": cost.steps,
        "kv_bytes_per_token": cost.kv_bytes_per_token,
        "comm_bytes_per_gpu": cost.comm_bytes_per_gpu,
        "comm_s": cost.comm_s,
        "attention_s": cost.attention_s,
        # The rates the times come from, named on the page (cold reading, issue 36): the
        # attention kernel's achieved FLOP/s at this block size, and the bytes each GPU sends
        # over the collective's whole time (NCCL's achieved rate with its latency).
        "attention_flops": cost.attention_flops,
        "attention_flops_per_s": cost.attention_flops / cost.attention_s,
        "comm_bytes_per_s": cost.comm_bytes_per_gpu / cost.comm_s if cost.comm_s else 0.0,
        "exposed_s": cost.exposed_s,
        "kv_held_bytes": cost.kv_held_bytes,
        "seq_imbalance": cost.imbalance,
        "activation_bytes_per_gpu": cost.activation_bytes_per_gpu,
        "activation_bytes_no_cp": cost.activation_bytes_no_cp,
        "crossover": _crossover(result),
    }


def _crossover(result: CPResult) -> dict:
    c = cp_crossover(result)
    return {"per_rank": c.per_rank, "attention_s": c.attention_s, "comm_s": c.comm_s,
            "rate": c.rate, "busbw": c.busbw, "kv_share": c.kv_share,
            "imbalance": c.imbalance, "round_attention_s": c.round_attention_s,
            "send_s": c.send_s, "crossover": round(c.crossover, 1),
            "ratio": c.ratio,
            "lab_crossover": None if c.lab_crossover is None else round(c.lab_crossover, 1),
            "points": [[x, round(a, 9), round(m, 9)] for x, a, m in c.points]}


def figures(result: CPResult) -> dict:
    return {"mask": mask_figure(result.mask), "pairs": pairs_figure(result.mask),
            "cost": cost_figure(result.sweep, result), "crossover": crossover_figure(result)}


@lru_cache(maxsize=1)
def facts() -> dict:
    """The states the lesson's steps link to, each with the figures its prose quotes, run
    through the same query model, engine and ``to_api`` as GET /api/cp
    (tests/app/test_prose.py follows every link)."""
    state = lesson_state(CPQuery, run, to_api)

    seed = {"tokens": 8, "cp": 2}
    long = {"tokens": 64, "cp": 8, "seq_len": 131072}
    return {
        "contiguous8": state(**seed, layout="contiguous"),
        "zigzag8": state(**seed, layout="zigzag"),
        "allgather8": state(**seed, layout="allgather"),
        "ulysses8": state(**seed, layout="ulysses"),
        "contiguous64": state(tokens=64, cp=8, layout="contiguous"),
        "zigzag64": state(tokens=64, cp=8, layout="zigzag"),
        "ring_nvlink": state(**long, layout="zigzag", link="nvlink-4"),
        "allgather_nvlink": state(**long, layout="allgather", link="nvlink-4"),
        "ulysses_nvlink": state(**long, layout="ulysses", link="nvlink-4"),
        "ring_cp2": state(tokens=64, cp=2, seq_len=131072, layout="zigzag", link="ib-ndr"),
        "ring_cp16": state(tokens=64, cp=16, seq_len=131072, layout="zigzag", link="ib-ndr"),
        "ulysses_cp2": state(tokens=64, cp=2, seq_len=131072, layout="ulysses", link="ib-ndr"),
        "ulysses_cp16": state(tokens=64, cp=16, seq_len=131072, layout="ulysses",
                              link="ib-ndr"),
        # Step 6's predict: a model the bench's chart does not draw (round-5b cold reading,
        # item 1: the chart against CP answered a rises-or-falls choice before the guess).
        "ring_gpt3_cp16": state(tokens=64, **STEP_6_ASKS, layout="zigzag", link="ib-ndr",
                                model="gpt-3-175b"),
        "short_eth": state(tokens=64, cp=8, seq_len=4096, layout="zigzag", link="eth-25g"),
        # Step 8: the crossover, zigzag at CP 8 on InfiniBand NDR, and CP 16 over 100 Gb/s
        # Ethernet, below it.
        "ring_ib": state(**long, layout="zigzag", link="ib-ndr"),
        "ring_eth100": state(tokens=64, cp=16, seq_len=131072, layout="zigzag",
                             link="eth-100g"),
    }
