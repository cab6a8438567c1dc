"""A Megatron-LM training log read back: the plan its arguments describe and what it measured.

The lines it reads, each as Megatron-LM prints it (NVIDIA/Megatron-LM, read at commit 001b00c):

- the arguments block, ``megatron/training/arguments.py`` ``_print_args``: a line
  ``------------------------ arguments ------------------------``, then one line per argument,
  ``'  {} {} {}'.format(arg, '.' * (48 - len(arg)), value)``, then ``-- end of arguments --``;
- the iteration line, ``megatron/training/training.py`` ``training_log``: ``' iteration
  {:8d}/{:8d} |'`` then ``' key: value |'`` fields, among them ``elapsed time per iteration
  (ms): {:.1f}``, ``throughput per GPU (TFLOP/s/GPU): {:.1f}`` (with ``--log-throughput``) and
  ``global batch size: {:5d}``. Megatron-DeepSpeed (BigScience's fork, which trained BLOOM)
  prints ``elapsed time per iteration (s)`` and ``TFLOPs``: read too;
- the memory report, ``megatron/training/utils.py`` ``report_memory``: ``[Rank r] (after N
  iterations) memory (MB) | allocated: .. | max allocated: .. | reserved: .. | max reserved:
  ..`` (MB = 1024 × 1024 bytes: torch.cuda.memory_allocated() / mega_bytes);
- ``megatron/training/theoretical_memory_usage.py`` ``report_theoretical_memory``:
  ``Theoretical memory footprints: weight and optimizer=X MB, activation=Y MB, total=Z MB``
  (the activation part only with sequence parallelism and selective recomputation);
- the tokenizer's ``> padded vocab (size: V) with D dummy tokens (new size: P)``
  (``_vocab_size_with_padding``), since ``padded_vocab_size`` is set after the arguments are
  printed.
"""

from __future__ import annotations

import re

from labs.core.catalogue import RECIPES
from labs.core.errors import LabInputError
from labs.core.recomputation import RECOMPUTATION
from labs.model.spec import ModelSpec
from labs.runs_log.common import (
    FIELD,
    NUMBER,
    check_world,
    finite,
    median,
    microbatches,
    model_value,
    no_lines,
    params_of,
    shape,
    value,
    whole,
)
from labs.runs_log.inputs import MIB, Measured, ParsedRun

HEADER = re.compile(r"-{3,} arguments -{3,}")
FOOTER = re.compile(r"-{3,} end of arguments -{3,}")
PREFIX = re.compile(r"^(?:\[default\d+\]:|\d+:)\s?")  # torchrun --tee, srun -l
ARG = re.compile(r"^\s*([A-Za-z_]\w*) \.* ?(.*)$")
LOOSE_ARG = re.compile(r"^\s+([A-Za-z_]\w*) \.{3,} (.*)$")  # outside a header: 3+ dots
ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)$")
MEMORY = re.compile(
    rf"\[Rank (\d+)\] \(after (\d+) iterations\) memory \(MB\) \| allocated: ({NUMBER}) \| "
    rf"max allocated: ({NUMBER}) \| reserved: ({NUMBER}) \| max reserved: ({NUMBER})")
THEORY = re.compile(rf"Theoretical memory footprints: weight and optimizer=({NUMBER}) MB"
                    rf"(?:, activation=({NUMBER}) MB, total=({NUMBER}) MB)?")
PADDED = re.compile(r"padded vocab \(size: (\d+)\) with (\d+) dummy tokens \(new size: (\d+)\)")
LOOKED_FOR = ("Megatron-LM's arguments block ('------ arguments ------' and '  name ..... "
              "value' lines), its iteration lines (' iteration N/ M | ... | elapsed time per "
              "iteration (ms): X |'), memory lines ('[Rank r] (after N iterations) memory "
              "(MB) | ...') or 'Theoretical memory footprints: ...'")


def looks_like(text: str) -> bool:
    return bool(HEADER.search(text) or ITERATION.search(text) or MEMORY.search(text))


def _fields(rest: str) -> dict[str, float]:
    found = {}
    for part in rest.split("|"):
        key, sep, number = part.partition(":")
        if sep and re.fullmatch(rf"\s*{NUMBER}\s*", number) and (got := finite(number)) \
                is not None:
            found[key.strip()] = got
    return found


