"""GPU placement for RL training (EP09): training ranks and rollout engines on one cluster.

Composes the memory ledger (``labs.memory``) for the training pool, ``labs.rl_serving`` for
the rollout engines and ``labs.layout`` for the divisibility rules, then lays every GPU out by
role and times one step. Sources:
- placements as slime runs them (THUDM/slime docs, "Usage": --colocate puts training and
  rollout on the same GPUs and switches between them; without it --actor-num-gpus-per-node and
  --rollout-num-gpus reserve two pools; train_async.py overlaps them, one step off-policy);
- colocation: each phase offloads the other's state (torch_memory_saver frees SGLang's weights
  and KV; Megatron's weights, gradients and optimizer go to host memory), so a GPU needs
  about max(training, rollout) plus what survives the switch: TRANSITION_OVERHEAD;
- training: Megatron's distributed optimizer (slime sets use_distributed_optimizer, i.e.
  ZeRO-1 over DP x CP) with fp32 gradient accumulation (--accumulate-allreduce-grads-in-fp32,
  the ledger's 18-byte recipe); CPU Adam (--optimizer-cpu-offload) moves master weights and
  moments to host RAM; uneven stages when the layers do not divide by PP;
- prefill/decode disaggregation (Zhong et al. 2024, "DistServe", arXiv:2401.09670): the rollout
  pool splits into whole prefill engines and whole decode engines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from labs.errors import LabInputError
from labs.layout import ParallelLayout, problems, whole
from labs.limits import MAX_DEGREE, RECOMPUTE
from labs.memory import MemoryInput, compute_memory
from labs.presets import GPUSpec, ModelSpec
from labs.rl_serving import KV_DTYPE_BYTES, EngineMemory, engine_memory, per_engine
from labs.rl_timeline import phases, step_times

PLACEMENTS = ("colocated", "separate", "separate-pd")
KV_DTYPES = tuple(KV_DTYPE_BYTES)
GPUS_PER_NODE = 8  # the curriculum's recipes: 8 GPUs per node (HGX boards)
MAX_TRAIN_GPUS = 2048
MAX_POOL_GPUS = 4096  # whole cluster drawn GPU by GPU
MAX_ENGINES = 1024
MAX_RESPONSE_LEN = 131_072
MAX_PROMPT_LEN = 131_072
MAX_PROMPTS = 4096
MAX_RESPONSES = 64
# What stays on a colocated GPU across the switch (our estimate): the sleeping process's CUDA
# context and NCCL communicators (~0.5 GB) and one weight-update bucket (slime's
# --update-weight-buffer-size default, 512 MB).
CONTEXT_BYTES = 0.5e9
UPDATE_BUCKET_BYTES = 0.5e9
TRANSITION_OVERHEAD = CONTEXT_BYTES + UPDATE_BUCKET_BYTES


@dataclass(frozen=True)
class RLPlacementInput:
    model: ModelSpec
    gpu: GPUSpec
    train_gpus: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    placement: str = "colocated"
    engine_gpus: int = 1
    engines: int | None = None  # separate pools: rollout engines (None: as many GPUs as training)
    prefill_engines: int | None = None  # separate-pd: how many engines prefill (None: 1/4)
    response_len: int = 4096
    prompt_len: int = 1024
    prompts: int = 8
    responses_per_prompt: int = 8
    cpu_adam: bool = False
    recompute: str = "full"
    kv_dtype: str = "bf16"
    external_engines: int = 0  # engines served outside the cluster (more rollout capacity)

    def __post_init__(self) -> None:
        if not isinstance(self.model, ModelSpec):
            raise LabInputError("model", "choose a model preset")
        if not isinstance(self.gpu, GPUSpec):
            raise LabInputError("gpu", "choose a GPU preset")
        whole("train_gpus", self.train_gpus, 1, MAX_TRAIN_GPUS, "training GPUs")
        ParallelLayout(tp=self.tp, pp=self.pp, cp=self.cp, ep=self.ep)  # each degree in range
        if self.placement not in PLACEMENTS:
            raise LabInputError("placement", f"placement must be one of {', '.join(PLACEMENTS)}"
                                             f" (got {self.placement!r})")
        whole("engine_gpus", self.engine_gpus, 1, MAX_DEGREE, "GPUs per serving engine")
        if self.engines is not None:
            whole("engines", self.engines, 1, MAX_ENGINES, "rollout engines")
        if self.prefill_engines is not None:
            whole("prefill_engines", self.prefill_engines, 1, MAX_ENGINES, "prefill engines")
        whole("response_len", self.response_len, 1, MAX_RESPONSE_LEN, "response length")
        whole("prompt_len", self.prompt_len, 1, MAX_PROMPT_LEN, "prompt length")
        whole("prompts", self.prompts, 1, MAX_PROMPTS, "prompts per step")
        whole("responses_per_prompt", self.responses_per_prompt, 1, MAX_RESPONSES,
              "responses per prompt")
        whole("external_engines", self.external_engines, 0, MAX_ENGINES, "external engines")
        if not isinstance(self.cpu_adam, bool):
            raise LabInputError("cpu_adam", "CPU Adam must be true or false")
        if self.recompute not in RECOMPUTE:
            raise LabInputError("recompute", f"recomputation must be one of "
                                             f"{', '.join(RECOMPUTE)}")
        if self.kv_dtype not in KV_DTYPES:
            raise LabInputError("kv_dtype", f"KV dtype must be one of {', '.join(KV_DTYPES)}")
        if self.rollout_gpus + self.train_gpus > MAX_POOL_GPUS:
            raise LabInputError("engines", f"{self.train_gpus:,} training + "
                                           f"{self.rollout_gpus:,} rollout GPUs exceed the "
                                           f"{MAX_POOL_GPUS:,} the lab draws")

    @property
    def samples(self) -> int:
        return self.prompts * self.responses_per_prompt

    @property
    def colocated(self) -> bool:
        return self.placement == "colocated"

    @property
    def engine_count(self) -> int:
        """In-cluster rollout engines: colocated, as many as tile the training GPUs."""
        if self.colocated:
            return max(1, self.train_gpus // self.engine_gpus)
        if self.engines is not None:
            return self.engines
        # As many rollout GPUs as training ones; a prefill/decode split needs two engines.
        least = 2 if self.placement == "separate-pd" else 1
        return max(least, self.train_gpus // self.engine_gpus)

    @property
    def prefill_count(self) -> int:
        if self.placement != "separate-pd":
            return 0
        if self.prefill_engines is not None:
            return self.prefill_engines
        return max(1, self.engine_count // 4)

    @property
    def rollout_gpus(self) -> int:
        """GPUs reserved for rollout beyond the training pool (0 when colocated)."""
        return 0 if self.colocated else self.engine_count * self.engine_gpus

    @property
    def seq_len(self) -> int:
        """Prompt + response, padded to whole 2·CP chunks (zigzag context parallelism)."""
        step = 2 * self.cp if self.cp > 1 else 1
        return math.ceil((self.prompt_len + self.response_len) / step) * step


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Pool:
    role: str  # "training", "rollout", "prefill", "decode" or "colocated"
    gpus: int
    memory_per_gpu_bytes: float
    gpu_memory_bytes: float
    breakdown: dict[str, float]
    host_bytes_per_gpu: float = 0.0
    engines: int = 0
    detail: str = ""

    @property
    def fits(self) -> bool:
        return self.memory_per_gpu_bytes <= self.gpu_memory_bytes


@dataclass(frozen=True)
class Phase:
    lane: str  # "colocated", "training" or "rollout"
    phase: str  # "rollout", "train" or "weight_sync"
    step: int
    start: float
    end: float


@dataclass(frozen=True)
class RLPlacementResult:
    input: RLPlacementInput
    checks: tuple[Check, ...]
    pools: tuple[Pool, ...]
    gpus: tuple[dict, ...]  # one entry per cluster GPU: role, node, training coordinates...
    timeline: tuple[Phase, ...]
    rollout_seconds: float
    train_seconds: float
    sync_seconds: float
    sync_bytes_per_gpu: float
    sync_link: str
    step_seconds: float
    samples_per_second: float
    dp: int
    stage_layers: tuple[int, ...]
    train_memory_bytes: float | None  # per GPU, None when the layout is broken
    rollout_memory_bytes: float
    colocated_bytes: float | None
    transition_overhead_bytes: float
    replicas: dict = field(default_factory=dict)
    train_breakdown: dict = field(default_factory=dict)  # the ledger's, per training GPU
    rollout_breakdown: dict = field(default_factory=dict)  # the heaviest engine GPU's
    notes: tuple[str, ...] = ()

    @property
    def all_ok(self) -> bool:
        return all(c.ok for c in self.checks)


def _training_bill(inp: RLPlacementInput, gpus: int):
    """The ledger for ``gpus`` training GPUs at the recipe's degrees (None if broken)."""
    mp = inp.tp * inp.pp * inp.cp
    if gpus % mp or gpus % (inp.ep * inp.pp):
        return None
    dp = gpus // mp
    mem_in = dict(model=inp.model, gpu=inp.gpu, mode="train", recipe="adam18",
                  seq_len=inp.seq_len, micro_batch=1, recompute=inp.recompute, tp=inp.tp,
                  pp=inp.pp, cp=inp.cp, dp=dp, ep=inp.ep, zero=1, offload=inp.cpu_adam,
                  uneven_pp=inp.model.layers % inp.pp != 0, schedule="1f1b",
                  microbatches=max(1, min(math.ceil(inp.samples / dp), 4096)))
    if problems(inp.model, ParallelLayout(tp=inp.tp, pp=inp.pp, cp=inp.cp, dp=dp, ep=inp.ep),
                seq_len=inp.seq_len, uneven_pp=True):
        return None
    return compute_memory(MemoryInput(**mem_in))


