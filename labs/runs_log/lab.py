"""Bring your own run, the entry: a pasted log (Megatron-LM or torchtitan, told apart by their
lines) or ``torch.cuda.memory_stats()`` JSON beside an EP08 plan -> ``ParsedRun``; the cluster
controls the log leaves out, defaulted and named; and the lab's answer for that plan beside what
the run measured (``compare``). Nothing pasted is kept: every call reads its text and returns."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import parse_qsl, urlsplit

from labs.core.errors import LabInputError
from labs.core.limits import MAX_GPUS_PER_NODE, MAX_PLAN_GPUS
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


def compare(run: ParsedRun, result: RecipeResult) -> Comparison:
    """The lab's figures for the run's plan beside the run's, and the memory gap by part."""
    m = run.measured
    gpus = result.plan.world_size
    peak = result.cluster.gpu.bf16_flops
    lab_tokens = result.tokens_per_s / gpus if result.step_s else None
    # The lab's TFLOP/s counted as the run's framework counts them: like with like, so the
    # ratio is the throughput's (the same plan does the same FLOPs a token).
    hardware = m.tflops_counts == "hardware"
    per_token = (result.timing.hardware_flops_per_token if hardware
                 else result.timing.model_flops_per_token)
    lab_tflops = lab_tokens * per_token / 1e12 if lab_tokens else None
    run_mfu, how = m.mfu, ""
    if run_mfu is None and m.tokens_per_s_per_gpu:
        run_mfu = m.tokens_per_s_per_gpu * result.timing.model_flops_per_token / peak
        how = ("its tokens/s × the lab's model FLOPs a token "
               f"({result.timing.model_flops_per_token / 1e9:,.1f} GFLOP) ÷ the "
               f"{result.cluster.gpu.name}'s {peak / 1e12:,.0f} TFLOP/s")
    ledger = result.memory_per_gpu_bytes
    figures = (
        Figure("step_time", "s", m.step_s, result.step_s or None, per_step=True),
        Figure("tokens_per_s_per_gpu", "tokens/s", m.tokens_per_s_per_gpu, lab_tokens),
        Figure("tflops_per_gpu", "TFLOP/s", m.tflops_per_gpu, lab_tflops),
        Figure("mfu", "", run_mfu, result.mfu or None, derived=how),
        Figure("peak_allocated_bytes", "B", m.peak_allocated_bytes, ledger),
        Figure("peak_reserved_bytes", "B", m.peak_reserved_bytes, ledger),
    )
    alloc, res = m.peak_allocated_bytes, m.peak_reserved_bytes
    residuals = (
        Residual("beyond_ledger", alloc - ledger if alloc is not None and ledger else None,
                 LEDGER),
        Residual("caching_allocator", res - alloc if res is not None and alloc is not None
                 else None, ALLOCATOR),
        Residual("outside_pytorch", None, OUTSIDE),
    )
    notes = []
    if m.tflops_per_gpu is not None:
        notes.append(("TFLOP/s: Megatron-DeepSpeed counts full recomputation's extra forward "
                      "(hardware FLOPs, as Narayanan et al. 2021 eq. 3), so the lab's are "
                      f"counted the same way: {per_token / 1e9:,.1f} GFLOP a token"
                      if hardware else
                      "TFLOP/s: the run's framework counts model FLOPs (6N plus attention a "
                      "token, no recomputation), and so do the lab's: "
                      f"{per_token / 1e9:,.1f} GFLOP a token")
                     + ". Counted alike, a plan's FLOPs a token are the same in both, so "
                       "the TFLOP/s ratio is the tokens/s ratio")
    if how:
        notes.append(f"MFU: the log prints none; the run's is {how}")
    if alloc is None and res is not None:
        notes.append("torchtitan's step line gives peak reserved only: the allocator's share "
                     "needs torch.cuda.memory_stats()")
    if m.theory_state_bytes is not None and result.memory is not None:
        b = result.memory.breakdown
        state = sum(b[k] for k in ("weights", "gradients", "master_weights",
                                   "optimizer_moments"))
        notes.append(f"Megatron's own estimate of weights and optimizer: "
                     f"{m.theory_state_bytes / 1e9:.2f} GB; the lab's ledger: "
                     f"{state / 1e9:.2f} GB")
    return Comparison(figures, residuals, tuple(notes))
