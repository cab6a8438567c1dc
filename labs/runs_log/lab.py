"""Bring your own run, the entry: a pasted log (Megatron-LM or torchtitan, told apart by their
lines) or ``torch.cuda.memory_stats()`` JSON beside an EP08 plan -> ``ParsedRun``; the cluster
controls the log leaves out, defaulted and named; and the lab's answer for that plan beside what
the run measured (``compare``). Nothing pasted is kept: every call reads its text and returns."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import parse_qsl, urlsplit

from labs.core.errors import LabInputError
from labs.core.limits import MAX_GPUS_PER_NODE, MAX_PLAN_GPUS
from labs.core.recomputation import RECOMPUTATION
from labs.hardware.gpus import GIB, capacity_note
from labs.model.flops import attention_flops_per_token
from labs.recipe.inputs import RecipeResult
from labs.runs_log import megatron, memory_stats, torchtitan
from labs.runs_log.common import FIELD, no_lines, text_of, whole
from labs.runs_log.inputs import (
    CLUSTER_DEFAULTS,
    LINKS_OF_GPU,
    Comparison,
    Figure,
    Measured,
    ParsedRun,
    Residual,
)
from labs.runs_log.theory import peak_against_estimate, why_activations_differ

# Why the lab's ledger and the GPU's memory differ, part by part (PyTorch, "CUDA semantics:
# memory management", pytorch.org/docs/stable/notes/cuda.html#memory-management: reserved
# memory is what the caching allocator holds, allocated what tensors occupy; the CUDA context
# and memory NCCL allocates itself are outside both, seen only by nvidia-smi).
ALLOCATOR = ("Reserved beyond allocated: segments PyTorch's caching allocator holds but no "
             "tensor occupies (freed blocks kept for reuse, and fragmentation)")
LEDGER = ("Allocated beyond the lab's ledger: tensors the ledger does not name (temporary "
          "buffers, communication buckets, kernel workspaces), or, when negative, what the "
          "ledger counts that the run did not hold")
OUTSIDE = ("Outside PyTorch's allocator: the CUDA context and NCCL's own buffers. PyTorch's "
           "counters cannot see them, so no log line says; nvidia-smi's used memory minus max "
           "reserved is their size")


def plan_params(plan: str) -> tuple[tuple[str, str], ...]:
    """An EP08 URL (or its query string) as its controls."""
    query = urlsplit(plan.strip()).query if "?" in plan else plan.strip()
    try:
        items = parse_qsl(query, keep_blank_values=False, max_num_fields=64, strict_parsing=False)
    except ValueError:
        raise LabInputError("plan", "more than 64 controls in the plan's URL") from None
    if not items:
        raise LabInputError("plan", "paste an EP08 URL (/episodes/recipe-3d?model=...&tp=...) "
                                    "for the run's plan")
    return tuple(items)


def _from_plan(plan: str) -> ParsedRun:
    params = plan_params(plan)
    given = dict(params)
    try:
        world = int(given.get("nodes", "8")) * int(given.get("gpus_per_node", "8"))
    except ValueError:
        raise LabInputError("plan", "nodes and gpus_per_node must be whole numbers") from None
    return ParsedRun("memory_stats", None, params, world, Measured(), found=("plan",))


def read_run(log: str | bytes = "", stats: str | bytes = "", plan: str = "",
             gpus: int | None = None) -> ParsedRun:
    """The run a paste describes. ``stats``: torch.cuda.memory_stats() JSON; ``plan``: an EP08
    URL, needed when there is no log; ``gpus``: the world size where a config leaves it out."""
    text = text_of(log)
    try:
        stats_text = text_of(stats) if stats else ""
    except LabInputError as exc:
        raise LabInputError(memory_stats.FIELD, exc.message) from None
    if not stats_text and memory_stats.looks_like(text):
        text, stats_text = "", text
    if text.strip():
        if megatron.looks_like(text):
            run = megatron.read(text)
        elif torchtitan.looks_like(text):
            run = torchtitan.read(text, gpus)
        else:
            raise no_lines(f"{megatron.LOOKED_FOR}; or {torchtitan.LOOKED_FOR}; or the JSON "
                           "of torch.cuda.memory_stats()")
    elif plan.strip():
        run = _from_plan(plan)
    elif stats_text:
        raise LabInputError("plan", "memory_stats needs the plan beside it: paste the EP08 URL "
                                    "of the run's plan (or the run's log)")
    else:
        raise LabInputError(FIELD, "paste a Megatron-LM or torchtitan log, or "
                                   "torch.cuda.memory_stats() JSON with an EP08 plan")
    if stats_text:
        peaks, retries = memory_stats.read(stats_text)
        notes = run.notes + ((f"the allocator retried {retries:,} allocations after freeing "
                              "its cache (num_alloc_retries): memory was short",)
                             if retries else ())
        run = replace(run, measured=replace(
            run.measured, peak_allocated_bytes=peaks.peak_allocated_bytes,
            peak_reserved_bytes=peaks.peak_reserved_bytes), notes=notes,
            found=run.found + ("memory_stats",))
    return run


def recipe_params(run: ParsedRun, controls: dict[str, str]) -> tuple[dict[str, str],
                                                                      tuple[tuple[str, str,
                                                                                  str], ...]]:
    """EP08's query for the run: its plan, the cluster the controls give, and for each cluster
    control neither the log nor the user gave, its default and why (control, value, why)."""
    params = run.query
    defaulted = [d for d in run.defaulted if d[0] not in controls]
    for name in ("model",):
        if controls.get(name):
            params[name] = controls[name]
    world = run.world_size
    if not 1 <= world <= MAX_PLAN_GPUS:
        raise LabInputError(FIELD, f"{world:,} GPUs: the recipe takes 1 to {MAX_PLAN_GPUS:,}")
    gpu = controls.get("gpu") or params.get("gpu")
    if not gpu:
        gpu = CLUSTER_DEFAULTS["gpu"]
        defaulted.append(("gpu", gpu, "the log does not name the GPU"))
    params["gpu"] = gpu
    links = LINKS_OF_GPU.get(gpu, (CLUSTER_DEFAULTS["intra_link"],
                                   CLUSTER_DEFAULTS["inter_link"]))
    for name, link in zip(("intra_link", "inter_link"), links, strict=True):
        if controls.get(name):
            params[name] = controls[name]
        elif not params.get(name):
            params[name] = link
            defaulted.append((name, link, "the log does not name the links: the GPU's usual"))
    if controls.get("gpus_per_node"):
        per_node = whole("gpus_per_node", _int(controls["gpus_per_node"]), 1, MAX_GPUS_PER_NODE)
    elif params.get("gpus_per_node"):
        per_node = _int(params["gpus_per_node"])
    else:
        per_node = min(CLUSTER_DEFAULTS["gpus_per_node"], world)
        defaulted.append(("gpus_per_node", str(per_node), "the log does not say how many GPUs "
                          "a node holds"))
    if world % per_node:
        raise LabInputError("gpus_per_node", f"{world:,} GPUs do not fill nodes of {per_node}")
    params["gpus_per_node"] = str(per_node)
    params["nodes"] = str(world // per_node)
    return params, tuple(defaulted)


def _int(text: str) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        raise LabInputError("gpus_per_node", f"{text!r} is not a whole number") from None


# How far the log's FLOPs a token (its TFLOP/s ÷ its tokens/s) may stray from the lab's before
# the page says the two count differently: the figures are printed to 3-4 digits, and Megatron
# halving causal attention (below) moves an 8B at 8k tokens by 11%.
FLOPS_TOLERANCE = 0.03


def log_flops_per_token(m: Measured) -> float | None:
    """The FLOPs a token the run's framework counted: its TFLOP/s ÷ its tokens/s per GPU (both
    per GPU, so the GPUs cancel). None where the log gives only one of them."""
    if not m.tflops_per_gpu or not m.tokens_per_s_per_gpu:
        return None
    return m.tflops_per_gpu * 1e12 / m.tokens_per_s_per_gpu


def _why_counts_differ(logged: float, result: RecipeResult) -> str:
    """A known reason the log's count differs from the lab's, where one fits to 1%."""
    lab = result.timing.model_flops_per_token
    half = attention_flops_per_token(result.model, result.plan.seq_len) / 2
    if abs(logged / (lab - half) - 1) < 0.01:
        # NVIDIA/Megatron-LM @ 001b00c, megatron/training/training.py
        # num_floating_point_operations: "core attention ... / 2  # causal mask (only half of
        # the mask is non-zero)"; the lab counts the whole score matrix (PaLM, appendix B).
        return (f": the lab's count with causal attention halved ({lab / 1e9:,.1f} − "
                f"{half / 1e9:,.1f} GFLOP), as Megatron-LM counts it (\"only half of the mask "
                "is non-zero\"), where the lab, PaLM (appendix B) and torchtitan count the whole "
                "score matrix")
    return ": the framework counts other terms than the lab (6N plus attention a token)"



def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def reserved_unlike(result: RecipeResult, reserved: float) -> str:
    """Why peak reserved and the lab's ledger are no like pair (fixB item 2: the page printed
    torchtitan's 65.9 GB beside the ledger's 25.2 GB as a ratio, 0.38): what reserved holds
    that the ledger does not count, what the ledger counts, and which way the two differ.
    Reserved is every segment the caching allocator holds at its peak (PyTorch, "CUDA
    semantics: memory management"); the ledger (labs.memory) counts the training state and the
    activations a micro-batch keeps for its backward, nothing transient."""
    plan, b = result.plan, result.memory.breakdown
    holds = ["the caching allocator's free segments and fragmentation",
             "temporary buffers (communication buckets, kernel workspaces)"]
    if plan.zero == 3:
        # FSDP / ZeRO-3 gathers a layer's whole weights before it runs (and prefetches the
        # next), and reduce-scatters its whole gradients after its backward.
        holds.append("ZeRO-3's whole weights for the layer running and the one prefetched, and "
                     "their whole gradients before the reduce-scatter")
    mode = RECOMPUTATION[plan.recompute]
    if mode.forward_again:
        holds.append("the activations of the layer whose backward recomputes them")
    state = sum(b[k] for k in ("weights", "gradients", "master_weights", "optimizer_moments"))
    kept = result.memory_per_gpu_bytes - state
    sharded = {1: "the optimizer's part", 2: "gradients and optimizer", 3: "all of it"}
    shard = (f", {sharded[plan.zero]} sharded over ZeRO-{plan.zero}'s {plan.dp * plan.cp} "
             "ranks" if plan.zero else "")
    keeps = ""
    if mode.input_only:
        # Round-27 reading A, finding 4: the kept bytes are the layers' inputs and the
        # embedding's and output layer's activations, each said.
        keeps = (f": each layer's input, {b['activations'] / 1e9:,.2f} GB, under full "
                 "recomputation, and the embedding's output and the output layer's logits, "
                 f"{b['embedding_and_logits'] / 1e9:,.2f} GB")
    gap = printed_gap(reserved, result.memory_per_gpu_bytes)
    way = (f"Reserved is {gap / 1e9:,.1f} GB above the ledger: a ratio would read the lab low "
           "for what the ledger leaves out" if gap >= 0 else
           f"Even so the ledger is {-gap / 1e9:,.1f} GB above reserved: it counts more than "
           "the run held")
    return (f"Not like for like, so no ratio: reserved also holds what the ledger leaves out, "
            f"{_and(holds)}. The ledger counts the training state ({state / 1e9:,.1f} GB"
            f"{shard}) and the activations kept for the backward ({kept / 1e9:,.1f} GB{keeps}). "
            f"{way}")


def printed_gap(reserved: float, ledger: float) -> float:
    """Reserved less the ledger as the table's one-place GB figures give it (round-27 reading
    A, finding 6: 46.0 and 46.9 GB printed beside "1.0 GB above", from 46.909 − 45.955)."""
    return (round(reserved / 1e9, 1) - round(ledger / 1e9, 1)) * 1e9


def capacity_of(run: ParsedRun, result: RecipeResult) -> str:
    """The GPU memory the log's CUDA capacity line states (else the GPU preset's), beside the GB
    the lab budgets (fixB item 1: torchtitan's 79.11 GiB, 84.9 GB, sat beside the lab's 80 GB
    unexplained)."""
    cap = run.measured.gpu_capacity_bytes
    gpu = result.cluster.gpu
    reserved = run.measured.peak_reserved_bytes
    above = (printed_gap(reserved, result.memory_per_gpu_bytes)
             if reserved is not None and result.memory is not None else None)
    if cap is None:
        # Round-27 reading A, finding 5: a log with no capacity line (Megatron's) went without
        # the budget and the verdicts' direction; the GPU the lab runs it on, by its preset.
        return capacity_note(gpu, above=above)
    if run.query.get("gpu") == gpu.id:
        return capacity_note(gpu, cap, 2, ": your log's CUDA capacity line", above)
    return (f"GPU memory: your log's CUDA capacity, {cap / GIB:.2f} GiB ({cap / 1e9:,.1f} GB), "
            f"is its own GPU's, not the chosen one's. {capacity_note(gpu)}")


GUESSED = ("the log names no GPU, so the lab timed a default: a ratio against the wrong GPU "
           "says nothing about the lab")
GUESSED_PEAK = "and the run's MFU, worked out from that GPU's peak, depends on the same guess"


def compare(run: ParsedRun, result: RecipeResult, gpu_guessed: bool = False) -> Comparison:
    """The lab's figures for the run's plan beside the run's, and the memory gap by part.
    ``gpu_guessed``: the GPU is a default, not the log's (round-29 reading C, finding 6): every
    ratio is withheld, and an MFU worked out from the guessed GPU's peak too."""
    m = run.measured
    gpus = result.plan.world_size
    peak = result.cluster.gpu.bf16_flops
    gpu_peak = f"the {result.cluster.gpu.name}'s {peak / 1e12:,.0f} TFLOP/s"
    lab_tokens = result.tokens_per_s / gpus if result.step_s else None
    # The lab's TFLOP/s counted as the run's framework counts them: hardware FLOPs for
    # Megatron-DeepSpeed, model FLOPs otherwise.
    hardware = m.tflops_counts == "hardware"
    model_flops = result.timing.model_flops_per_token
    per_token = result.timing.hardware_flops_per_token if hardware else model_flops
    lab_tflops = lab_tokens * per_token / 1e12 if lab_tokens else None
    logged = log_flops_per_token(m)
    differ = logged is not None and abs(logged / per_token - 1) > FLOPS_TOLERANCE
    run_mfu, how = m.mfu, ""
    if m.tokens_per_s_per_gpu and (run_mfu is None or differ):
        # The log prints no MFU, or prints one on its own count: the lab's count beside the
        # lab's MFU, so that row compares like with like.
        run_mfu = m.tokens_per_s_per_gpu * model_flops / peak
        how = (f"its tokens/s × the lab's model FLOPs a token ({model_flops / 1e9:,.1f} "
               f"GFLOP) ÷ {gpu_peak}")
    ledger = result.memory_per_gpu_bytes
    figures = [
        Figure("step_time", "s", m.step_s, result.step_s or None, per_step=True),
        Figure("tokens_per_s_per_gpu", "tokens/s", m.tokens_per_s_per_gpu, lab_tokens),
        Figure("tflops_per_gpu", "TFLOP/s", m.tflops_per_gpu, lab_tflops),
        Figure("mfu", "", run_mfu, result.mfu or None, derived=how),
    ]
    notes = []
    if differ and not hardware:
        # The same utilisation on the log's own count: its TFLOP/s (or printed MFU) over the
        # peak, and the lab's tokens/s at the log's FLOPs a token.
        own = m.mfu if m.mfu is not None else m.tflops_per_gpu * 1e12 / peak
        figures.append(Figure(
            "mfu_log", "", own, lab_tokens * logged / peak if lab_tokens else None,
            derived="" if m.mfu is not None else f"its TFLOP/s ÷ {gpu_peak}"))
    ledger_figures = (
        Figure("peak_allocated_bytes", "B", m.peak_allocated_bytes, ledger),
        Figure("peak_reserved_bytes", "B", m.peak_reserved_bytes, ledger,
               unlike=reserved_unlike(result, m.peak_reserved_bytes)
               if m.peak_reserved_bytes is not None and result.memory is not None else ""),
    )
    alloc, res = m.peak_allocated_bytes, m.peak_reserved_bytes
    residuals = (
        Residual("beyond_ledger", alloc - ledger if alloc is not None and ledger else None,
                 LEDGER),
        Residual("caching_allocator", res - alloc if res is not None and alloc is not None
                 else None, ALLOCATOR),
        Residual("outside_pytorch", None, OUTSIDE),
    )
    lab_counts = ("the lab counts hardware FLOPs, with full recomputation's extra forward, as "
                  "Megatron-DeepSpeed does (Narayanan et al. 2021 eq. 3)" if hardware else
                  "the lab counts model FLOPs, 6N plus attention a token, no recomputation")
    if logged is None and m.tflops_per_gpu is not None:
        notes.append(f"TFLOP/s: {lab_counts}: {per_token / 1e9:,.1f} GFLOP a token. The log "
                     "gives no tokens/s, so how it counts cannot be checked")
    elif logged is not None:
        counts = (f"TFLOP/s: your log counts {logged / 1e9:,.1f} GFLOP a token (its "
                  f"{m.tflops_per_gpu:,.1f} TFLOP/s ÷ its {m.tokens_per_s_per_gpu:,.0f} "
                  f"tokens/s); {lab_counts}: {per_token / 1e9:,.1f} GFLOP")
        apart = abs(logged / per_token - 1)
        if differ:
            why = "" if hardware else _why_counts_differ(logged, result)
            both = ""
            if lab_tflops and gpu_guessed:
                both = (" Counted differently, the TFLOP/s ratio is not the tokens/s ratio, "
                        "which compares the two like with like")
            elif lab_tflops:
                both = (" Counted differently, the TFLOP/s ratio ("
                        f"{lab_tflops / m.tflops_per_gpu:.2f}) is not the tokens/s ratio ("
                        f"{lab_tokens / m.tokens_per_s_per_gpu:.2f}), which compares the two "
                        "like with like")
            if not hardware and lab_tokens:
                both += (f"; MFU is shown on each count: on your log's, its TFLOP/s ÷ "
                         f"{gpu_peak}, and the lab's tokens/s at your log's "
                         f"{logged / 1e9:,.1f} GFLOP a token")
            # Round-22 cold reading R, finding 10: "57.9 GFLOP, 11% fewer" read as if the
            # lab's count were the smaller; the sentence names the log's.
            notes.append(f"{counts}. Your log's is {apart:.0%} "
                         f"{'fewer' if logged < per_token else 'more'}{why}.{both}")
        else:
            # Round-30 reading, finding 4: "to within 3%" (FLOPS_TOLERANCE, the threshold
            # under which two counts are alike) read as the lab's 3% gap: the ratios instead.
            alike = "Counted alike, the TFLOP/s ratio is the tokens/s ratio"
            if lab_tflops and lab_tokens and not gpu_guessed:
                alike = (f"Counted alike, the TFLOP/s ratio ({lab_tflops / m.tflops_per_gpu:.2f})"
                         f" is the tokens/s ratio ({lab_tokens / m.tokens_per_s_per_gpu:.2f})")
            notes.append(f"{counts}: {apart:.1%} apart. {alike}")
    if how:
        notes.append(("MFU: the log prints none; the run's is " if m.mfu is None else
                      "MFU on the lab's count: the run's is ") + how
                     + (" (withheld here: that GPU is a guess)" if gpu_guessed else ""))
    if alloc is None and res is not None:
        notes.append("torchtitan's step line gives peak reserved only: the allocator's share "
                     "needs torch.cuda.memory_stats()")
    if m.theory_state_bytes is not None and result.memory is not None:
        b = result.memory.breakdown
        state = sum(b[k] for k in ("weights", "gradients", "master_weights",
                                   "optimizer_moments"))
        note = (f"Megatron's own estimate of weights and optimizer: "
                f"{m.theory_state_bytes / 1e9:.2f} GB; the lab's ledger: {state / 1e9:.2f} GB")
        if m.theory_activation_bytes is not None:
            # Round-26 reading A, finding 9: the log's other half, which disagrees.
            kept = result.memory_per_gpu_bytes - state
            gap = kept - m.theory_activation_bytes
            note += (f". Its activation estimate: {m.theory_activation_bytes / 1e9:.2f} GB; "
                     f"the lab's: {kept / 1e9:.2f} GB, {abs(gap) / 1e9:.2f} GB "
                     f"({abs(gap) / m.theory_activation_bytes:.0%}) "
                     f"{'more' if gap > 0 else 'less'}"
                     f"{why_activations_differ(m.theory_activation_bytes, result)}")
        notes.append(note)
    ledger_state = ledger_kept = None
    if result.memory is not None:
        b = result.memory.breakdown
        ledger_state = sum(b[k] for k in ("weights", "gradients", "master_weights",
                                          "optimizer_moments"))
        ledger_kept = result.memory_per_gpu_bytes - ledger_state
    peak = peak_against_estimate(m, ledger_state, ledger_kept)
    if peak:
        notes.append(peak)
    shown = (*figures, *ledger_figures)
    if gpu_guessed:
        shown = tuple(_withhold(f) for f in shown)
    return Comparison(shown, residuals, tuple(notes), logged, per_token,
                      differ, capacity_of(run, result))


def _withhold(f: Figure) -> Figure:
    """``f`` with its ratio withheld, and its measured value too where it was worked out from
    the guessed GPU's peak (``derived``). Only the timing and MFU rows (round-31 reading B,
    finding 12): the ledger's bytes (unit "B") are the plan's, whichever GPU times it, and a
    row the log has no figure for has no ratio to withhold ("not in the log")."""
    if f.unlike or f.unit == "B" or (f.measured is None and not f.derived):
        return f
    if f.derived:
        return replace(f, measured=None, withheld=f"{GUESSED}; {GUESSED_PEAK}")
    return replace(f, withheld=GUESSED)
