"""A torchtitan run read back: its job config (TOML, read with the standard library's tomllib)
and its step lines.

The formats, as torchtitan writes them (pytorch/torchtitan, read at commit c594d8a):

- the job config, ``torchtitan/config/job_config.py``: ``[model] name, flavor``;
  ``[training] local_batch_size, global_batch_size (-1: local × DP), seq_len, steps``;
  ``[parallelism] data_parallel_replicate_degree, data_parallel_shard_degree (-1: the rest of
  the world), tensor_parallel_degree, pipeline_parallel_degree, context_parallel_degree,
  expert_parallel_degree, pipeline_parallel_schedule, pipeline_parallel_microbatch_size``;
  ``[activation_checkpoint] mode`` (none, selective, full; default selective) and
  ``selective_ac_option`` ("op", or an integer k: every k-th block fully checkpointed; default
  "2"); ``[float8]``;
- the step line, ``torchtitan/components/metrics.py`` ``MetricsProcessor.log``:
  ``step: {step:2}  loss: {loss:7.4f}  memory: {max_reserved_gib:5.2f}GiB({max_reserved_pct:.2f}%)
  tps: {round(tps):,}  tflops: {tflops:,.2f}  mfu: {mfu:.2f}%``, each field wrapped in ANSI
  colour codes (stripped), where tps is tokens per second per GPU (the rank's tokens over the
  interval and the non-data-parallel degree) and memory is the caching allocator's peak
  *reserved* bytes (``torch.cuda.memory_stats()['reserved_bytes.all.peak']``);
- ``DeviceMemoryMonitor``'s ``... capacity: NVIDIA H100 80GB HBM3 with 79.11GiB memory``.
"""

from __future__ import annotations

import re
import tomllib

from labs.core.errors import LabInputError
from labs.core.recomputation import RECOMPUTATION
from labs.model.op_checkpoint import check_model
from labs.model.presets import get_model
from labs.runs_log.common import (
    FIELD,
    NUMBER,
    check_world,
    finite,
    median,
    microbatches,
    no_lines,
    params_of,
    whole,
)
from labs.runs_log.inputs import GIB, Measured, ParsedRun

STEP = re.compile(rf"\bstep:\s*(\d+)\s+loss:\s*({NUMBER}).*?memory:\s*({NUMBER})\s*GiB"
                  rf"\(({NUMBER})%\)\s+tps:\s*([\d,]+)(?:\s+tflops:\s*([\d,.]+))?"
                  rf"(?:\s+mfu:\s*({NUMBER})%)?")
CAPACITY = re.compile(rf"capacity: (.+?) with ({NUMBER})\s*GiB memory")
TABLE = re.compile(r"^\s*\[[A-Za-z_][\w.-]*\]\s*(#.*)?$")
KEY = re.compile(r"^\s*[A-Za-z_][\w-]*\s*=\s*\S")
# torchtitan flavors that are lab presets (torchtitan/models/llama3/__init__.py llama3_args:
# 8B, 70B, 405B are Llama 3.1's shapes, vocabulary 128,256).
FLAVORS = {("llama3", "8B"): "llama-3.1-8b", ("llama3", "70B"): "llama-3.1-70b",
           ("llama3", "405B"): "llama-3.1-405b"}
SCHEDULES = {"1f1b": "1f1b", "gpipe": "gpipe", "interleaved1f1b": "interleaved-1f1b",
             "loopedbfs": "looped-bfs", "interleavedzerobubble": "interleaved-zb",
             "zbvzerobubble": "zb-v", "dualpipev": "dualpipe-v"}
GPUS = (("H100", "h100-sxm"), ("H800", "h800"), ("H200", "h200"), ("B200", "b200"),
        ("A100", "a100-80gb"), ("MI300X", "mi300x"), ("4090", "rtx-4090"))
LOOKED_FOR = ("a torchtitan job config ([model], [training], [parallelism] tables) or its "
              "step lines ('step: N  loss: ...  memory: X GiB(Y%)  tps: ...')")