def read_lines(text: str) -> tuple[dict[str, object], list[tuple[int, dict]], list, list, int]:
    """(arguments, iteration fields, memory reports, theoretical, padded vocab or 0)."""
    args: dict[str, object] = {}
    iterations, memory, theory = [], [], []
    padded, inside = 0, False
    for raw in text.split("\n"):
        line = PREFIX.sub("", raw.rstrip())
        if HEADER.search(line) and not FOOTER.search(line):
            inside = True
            continue
        if FOOTER.search(line):
            inside = False
            continue
        match = (ARG if inside else LOOSE_ARG).match(line)
        if match and not ITERATION.search(line):
            args.setdefault(match.group(1), value(match.group(2)))
            continue
        if found := ITERATION.search(line):
            iterations.append((int(found.group(1)), _fields(found.group(3))))
        elif found := MEMORY.search(line):
            numbers = tuple(finite(g) for g in found.groups()[2:])
            if None not in numbers:
                memory.append(numbers)
        elif found := THEORY.search(line):
            numbers = tuple(finite(g) if g else None for g in found.groups())
            if numbers[0] is not None:
                theory.append(numbers)
        elif found := PADDED.search(line):
            padded = int(found.group(3))
    return args, iterations, memory, theory, padded


def _flag(args: dict, name: str, default: bool = False) -> bool:
    found = args.get(name, default)
    return found if isinstance(found, bool) else default


def _int(args: dict, name: str, default: int | None = None) -> int | None:
    found = args.get(name, default)
    return default if found is None else whole(name, found, 0)


