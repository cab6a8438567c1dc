"""GPU placement for RL training (EP09): training ranks and rollout engines on one cluster.

Composes the memory ledger (``labs.memory.lab``) for the training pool, ``labs.rl.serving`` for
the rollout engines and ``labs.parallel`` for the divisibility rules, then lays every GPU out by
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

from labs.core.errors import LabInputError
from labs.core.limits import (
    KV_DTYPES,
    MAX_DEGREE,
    MAX_ENGINES,
    MAX_POOL_GPUS,
    MAX_PROMPT_LEN,
    MAX_PROMPTS,
    MAX_RESPONSE_LEN,
    MAX_RESPONSES,
    MAX_TRAIN_GPUS,
    PLACEMENTS,
    RECOMPUTE,
)
from labs.core.validate import whole
from labs.hardware.gpus import GPUSpec
from labs.memory.inputs import MemoryInput
from labs.memory.lab import compute_memory
from labs.model.spec import ModelSpec
from labs.parallel.layout import ParallelLayout, problems
from labs.rl.cluster import Check, engine_checks, gpu_roles, layout_checks
from labs.rl.serving import EngineMemory, engine_memory, per_engine
from labs.rl.timeline import phases, step_times

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
                  # 1F1B holds at most PP micro-batches in flight (Narayanan et al. 2021), so
                  # more than PP of them change no byte of the bill, only the simulation's cost.
                  microbatches=max(1, min(math.ceil(inp.samples / dp), inp.pp)))
    if problems(inp.model, ParallelLayout(tp=inp.tp, pp=inp.pp, cp=inp.cp, dp=dp, ep=inp.ep),
                seq_len=inp.seq_len, uneven_pp=True):
        return None
    return compute_memory(MemoryInput(**mem_in))


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
    checks = layout_checks(inp, bill) + engine_checks(inp)
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
    gpus = gpu_roles(inp, dp if inp.train_gpus % (inp.tp * inp.pp * inp.cp) == 0 else 0,
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