def _recompute(ac: dict, notes: list[str], model: str) -> str:
    """The lab's mode for torchtitan's [activation_checkpoint] (module docstring): op-level
    selective AC as the lab's op-level mode (``labs.model.op_checkpoint``, counted for dense
    Llama blocks; another ``model``'s read as Korthikanti's selective, with a note);
    layer-level, selective_ac_option k, as the
    layer-granular mode that checkpoints every k-th block (labs.core.catalogue: torchtitan's
    own counter), k = 0 or 1 wrapping every block (full)."""
    mode = str(ac.get("mode", "selective"))
    if mode in ("none", "full"):
        return {"none": "flash", "full": "full"}[mode]
    if mode != "selective":
        raise LabInputError(FIELD, f"[activation_checkpoint] mode = {mode!r}: expected none, "
                                   "selective or full")
    option = str(ac.get("selective_ac_option", "2"))
    if option == "op":
        op = next(r.id for r in RECOMPUTATION.values() if r.policy == "torchtitan-op")
        try:
            check_model(get_model(model))
        except LabInputError:
            notes.append("torchtitan's selective op checkpointing is counted for dense Llama "
                         f"blocks; {model}'s layers are read as Korthikanti et al.'s selective "
                         "recomputation")
            return "selective"
        return op
    if not option.isdigit():
        raise LabInputError(FIELD, f"[activation_checkpoint] selective_ac_option = {option!r}: "
                                   "expected 'op' or a whole number of layers")
    every = int(option)
    if every <= 1:  # torchtitan wraps a block when not ac_freq or count % ac_freq == 0
        return "full"
    layered = {r.every: r for r in RECOMPUTATION.values() if r.every > 1}
    record = layered.get(every) or min(layered.values(), key=lambda r: abs(r.every - every))
    if record.every != every:
        notes.append(f"selective_ac_option = {option!r} checkpoints 1 block in {every}; the "
                     f"lab's nearest mode, {record.label}, recomputes more layers")
    return record.id


def _tp_overlap(par: dict, tp: int, notes: list[str],
                defaulted: list[tuple[str, str, str]]) -> str:
    """The lab's TP overlap for what torchtitan runs: with [parallelism]
    enable_async_tensor_parallel (default false), AsyncTP's micro-pipelined all-gather and
    reduce-scatter matmuls, the lab's "all" (as labs/presets/runs.json times torchtitan's
    AsyncTP rows); without it, DTensor's collectives run in line with the matmuls, overlapping
    none ("none": Megatron's "backward" overlap is Megatron's own, not torchtitan's). A config
    that does not set it is named in ``defaulted``, AsyncTP in ``notes``."""
    found = par.get("enable_async_tensor_parallel")
    if found is not None and not isinstance(found, bool):
        raise LabInputError(FIELD, f"enable_async_tensor_parallel = {found!r} in the job "
                                   "config: expected true or false")
    overlap = "all" if found else "none"
    if found and tp > 1:
        notes.append("enable_async_tensor_parallel = true: AsyncTP's micro-pipelined TP "
                     "matmuls, timed as the lab's TP overlap all")
    if found is None and tp > 1:
        defaulted.append(("tp_overlap", overlap, "the config does not set "
                          "enable_async_tensor_parallel: torchtitan's default, off, runs the "
                          "TP collectives in line, overlapping none of them"))
    return overlap


def looks_like(text: str) -> bool:
    return bool(STEP.search(text) or re.search(r"^\s*\[parallelism\]", text, re.M))


def config_of(text: str) -> dict:
    """The TOML lines of the text (tables, keys, comments), parsed; {} when there are none."""
    lines, seen = [], False
    for line in text.split("\n"):
        if TABLE.match(line):
            seen = True
            lines.append(line)
        elif seen and KEY.match(line):
            lines.append(line)
    if not lines:
        return {}
    try:
        return tomllib.loads("\n".join(lines))
    except tomllib.TOMLDecodeError as exc:
        raise LabInputError(FIELD, f"the job config is not valid TOML: {exc}") from None


def _table(config: dict, name: str) -> dict:
    found = config.get(name, {})
    if not isinstance(found, dict):
        raise LabInputError(FIELD, f"[{name}] must be a table of the job config")
    return found


def _int(table: dict, name: str, default: int) -> int:
    found = table.get(name, default)
    if isinstance(found, bool) or not isinstance(found, int):
        raise LabInputError(FIELD, f"{name} = {found!r} in the job config: expected a whole "
                                   "number")
    return found


def gpu_of(text: str) -> tuple[str | None, float | None]:
    found = CAPACITY.search(text)
    if not found:
        return None, None
    name = found.group(1)
    gpu = next((gid for key, gid in GPUS if key in name), None)
    capacity = finite(found.group(2))
    return gpu, capacity * GIB if capacity is not None else None