def model_of(args: dict, padded: int) -> ModelSpec:
    """The model the arguments describe (GPT's layer unless swiglu / RMSNorm say otherwise)."""
    need = ("num_layers", "hidden_size", "num_attention_heads")
    missing = [n for n in need if args.get(n) is None]
    if missing:
        raise LabInputError(FIELD, f"the arguments block has no {', '.join(missing)}: the "
                                   "model's shape cannot be read")
    layers = shape("layers", args["num_layers"])
    hidden = shape("hidden", args["hidden_size"])
    heads = shape("heads", args["num_attention_heads"])
    kv = args.get("num_query_groups") if _flag(args, "group_query_attention") else heads
    head_dim = args.get("kv_channels") or (hidden // heads)
    vocab = padded or args.get("padded_vocab_size") or args.get("pad_vocab_size_to") \
        or args.get("vocab_size")
    if vocab is None:
        raise LabInputError(FIELD, "the vocabulary size is not in the log: looked for "
                                   "padded_vocab_size, vocab_size or pad_vocab_size_to in the "
                                   "arguments and ' > padded vocab (size: ...)'")
    swiglu = _flag(args, "swiglu")
    ffn = args.get("ffn_hidden_size") or (4 * hidden)
    experts = _int(args, "num_experts", 0) or 0
    expert_ffn = (args.get("moe_ffn_hidden_size") or ffn) if experts else 0
    shared = args.get("moe_shared_expert_intermediate_size") or 0
    linear_bias = _flag(args, "add_bias_linear", True)
    learned = args.get("position_embedding_type", "learned_absolute") == "learned_absolute"
    spec = ModelSpec(
        id="megatron-log", name="The run's model", source="Megatron-LM arguments",
        layers=layers, hidden=hidden, heads=heads, kv_heads=shape("kv_heads", kv),
        head_dim=shape("head_dim", head_dim), ffn=shape("ffn", ffn),
        vocab=shape("vocab", vocab), gated_mlp=swiglu, linear_bias=linear_bias,
        qkv_bias=_flag(args, "add_qkv_bias") and not linear_bias,
        norm="rmsnorm" if args.get("normalization") == "RMSNorm" else "layernorm",
        tied_embeddings=not _flag(args, "untie_embeddings_and_output_weights"),
        max_positions=shape("max_positions", args.get("max_position_embeddings") or 0)
        if learned else 0,
        experts=shape("experts", experts), top_k=(_int(args, "moe_router_topk", 2) or 0)
        if experts else 0, expert_ffn=shape("expert_ffn", expert_ffn) if experts else 0,
        shared_experts=(shared // expert_ffn) if experts and expert_ffn else 0,
        # Unfused attention keeps its dropout mask and output only when attention dropout is
        # on (labs.model.activations); read as the run's software "dropout" is (below).
        dropout=isinstance(args.get("attention_dropout"), float) and args["attention_dropout"] > 0)
    return spec


def attention_fused(args: dict, notes: list[str]) -> bool:
    """Whether attention runs a fused (FlashAttention-style) kernel: Megatron Core's
    --attention-backend (auto picks a fused one), else --transformer-impl (Transformer Engine's
    is fused; 'local' only with --use-flash-attn), else --use-flash-attn. A log with none of
    the three is from a Megatron (or Megatron-DeepSpeed) before FlashAttention: unfused."""
    if "attention_backend" in args:
        return "unfused" not in str(args["attention_backend"]).lower()
    if "transformer_impl" in args:
        return args["transformer_impl"] != "local" or _flag(args, "use_flash_attn")
    if "use_flash_attn" in args:
        return _flag(args, "use_flash_attn")
    notes.append("no attention_backend, transformer_impl or use_flash_attn argument: a "
                 "Megatron from before FlashAttention, so attention is unfused")
    return False


def _block(count: object, layers: object, chunks: int, notes: list[str]) -> str:
    """--recompute-method block: the first ``count`` layers of each model chunk recompute
    in full (megatron/core/transformer/transformer_block.py, ``_checkpointed_forward``), the
    rest keep everything. Half of a chunk is the layer-granular mode that recomputes every
    2nd layer (labs.core.catalogue: the same count of a chunk's layers, taken from its start,
    not every other one); at least a chunk, full; any other share, the mode of the nearest
    share, said."""
    n = whole("recompute_num_layers", count)
    per_chunk = layers // chunks if isinstance(layers, int) and layers >= chunks else 0
    if n >= per_chunk:
        if not per_chunk:
            notes.append(f"recompute_method block, recompute_num_layers {n}: the layers per "
                         "model chunk cannot be read, so every layer is recomputed (full)")
        return "full"
    shares = {r.id: 1 / r.every for r in RECOMPUTATION.values() if r.every > 1}
    shares["full"] = 1.0
    near = min(shares, key=lambda k: (abs(shares[k] - n / per_chunk), -shares[k]))
    if n != per_chunk // RECOMPUTATION[near].every:
        notes.append(f"recompute_method block, recompute_num_layers {n}: {n} of each chunk's "
                     f"{per_chunk} layers recompute; the lab's nearest mode is "
                     f"{RECOMPUTATION[near].label}")
    return near


def recipe_of(grad_bytes: int) -> str:
    """The mixed-precision Adam recipe (bf16 weights, fp32 master and moments) whose gradients
    take ``grad_bytes`` a parameter (labs.core.catalogue RECIPES: adam16's 2, adam18's 4)."""
    return next(r.id for r in RECIPES.values() if r.mode == "train" and r.family == "bf16"
                and r.weights == 2 and r.master_weights == 4
                and r.optimizer_moments == 8 and r.gradients == grad_bytes)


def _gradients(args: dict, notes: list[str],
               defaulted: list[tuple[str, str, str]]) -> str:
    """The recipe the gradients' precision gives. Megatron-LM's validate_args
    (megatron/training/arguments.py), under --bf16: --grad-reduce-in-bf16 sets
    accumulate_allreduce_grads_in_fp32 False; without it (and main_grads_dtype fp32, the
    default) accumulate_allreduce_grads_in_fp32 is set True, so the main gradients are kept and
    reduced in fp32 (4 B a parameter); under --fp16 it stays as given (default False: 2 B).
    _print_args prints both after validation, so the block says which; when it prints
    neither, the bf16 default (fp32) is assumed and named."""
    accumulate = args.get("accumulate_allreduce_grads_in_fp32")
    in_bf16 = args.get("grad_reduce_in_bf16")
    if _flag(args, "deepspeed"):
        if _flag(args, "bf16"):
            notes.append("DeepSpeed keeps the gradients (its BF16_Optimizer holds fp32 "
                         "gradient buffers); the lab bills its 16 B recipe's bf16 gradients, "
                         "the arguments do not say DeepSpeed's")
        return recipe_of(2)
    if isinstance(accumulate, bool):
        fp32 = accumulate
    elif isinstance(in_bf16, bool) and _flag(args, "bf16"):
        fp32 = not in_bf16
    else:
        fp32 = not _flag(args, "fp16")
    record = RECIPES[recipe_of(4 if fp32 else 2)]
    if isinstance(accumulate, bool) or isinstance(in_bf16, bool):
        said = ", ".join(f"{n} {args[n]}" for n in ("accumulate_allreduce_grads_in_fp32",
                                                   "grad_reduce_in_bf16") if n in args)
        notes.append(f"gradients in {'fp32' if fp32 else '16 bits'} ({said}): "
                     f"{record.label}")
    else:
        why = ("fp16 training's default, 16-bit gradients" if not fp32 else
               "Megatron-LM's default, fp32 main gradients reduced in fp32 (no "
               "--grad-reduce-in-bf16)")
        defaulted.append(("recipe", record.id, "the arguments print neither "
                          "accumulate_allreduce_grads_in_fp32 nor grad_reduce_in_bf16: "
                          f"{why}, {record.label}"))
    return record.id


def plan_of(args: dict, layers: object) -> tuple[dict[str, object], int, list[str],
                                                  list[tuple[str, str, str]]]:
    """EP08's plan controls from the arguments, the world size, what was noted and what was
    assumed (control, value, why)."""
    notes: list[str] = []
    defaulted: list[tuple[str, str, str]] = []
    tp = whole("tensor_model_parallel_size", args.get("tensor_model_parallel_size", 1))
    pp = whole("pipeline_model_parallel_size", args.get("pipeline_model_parallel_size", 1))
    cp = whole("context_parallel_size", args.get("context_parallel_size") or 1)
    ep = whole("expert_model_parallel_size", args.get("expert_model_parallel_size") or 1)
    world = args.get("world_size")
    world = whole("world_size", world) if world is not None else None
    dp = args.get("data_parallel_size")
    if dp is None:
        if world is None:
            raise LabInputError(FIELD, "the arguments give neither world_size nor "
                                       "data_parallel_size: the GPU count cannot be read")
        if world % (tp * pp * cp):
            raise LabInputError(FIELD, f"contradictory arguments in the arguments block: "
                                       f"world size {world:,} is not a multiple of TP {tp} × "
                                       f"PP {pp} × CP {cp}")
        dp = world // (tp * pp * cp)
    dp = whole("data_parallel_size", dp)
    world = check_world(tp, pp, cp, dp, world, "arguments block")
    micro = whole("micro_batch_size", args.get("micro_batch_size", 1))
    gbs = args.get("global_batch_size")
    gbs = whole("global_batch_size", gbs) if gbs is not None else micro * dp
    m = microbatches(gbs, micro, dp, "arguments block")
    vpp = args.get("virtual_pipeline_model_parallel_size")
    per_virtual = args.get("num_layers_per_virtual_pipeline_stage")
    if vpp is None and per_virtual:
        vpp = whole("num_layers", layers) // (
            pp * whole("num_layers_per_virtual_pipeline_stage", per_virtual))
    virtual = whole("virtual_pipeline_model_parallel_size", vpp) if vpp else 1
    granularity = args.get("recompute_granularity")
    if granularity is None and _flag(args, "checkpoint_activations"):
        granularity = "full"  # Megatron-DeepSpeed / pre-2022 Megatron's flag
    fused = attention_fused(args, notes)
    if granularity in ("full", "selective"):
        recompute = granularity
        if granularity == "full" and args.get("recompute_num_layers") not in (None, 0) \
                and args.get("recompute_method") == "block":
            recompute = _block(args["recompute_num_layers"], layers, pp * virtual, notes)
    else:
        recompute = "flash" if fused else "none"
    zero = 1 if _flag(args, "use_distributed_optimizer") else 0
    if _flag(args, "deepspeed"):
        stage = _int(args, "zero_stage", 0) or 0
        zero = stage
        if stage == 0 and _flag(args, "bf16"):
            zero = 1
            notes.append("DeepSpeed ZeRO stage 0 with bf16: its BF16_Optimizer shards the "
                         "optimizer state over data parallelism, ZeRO-1 (zero=1)")
    fp8 = args.get("fp8") not in (None, False)
    dropout = any(isinstance(args.get(n), float) and args[n] > 0
                  for n in ("hidden_dropout", "attention_dropout"))
    first = _int(args, "decoder_first_pipeline_num_layers", 0) or 0
    last = _int(args, "decoder_last_pipeline_num_layers", 0) or 0
    method = str(args.get("pp_partition_method") or "")
    if "embedding" in method and isinstance(layers, int) and pp > 2 and not (first or last) \
            and (layers + 2) % pp == 0 and layers % pp:
        # Megatron-DeepSpeed's 'type:transformer|embedding' balances the embedding and the
        # output layer as one layer each: the first and last stages hold one layer fewer.
        first = last = (layers + 2) // pp - 1
        notes.append(f"pp_partition_method {method}: the embedding and the head count as a "
                     f"layer each, so the first and last stages hold {first} layers")
    plan = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "zero": zero,
            "recompute": recompute,
            "schedule": "interleaved-1f1b" if virtual > 1 else "1f1b", "virtual": virtual,
            "micro_batch": micro, "microbatches": m,
            "seq_len": whole("seq_length", args.get("seq_length"), 1),
            "first_stage_layers": first, "last_stage_layers": last,
            "attention": "auto" if fused else "unfused", "dropout": dropout, "fp8": fp8,
            "sequence_parallel": _flag(args, "sequence_parallel"),
            "tp_overlap": "all" if _flag(args, "tp_comm_overlap") else "backward",
            "dp_overlap": _flag(args, "overlap_grad_reduce"),
            "grad_accum_fusion": _flag(args, "gradient_accumulation_fusion", True),
            "recipe": _gradients(args, notes, defaulted)}
    return plan, world, notes, defaulted