def _layout_checks(inp: RLPlacementInput, bill) -> list[Check]:
    m, n = inp.model, inp.train_gpus
    mp, emp = inp.tp * inp.pp * inp.cp, inp.ep * inp.pp
    dp = n // mp if n % mp == 0 else 0
    checks = [
        Check("world size", n % mp == 0,
              f"{n} GPUs / (TP {inp.tp} x PP {inp.pp} x CP {inp.cp} = {mp}) = "
              + (f"DP {dp}" if dp else f"{n / mp:.2f}: not a whole number of replicas")),
        Check("expert grouping", n % emp == 0,
              f"{n} GPUs / (EP {inp.ep} x PP {inp.pp} = {emp}) = "
              + (f"{n // emp} expert groups per stage x stage" if n % emp == 0
                 else f"{n / emp:.2f}: experts cannot regroup the ranks")),
    ]
    layout = ParallelLayout(tp=inp.tp, pp=inp.pp, cp=inp.cp, dp=max(dp, 1), ep=inp.ep)
    found = problems(m, layout, seq_len=inp.seq_len, uneven_pp=True)
    by_field = {e.field: e.message for e in found}
    checks.append(Check("heads by TP", "tp" not in by_field,
                        by_field.get("tp", f"{m.heads} heads / TP {inp.tp} = "
                                           f"{m.heads // inp.tp} per rank")))
    layers = bill.stage_layers if bill else ()
    even = m.layers % inp.pp == 0
    checks.append(Check("layers by PP", "pp" not in by_field, by_field.get(
        "pp", f"{m.layers} layers over {inp.pp} stages: "
              + ("even" if even else "uneven") + f" ({' + '.join(map(str, layers))})")))
    checks.append(Check("experts by EP", "ep" not in by_field, by_field.get(
        "ep", f"{m.experts} experts / EP {inp.ep} = {m.experts // inp.ep} per rank"
              if m.is_moe else "dense model: EP 1")))
    return checks