def read(text: str, gpus: int | None = None) -> ParsedRun:
    """``gpus``: the world size when the config leaves it to the launcher (shard degree -1)."""
    config = config_of(text)
    steps = [m.groups() for m in STEP.finditer(text)]
    if not config and not steps:
        raise no_lines(LOOKED_FOR)
    if not config:
        raise LabInputError(FIELD, "no job config: the plan cannot be read. Paste the run's "
                                   "TOML ([model], [training], [parallelism]) above its step "
                                   "lines")
    model_t, train, par = (_table(config, n) for n in ("model", "training", "parallelism"))
    notes: list[str] = []
    defaulted: list[tuple[str, str, str]] = []
    tp = whole("tensor_parallel_degree", _int(par, "tensor_parallel_degree", 1))
    pp = whole("pipeline_parallel_degree", _int(par, "pipeline_parallel_degree", 1))
    cp = whole("context_parallel_degree", _int(par, "context_parallel_degree", 1))
    ep = whole("expert_parallel_degree", _int(par, "expert_parallel_degree", 1))
    replicate = whole("data_parallel_replicate_degree",
                      _int(par, "data_parallel_replicate_degree", 1))
    shard = _int(par, "data_parallel_shard_degree", -1)
    if shard == -1:
        world = whole("gpus", gpus if gpus is not None else 8)
        if gpus is None:
            defaulted.append(("gpus", str(world), "data_parallel_shard_degree = -1 takes the "
                              "launcher's world size, which the config does not state"))
        if world % (tp * pp * cp * replicate):
            raise LabInputError(FIELD, f"contradictory arguments in the job config: {world:,} "
                                       f"GPUs are not a multiple of TP {tp} × PP {pp} × CP "
                                       f"{cp} × replicate {replicate}")
        shard = world // (tp * pp * cp * replicate)
    shard = whole("data_parallel_shard_degree", shard)
    dp = replicate * shard
    world = check_world(tp, pp, cp, dp, gpus, "job config")
    local = whole("local_batch_size", _int(train, "local_batch_size",
                                           _int(train, "batch_size", 8)))
    gbs = _int(train, "global_batch_size", -1)
    gbs = local * dp if gbs in (-1, 0) else whole("global_batch_size", gbs)
    accumulation = microbatches(gbs, local, dp, "job config")
    micro, per_local = local, 1
    if pp > 1:
        micro = whole("pipeline_parallel_microbatch_size",
                      _int(par, "pipeline_parallel_microbatch_size", 1))
        if local % micro:
            raise LabInputError(FIELD, f"contradictory arguments in the job config: "
                                       f"local_batch_size {local} is not a multiple of "
                                       f"pipeline_parallel_microbatch_size {micro}")
        per_local = local // micro
    name = str(par.get("pipeline_parallel_schedule", "1F1B"))
    schedule = SCHEDULES.get(name.lower().replace("_", ""))
    if schedule is None:
        schedule = "1f1b"
        notes.append(f"pipeline schedule {name} is not one the lab runs: 1F1B stands in")
    virtual = 2 if schedule in ("interleaved-1f1b", "looped-bfs", "interleaved-zb", "zb-v",
                                "dualpipe-v") else 1
    converters = model_t.get("converters", [])
    fp8 = "float8" in config or (isinstance(converters, list)
                                 and any("float8" in str(c) for c in converters))
    key = (str(model_t.get("name", "")), str(model_t.get("flavor", "")))
    model = FLAVORS.get(key)
    if model is None:
        defaulted.append(("model", "llama-3.1-8b", f"torchtitan's {key[0]} {key[1]} is not a "
                          "lab preset: choose the model"))
        model = "llama-3.1-8b"
    recompute = _recompute(_table(config, "activation_checkpoint"), notes, model)
    gpu, capacity = gpu_of(text)
    seq = whole("seq_len", _int(train, "seq_len", 2048))
    plan = {"model": model, "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep,
            "zero": 3 if shard > 1 else 0, "recompute": recompute, "schedule": schedule,
            "virtual": virtual, "micro_batch": micro, "microbatches": accumulation * per_local,
            "seq_len": seq, "fp8": fp8, "sequence_parallel": True, "dropout": False,
            "tp_overlap": _tp_overlap(par, tp, notes, defaulted)}
    if gpu:
        plan["gpu"] = gpu
    if replicate > 1 and shard > 1:
        plan["dp_shard"] = shard  # HSDP: EP08's shard degree (labs.recipe.dp_time)
        notes.append(f"HSDP: {replicate} replicas of {shard}-way FSDP (dp_shard {shard})")
    rows = steps[1:] if len(steps) > 1 else steps
    if len(steps) > 1:
        notes.append("the first step line is left out (it includes warm-up and compilation)")
    def column(i: int, among: list) -> list[float]:
        return [v for r in among if r[i] and (v := finite(r[i])) is not None]

    tps = median(column(4, rows))
    step_s = gbs * seq / (tps * world) if tps else None
    mfu = median(column(6, rows))
    measured = Measured(
        step_s=step_s, steps=len(rows) if steps else 0,
        tflops_per_gpu=median(column(5, rows)), tokens_per_s_per_gpu=tps,
        mfu=mfu / 100 if mfu else None,
        peak_reserved_bytes=max(column(2, steps), default=0) * GIB or None,
        gpu_capacity_bytes=capacity, global_batch=gbs)
    get_model(model)  # a preset id, checked
    found = ["job config"] + (["steps"] if steps else []) + (["GPU"] if gpu else [])
    return ParsedRun("torchtitan", None, params_of(plan), world, measured,
                     defaulted=tuple(defaulted), notes=tuple(notes), found=tuple(found))