def measured_of(iterations: list, memory: list, theory: list, gbs: int | None,
                seq_len: int | None, world: int | None) -> tuple[Measured, list[str]]:
    notes: list[str] = []
    rows = [f for _, f in iterations]
    if gbs is not None:
        same = [f for f in rows if f.get("global batch size", gbs) == gbs]
        if len(same) < len(rows):
            notes.append(f"{len(rows) - len(same)} iteration lines ran another global batch "
                         "(batch ramp-up) and are left out")
        rows = same
    if len(rows) > 1:
        rows = rows[1:]
        notes.append("the first iteration line is left out (it includes warm-up)")
    steps = [f["elapsed time per iteration (ms)"] / 1000 for f in rows
             if "elapsed time per iteration (ms)" in f]
    steps += [f["elapsed time per iteration (s)"] for f in rows
              if "elapsed time per iteration (s)" in f]
    tflops = [f.get("throughput per GPU (TFLOP/s/GPU)", f.get("TFLOPs")) for f in rows]
    # Megatron-DeepSpeed's TFLOPs count full recomputation's extra forward (its
    # throughput_calculator: checkpoint_activations_factor 4, Narayanan et al. 2021 eq. 3);
    # Megatron-LM's throughput per GPU counts model FLOPs (num_floating_point_operations: 3
    # passes, no recomputation).
    counts = ("hardware" if any("TFLOPs" in f and "throughput per GPU (TFLOP/s/GPU)" not in f
                                for f in rows) else "model")
    step = median(steps)
    tokens = (gbs * seq_len / (step * world) if step and gbs and seq_len and world else None)
    peak_alloc = max((m[1] for m in memory), default=None)
    peak_res = max((m[3] for m in memory), default=None)
    state, act = (theory[-1][0], theory[-1][1]) if theory else (None, None)
    return Measured(
        step_s=step, steps=len(steps), tflops_per_gpu=median([t for t in tflops if t]),
        tflops_counts=counts,
        tokens_per_s_per_gpu=tokens,
        peak_allocated_bytes=peak_alloc * MIB if peak_alloc is not None else None,
        peak_reserved_bytes=peak_res * MIB if peak_res is not None else None,
        theory_state_bytes=state * MIB if state is not None else None,
        theory_activation_bytes=act * MIB if act is not None else None,
        global_batch=gbs), notes