def _engine_checks(inp: RLPlacementInput) -> list[Check]:
    m, e = inp.model, inp.engine_gpus
    checks = []
    if inp.colocated:
        checks.append(Check("engines tile the pool", inp.train_gpus % e == 0,
                            f"{inp.train_gpus} GPUs / {e} per engine = "
                            f"{inp.train_gpus / e:g} engines"))
    split_ok = (m.experts % e == 0) if m.is_moe else (m.heads % e == 0)
    what = f"{m.experts} experts" if m.is_moe else f"{m.heads} attention heads"
    checks.append(Check("engine split", split_ok, f"{what} over {e} GPUs per engine"
                        + ("" if split_ok else ": does not divide")))
    nodes_ok = (e <= GPUS_PER_NODE and GPUS_PER_NODE % e == 0) or e % GPUS_PER_NODE == 0
    checks.append(Check("engine in whole nodes", nodes_ok,
                        f"an engine of {e} GPUs " + ("packs" if nodes_ok else "straddles")
                        + f" {GPUS_PER_NODE}-GPU nodes"))
    if inp.placement == "separate-pd":
        p = inp.prefill_count
        ok = 1 <= p < inp.engine_count
        checks.append(Check("prefill/decode split", ok,
                            f"{p} prefill + {inp.engine_count - p} decode engines"
                            + ("" if ok else ": need at least one of each")))
    return checks


