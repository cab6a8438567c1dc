"""The published training runs the step model is checked against, and the lab's figure for each.

One data source (``labs/presets/runs.json``, each run with its citation) for the calibration
test (tests/labs/test_step_time.py) and the "Checked against real runs" page
(app/routers/validation.py):

- Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
  Megatron-LM" (arXiv:2104.04473) Table 1: ten GPT runs, 1.7B to 1T, published as TFLOP/s per
  GPU by the paper's eq. 3, 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) FLOPs per iteration (which
  counts the extra forward of full recomputation); configurations from NVIDIA/Megatron-LM
  examples/sc21/run_table_1.sh and CONFIG.sh.
- Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
  (arXiv:2205.05198) Table 5: iteration seconds of four GPT models with full recomputation and
  with sequence parallelism + selective recomputation (Table 3's configurations), and sec 6.3's
  530B at 8-way data parallelism.

Validation runs (runs.json's ``validation_runs``, ``VALIDATION``; never calibrated on): other
software on other clusters, each naming its model (a preset id or a model code), cluster,
sequence, software and published tokens/s per GPU:

- torchtitan docs/performance.md (pytorch/torchtitan): Llama 2 and 3 with FSDP2 on 64 A100s
  and Llama 3.1 8B on 8 and 128 H100s, PyTorch eager or torch.compile'd kernels
  (``labs.model.ops`` kernels="eager" / "compiled"); with Float8, Llama 3.1 8B under context
  parallelism to 256K tokens, 70B with TP 8 (and AsyncTP) and 405B with TP 8 x PP 8.
- MoE with expert parallelism (tests/labs/test_moe_runs.py): DeepSeek-V3 on 2,048 H800
  (arXiv:2412.19437, 180K GPU hours per trillion tokens, PP 16, EP 64, DualPipe, FP8) and
  Qwen3-235B-A22B on 256 H100 under Megatron Core (yanring/Megatron-MoE-ModelZoo
  best_practice/Qwen3/readme.md, step seconds), each run's figure in its ``published``.
- NVIDIA NeMo 24.07's performance summary (NVIDIA/NeMo docs/source/performance/
  performance_summary.md): dense Llama 2, Llama 3 and GPT-3 runs on 8 to 512 DGX-H100 GPUs
  in FP8 (Transformer Engine's delayed scaling), with TP, PP, CP and VP up to 20
  (tests/labs/test_nemo_runs.py).

What the runs are used for, said the same way on every page that shows them (``RUNS_USE``):
each is a check, never a fit.

A run's ``ratio`` is the lab's throughput over the published one (published step time over the
lab's): above 1, the lab is fast.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from labs.core.data import read
from labs.hardware.links import Cluster, get_cluster
from labs.model.flops import hardware_flops_per_token, model_flops_per_token
from labs.model.presets import get_model
from labs.model.spec import ModelSpec
from labs.recipe.inputs import Plan, RecipeResult
from labs.recipe.lab import evaluate

# What every published run is used for, one sentence the home page, the validation page and
# /docs share (cold reading C, issue 36 item 9).
RUNS_USE = ("Each published run is a check, never a fit: no constant of the step model is set "
            "from any of them; every kernel rate, bandwidth and latency comes from a datasheet "
            "or a microbenchmark")

_DATA = read("runs.json")
SEQ_LEN: int = _DATA["seq_len"]
VOCAB: int = _DATA["vocab"]
SOFTWARE: dict[str, dict[str, Any]] = _DATA["software"]
GROUPS = {
    "narayanan-2021-table1": "Narayanan et al. 2021, Table 1",
    "korthikanti-2022-table5": "Korthikanti et al. 2022, Table 5",
    "korthikanti-2022-dp": "Korthikanti et al. 2022, sec 6.3",
}
VALIDATION_GROUPS = {"torchtitan-fsdp2": "torchtitan (FSDP2), docs/performance.md",
                     "deepseek-v3": "DeepSeek-V3 report (MoE)",
                     "megatron-moe": "Megatron MoE zoo (Qwen3)",
                     "nemo-h100-fp8": "NeMo 24.07 (H100, FP8)"}


def gpt(hidden: int, heads: int, layers: int) -> ModelSpec:
    """Narayanan's GPT (sec 5.1): GPT-2's layer (LayerNorm, biases, GeLU MLP of 4h, learned
    positions, tied embeddings), vocabulary 51,200, sequence 2,048, dropout 0.1 (Megatron's
    default, as the runs' software notes say)."""
    return ModelSpec(id=f"gpt-{hidden}-{layers}", name=f"GPT h={hidden} L={layers}",
                     layers=layers, hidden=hidden, heads=heads, kv_heads=heads,
                     head_dim=hidden // heads, ffn=4 * hidden, vocab=VOCAB,
                     source="Narayanan et al. 2021 Table 1", gated_mlp=False,
                     linear_bias=True, norm="layernorm", max_positions=SEQ_LEN,
                     tied_embeddings=True, dropout=True)


@dataclass(frozen=True)
class Run:
    """One published run: its model, layout, GPUs and published figure, with its source."""

    id: str
    name: str
    group: str
    source: str
    params_b: float
    hidden: int
    heads: int
    layers: int
    gpus: int
    software: str  # a key of runs.json's "software" sets
    plan_fields: tuple[tuple[str, Any], ...]
    published_tflops: float | None  # TFLOP/s per GPU (Narayanan eq. 3), or
    published_step_s: float | None  # seconds per iteration, or
    published_tokens_s: float | None = None  # tokens/s per GPU
    model_id: str = ""  # a preset id or model code (empty: Narayanan's GPT of the shape)
    cluster_id: str = ""  # empty: runs.json's cluster
    note: str = ""  # where the lab cannot time the run's exact setting

    @property
    def model(self) -> ModelSpec:
        if self.model_id:
            return get_model(self.model_id)
        return gpt(self.hidden, self.heads, self.layers)

    @property
    def cluster(self) -> Cluster:
        return get_cluster(self.cluster_id or _DATA["cluster"])

    @property
    def seq_len(self) -> int:
        return self.plan.seq_len

    @property
    def nodes(self) -> int:
        return max(1, self.gpus // self.cluster.gpus_per_node)

    @property
    def plan(self) -> Plan:
        fields = {"zero": 0, "seq_len": SEQ_LEN, **SOFTWARE[self.software]["settings"],
                  **dict(self.plan_fields)}
        return Plan(**fields)

    @property
    def global_batch(self) -> int:
        p = self.plan
        return p.dp * p.micro_batch * p.microbatches

    def eq3_flops(self) -> float:
        """Narayanan eq. 3: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) FLOPs per iteration."""
        h, s, n = self.hidden, SEQ_LEN, self.layers
        return 96 * self.global_batch * s * n * h * h * (1 + s / (6 * h) + VOCAB / (16 * n * h))

    def tflops(self, step_s: float) -> float:
        """TFLOP/s per GPU by eq. 3 for a step of ``step_s`` seconds."""
        return self.eq3_flops() / step_s / self.gpus / 1e12

    @property
    def published_step(self) -> float:
        """The published step in seconds (Table 1's TFLOP/s turned back by eq. 3, or the
        published tokens/s per GPU turned back by the step's tokens)."""
        if self.published_step_s is not None:
            return self.published_step_s
        if self.published_tokens_s is not None:
            return self.global_batch * self.seq_len / (self.published_tokens_s * self.gpus)
        return self.eq3_flops() / (self.published_tflops * 1e12 * self.gpus)


@dataclass(frozen=True)
class Utilisation:
    """A step's FLOPs over what the GPUs could do at their dense BF16 peak, two ways.

    MFU (model FLOPs utilisation, Chowdhery et al. 2022, PaLM appendix B) counts only the
    model's own FLOPs, 6·N + attention per token (``labs.model.flops``): a recomputed
    forward does not count, so MFU compares runs whatever they recompute. HFU (hardware FLOPs
    utilisation) counts every FLOP the GPUs execute, the recomputed forward included:
    Narayanan et al. 2021's eq. 3 is such a count (96·B·s·l·h², 4 passes of 24·s·h² per
    layer), so their "52% of peak" for the 1T run is HFU. With full recomputation HFU is
    about 4/3 of MFU; with selective recomputation the two nearly agree."""

    mfu: float
    hfu: float


def utilisation(run: Run, step_s: float) -> Utilisation:
    """MFU and HFU of ``run`` at a step of ``step_s`` seconds (published or the lab's)."""
    tokens = run.global_batch * run.seq_len
    peak = step_s * run.gpus * run.cluster.gpu.bf16_flops
    return Utilisation(model_flops_per_token(run.model, run.seq_len) * tokens / peak,
                       hardware_flops_per_token(run.model, run.seq_len, run.plan.recompute)
                       * tokens / peak)


def _run(entry: dict) -> Run:
    published = entry["published"]
    return Run(id=entry["id"], name=entry["name"], group=entry["group"],
               source=entry["source"], params_b=entry["params_b"],
               hidden=entry.get("hidden", 0), heads=entry.get("heads", 0),
               layers=entry.get("layers", 0), gpus=entry["gpus"],
               software=entry["software"], plan_fields=tuple(entry["plan"].items()),
               published_tflops=published.get("tflops_per_gpu"),
               published_step_s=published.get("step_s"),
               published_tokens_s=published.get("tokens_per_s_per_gpu"),
               model_id=entry.get("model", ""), cluster_id=entry.get("cluster", ""),
               note=entry.get("note", ""))


RUNS: tuple[Run, ...] = tuple(_run(e) for e in _DATA["runs"])  # the calibration runs
VALIDATION: tuple[Run, ...] = tuple(_run(e) for e in _DATA["validation_runs"])
BY_ID = {r.id: r for r in RUNS + VALIDATION}


@dataclass(frozen=True)
class RunCheck:
    """One run beside the lab's answer for it."""

    run: Run
    result: RecipeResult

    @property
    def lab_step_s(self) -> float:
        return self.result.step_s

    @property
    def ratio(self) -> float:
        """Lab throughput / published throughput (> 1: the lab is fast)."""
        return self.run.published_step / self.lab_step_s

    def tokens_per_s_per_gpu(self, step_s: float) -> float:
        return self.run.global_batch * self.run.seq_len / step_s / self.run.gpus

    @property
    def published_tokens(self) -> float:
        return self.tokens_per_s_per_gpu(self.run.published_step)

    @property
    def lab_tokens(self) -> float:
        return self.tokens_per_s_per_gpu(self.lab_step_s)


def check(run: Run) -> RunCheck:
    return RunCheck(run, evaluate(run.plan, run.model, run.cluster, run.nodes))


@lru_cache(maxsize=1)
def checks() -> tuple[RunCheck, ...]:
    """Every calibration run, checked (one cached answer: the runs are fixed data)."""
    return tuple(check(r) for r in RUNS)


@lru_cache(maxsize=1)
def validation_checks() -> tuple[RunCheck, ...]:
    """Every validation run, checked."""
    return tuple(check(r) for r in VALIDATION)


def group_summaries(found: tuple[RunCheck, ...], titles: dict[str, str]) -> list[dict]:
    """Each group's runs summarised as ``summary`` does, with the median ratio itself (above
    1: the lab is fast on that group), in ``titles``' order; groups without runs left out."""
    out = []
    for group, title in titles.items():
        mine = tuple(c for c in found if c.run.group == group)
        if mine:
            out.append({"group": group, "title": title, **summary(mine)})
    return out


def summary(found: tuple[RunCheck, ...]) -> dict[str, float]:
    """Median and worst |ratio − 1|, how many runs lie within ±10% and ±25%, and which way
    the lab errs: the median, lowest and highest ratio (above 1: the lab is fast) and how many
    runs it is fast on."""
    ratios = [c.ratio for c in found]
    dev = [abs(r - 1) for r in ratios]
    return {"median_deviation": statistics.median(dev), "worst_deviation": max(dev),
            "within_10": sum(d <= 0.10 for d in dev), "within_25": sum(d <= 0.25 for d in dev),
            "runs": len(dev), "median_ratio": statistics.median(ratios),
            "min_ratio": min(ratios), "max_ratio": max(ratios),
            "fast": sum(r > 1 for r in ratios)}


@lru_cache(maxsize=1)  # pure: the presets' runs, summarised once (issue 31)
def stack_bands() -> dict[str, dict[str, float]]:
    """The lab's error where EP08 errs most (cold reading round 8, EP08 item 2), each
    ``summary`` of the "Checked against real runs" page's validation runs: torchtitan's FSDP2
    runs on H100s and on A100s (its matched hardware), NeMo's FP8 H100 runs (Megatron-LM
    underneath) and the MoE runs (DeepSeek-V3's and Megatron's Qwen3 zoo); and Megatron-LM's
    BF16 calibration runs (A100s, EP08 step 10's band), the band step 14's BF16 3-D plans
    take: round-18 cold reading B, finding 12 (the note took NeMo's FP8 band for a BF16
    plan). Step 14's verdict and its decide read them (its 2-D plans take the A100 FSDP2
    band)."""
    found = validation_checks()

    def band(keep) -> dict[str, float]:
        return summary(tuple(c for c in found if keep(c.run)))

    titan = "torchtitan-fsdp2"
    return {"fsdp2_h100": band(lambda r: r.group == titan and "H100" in r.cluster.gpu.name),
            # Its A100 rows: the stack's own error, on hardware the lab prices as it ran
            # (the H100 rows ran at 500 W with HBM2e, timed as a 700 W H100 SXM; round-21
            # cold reading Q, finding 1: step 14's 2-D band took them for the stack's).
            "fsdp2_a100": band(lambda r: r.group == titan and "A100" in r.cluster.gpu.name),
            "nemo_h100": band(lambda r: r.group == "nemo-h100-fp8"),
            "moe": band(lambda r: r.group in ("deepseek-v3", "megatron-moe")),
            "megatron_bf16": summary(checks())}


@dataclass(frozen=True)
class MegatronCompute:
    """Megatron-LM's best 2021 compute rate on A100s with its communication taken out: a
    Table 1 run's published TFLOP/s (eq. 3, recomputation included) over the lab's efficiency
    for the same run's plan (``checks``: its kernels' time over its whole step, the
    TP collectives, the bubble, the sends, the DP sync and the optimizer included). The
    published rate pays all of those; this one is the rate its kernels ran at."""

    name: str
    gpus: int
    published_flops: float
    efficiency: float  # the lab's, for that run's plan
    lab_ratio: float  # the lab's throughput over the published one on that run

    @property
    def compute_flops(self) -> float:
        return self.published_flops / self.efficiency


@lru_cache(maxsize=1)
def megatron_compute() -> MegatronCompute:
    """The Table 1 run whose published rate implies the highest communication-free rate."""
    found = [MegatronCompute(c.run.name, c.run.gpus, c.run.published_tflops * 1e12,
                             c.result.efficiency, c.ratio)
             for c in checks() if c.run.group == "narayanan-2021-table1"]
    return max(found, key=lambda m: m.compute_flops)