def read(text: str) -> ParsedRun:
    args, iterations, memory, theory, padded = read_lines(text)
    if not (args or iterations or memory or theory):
        raise no_lines(LOOKED_FOR)
    if not args:
        raise LabInputError(FIELD, "no arguments block: the plan cannot be read. Paste the "
                                   "lines between '------ arguments ------' and '-- end of "
                                   "arguments --' that Megatron-LM prints at start")
    plan, world, notes, defaulted = plan_of(args, args.get("num_layers"))
    spec = model_of(args, padded)
    gbs = plan["micro_batch"] * plan["microbatches"] * plan["dp"]
    measured, more = measured_of(iterations, memory, theory, gbs, plan["seq_len"], world)
    model, matched, preset = model_value(spec)
    if preset:
        notes.append(f"the model's shape is the preset {matched.name}")
    if spec.experts:
        notes.append("MoE read from num_experts, moe_router_topk and moe_ffn_hidden_size; "
                     "moe_layer_freq (dense layers) is not read")
    found = [kind for kind, got in (("arguments", args), ("iterations", iterations),
                                    ("memory", memory), ("theoretical memory", theory)) if got]
    return ParsedRun("megatron", matched, params_of({"model": model, **plan}), world,
                     measured, defaulted=tuple(defaulted), notes=tuple(notes + more),
                     found=tuple(found))