def _gpu_roles(inp: RLPlacementInput, dp: int, fits: dict[str, bool]) -> tuple[dict, ...]:
    """Every cluster GPU with its role, node and (training) Megatron coordinates."""
    tp, cp, pp, e = inp.tp, inp.cp, inp.pp, inp.engine_gpus
    mp = tp * pp * cp
    placed = (inp.train_gpus // mp) * mp  # GPUs that make whole model-parallel replicas
    train_nodes = math.ceil(inp.train_gpus / GPUS_PER_NODE)
    total = (train_nodes * GPUS_PER_NODE
             + math.ceil(inp.rollout_gpus / GPUS_PER_NODE) * GPUS_PER_NODE)
    stage_ranks = tp * cp * max(dp, 1)
    out = []
    for g in range(total):
        row = {"gpu": g, "node": g // GPUS_PER_NODE, "role": "idle", "fits": True}
        if g < inp.train_gpus:
            if g < placed:
                # Megatron's order tp-cp-dp-pp: TP fastest, PP slowest (labs.layout).
                row.update(tp=g % tp, cp=(g // tp) % cp, dp=(g // (tp * cp)) % max(dp, 1),
                           pp=g // stage_ranks if dp else (g // (tp * cp)) % pp)
                row["role"] = "colocated" if inp.colocated else "training"
            else:
                row["role"] = "unplaced"  # no whole TP x PP x CP replica: the recipe fails here
            if inp.colocated and g < inp.engine_count * e:
                row["engine"] = g // e
            row["fits"] = fits["colocated" if inp.colocated else "training"]
        elif g >= train_nodes * GPUS_PER_NODE:
            r = g - train_nodes * GPUS_PER_NODE
            if r < inp.rollout_gpus:
                engine = r // e
                role = "rollout"
                if inp.placement == "separate-pd":
                    role = "prefill" if engine < inp.prefill_count else "decode"
                row.update(role=role, engine=engine, fits=fits[role])
        out.append(row)
    return tuple(out)


def _rollout_pools(inp: RLPlacementInput) -> dict[str, tuple[int, EngineMemory]]:
    """Engines and per-GPU bill of each serving role."""
    ctx = inp.prompt_len + inp.response_len
    ext = inp.external_engines
    if inp.placement == "separate-pd":
        p = inp.prefill_count
        d = max(inp.engine_count - p, 0)
        return {"prefill": (p, engine_memory(inp.model, inp.engine_gpus,
                                             per_engine(inp.samples, p), inp.prompt_len,
                                             inp.kv_dtype)),
                "decode": (d, engine_memory(inp.model, inp.engine_gpus,
                                            per_engine(inp.samples, d + ext), ctx,
                                            inp.kv_dtype))}
    n = inp.engine_count
    return {"rollout": (n, engine_memory(inp.model, inp.engine_gpus,
                                         per_engine(inp.samples, n + ext), ctx, inp.kv_dtype))}


def _replicas(inp: RLPlacementInput, bill) -> dict:
    """The same degrees on twice the GPUs: DP doubles; what each GPU holds barely moves."""
    if bill is None:
        return {}
    double = _training_bill(inp, 2 * inp.train_gpus) if 2 * inp.train_gpus <= MAX_TRAIN_GPUS \
        else None
    if double is None:
        return {}
    same = ("weights", "gradients", "activations", "embedding_and_logits")
    unchanged = all(abs(bill.breakdown[k] - double.breakdown[k]) < 1 for k in same)
    return {"gpus": 2 * inp.train_gpus, "dp": double.world_size // (inp.tp * inp.pp * inp.cp),
            "memory_per_gpu_bytes": double.total_bytes, "before_bytes": bill.total_bytes,
            "model_state_unchanged": unchanged,
            "freed_bytes": bill.total_bytes - double.total_bytes}


def compute_rl_placement(inp: RLPlacementInput) -> RLPlacementResult:
    """Pools, checks, the GPU map and a step's timeline for one RL placement."""
    bill = _training_bill(inp, inp.train_gpus)
    serving = _rollout_pools(inp)
    gpu_mem = inp.gpu.memory_bytes
    pools: list[Pool] = []
    train_bytes = bill.total_bytes if bill else None
    rollout_bytes = max(mem.total for _, mem in serving.values())
    colocated_bytes = None
    if inp.colocated:
        # Ideal phase offload: the larger phase plus what survives the switch.
        engines, mem = serving["rollout"]
        if train_bytes is not None:
            colocated_bytes = max(train_bytes, mem.total) + TRANSITION_OVERHEAD
        pools.append(Pool("colocated", inp.train_gpus,
                          colocated_bytes if colocated_bytes is not None else math.inf, gpu_mem,
                          {"training": train_bytes or 0.0, "rollout": mem.total,
                           "transition": TRANSITION_OVERHEAD},
                          bill.host_bytes if bill else 0.0, engines,
                          "max(training, rollout) + transition"))
    else:
        pools.append(Pool("training", inp.train_gpus,
                          train_bytes if train_bytes is not None else math.inf, gpu_mem,
                          dict(bill.breakdown) if bill else {},
                          bill.host_bytes if bill else 0.0))
        for role, (engines, mem) in serving.items():
            pools.append(Pool(role, engines * inp.engine_gpus, mem.total, gpu_mem,
                              mem.as_dict(), 0.0, engines,
                              f"{mem.concurrency} requests x {mem.context:,} tokens per engine"))
    checks = _layout_checks(inp, bill) + _engine_checks(inp)
    for pool in pools:
        checks.append(Check(f"{pool.role} memory fits", pool.fits,
                            f"{pool.memory_per_gpu_bytes / 1e9:.1f} GB of "
                            f"{gpu_mem / 1e9:.0f} GB per GPU" if bill or pool.role not in
                            ("training", "colocated") else "the layout does not divide"))
    replicas = _replicas(inp, bill)
    if replicas:
        checks.append(Check("more GPUs add replicas", replicas["model_state_unchanged"],
                            f"{replicas['gpus']} GPUs at the same degrees: DP {replicas['dp']}, "
                            f"{replicas['memory_per_gpu_bytes'] / 1e9:.1f} GB per GPU "
                            f"(was {replicas['before_bytes'] / 1e9:.1f} GB)"))
    dp = inp.train_gpus // (inp.tp * inp.pp * inp.cp)
    fits = {p.role: p.fits for p in pools}
    gpus = _gpu_roles(inp, dp if inp.train_gpus % (inp.tp * inp.pp * inp.cp) == 0 else 0,
                      fits)
    weights = bill.breakdown["weights"] if bill else 0.0
    resident = (bill.breakdown["weights"] + bill.breakdown["gradients"]) if bill else 0.0
    times = step_times(inp, weights, resident)
    timeline = tuple(Phase(*row) for row in phases(inp.colocated, times))
    notes = []
    if inp.model.stand_in:
        notes.append(f"stand-in shape: {inp.model.notes}")
    if inp.external_engines:
        notes.append(f"{inp.external_engines} external engines of {inp.engine_gpus} GPUs take "
                     "their share of the requests; they are not drawn in the cluster")
    return RLPlacementResult(
        input=inp, checks=tuple(checks), pools=tuple(pools), gpus=gpus, timeline=timeline,
        rollout_seconds=times.rollout, train_seconds=times.train, sync_seconds=times.sync,
        sync_bytes_per_gpu=times.sync_bytes_per_gpu, sync_link=times.sync_link,
        step_seconds=times.step, samples_per_second=inp.samples / times.step, dp=dp,
        stage_layers=bill.stage_layers if bill else (), train_memory_bytes=train_bytes,
        rollout_memory_bytes=rollout_bytes, colocated_bytes=colocated_bytes,
        transition_overhead_bytes=TRANSITION_OVERHEAD, replicas=replicas,
        train_breakdown=dict(bill.breakdown) if bill else {},
        rollout_breakdown=max((mem for _, mem in serving.values()),
                              key=lambda mem: mem.total).as_dict(),
        notes=tuple(notes),
    )
