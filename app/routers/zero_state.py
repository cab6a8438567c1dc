"""EP03's state: the ZeRO lab's controls (``ZeroQuery`` and its option lists), the state they
describe run through labs.zero (``run``), and its answers (``to_api``). ``app.routers.zero``
serves them, with the figures, what of them waits for which guess, the lesson's states, page
context, cases and drills."""

from typing import Literal

from pydantic import Field

from app.model_controls import ModelChoice, ModelGpuControls, model_field
from app.routers.memory import DEFAULT_MODEL
from labs.core.catalogue import ACTIVATION_MODEL_HELP
from labs.core.limits import (
    ACTIVATION_MODELS,
    GPU_HOST_LINK,
    HOST_LINKS,
    MAX_DP,
    MAX_GPUS_PER_NODE,
    MAX_MICRO_BATCH,
    MAX_SEQ_LEN,
    RECOMPUTE,
    TRAIN_RECIPES,
)
from labs.hardware.gpus import get_gpu
from labs.zero.inputs import ZeroInput, ZeroResult
from labs.zero.lab import FSDP_NAMES, achieved_mfu, crossover, simulate_zero

DP_OPTIONS = tuple(2**k for k in range(0, 11))  # 1 ... 1,024 replicas
GPUS_PER_NODE_OPTIONS = (1, 2, 4, 8, 72)


class ZeroQuery(ModelGpuControls):
    """The controls of the ZeRO lab; every size is bounded so no request is costly."""

    model: ModelChoice = model_field(DEFAULT_MODEL)
    recipe: Literal[TRAIN_RECIPES] = Field(
        "adam16", description="Training recipe (labs.core.catalogue: mixed-precision Adam, "
        "16-bit Adam or an FP8 recipe; GET /api/precision itemises them).")
    dp: int = Field(32, ge=1, le=MAX_DP, description="Data-parallel degree D (GPUs sharding).")
    zero: int = Field(3, ge=0, le=3, description="ZeRO stage (0 = plain data parallelism).")
    offload: bool = Field(False, description="Optimizer (CPU Adam) offload to host RAM.")
    gpus_per_node: int = Field(8, ge=1, le=MAX_GPUS_PER_NODE,
                               description="GPUs per node (the DP group fills whole nodes).")
    link: str = Field("ib-ndr", max_length=64,
                      description="The link under test (labs/presets/links.json ids): a "
                      "scale-out link joins the nodes, a scale-up link the GPUs of one node.")
    host_link: Literal[(GPU_HOST_LINK, *HOST_LINKS)] = Field(
        GPU_HOST_LINK, description="GPU-host link for offload; 'gpu': the GPU preset's own "
        "(PCIe 4.0 on an A100 or RTX 4090, PCIe 5 on the others).")
    seq_len: int = Field(4096, ge=1, le=MAX_SEQ_LEN, description="Tokens per sequence.")
    micro_batch: int = Field(1, ge=1, le=MAX_MICRO_BATCH, description="Sequences per micro-batch.")
    recompute: Literal[RECOMPUTE] = Field(
        "flash", description="Activation recomputation (Korthikanti et al. 2022); the default, "
        "none with fused attention (FlashAttention), is what current stacks run.")
    activation_model: Literal[ACTIVATION_MODELS] = Field(
        "classic", description=ACTIVATION_MODEL_HELP)



def run(query: ZeroQuery) -> ZeroResult:
    model = query.model_spec()
    return simulate_zero(ZeroInput(
        model=model, gpu=get_gpu(query.gpu), recipe=query.recipe, dp=query.dp, zero=query.zero,
        offload=query.offload, gpus_per_node=query.gpus_per_node, link=query.link,
        host_link=query.host_link, seq_len=query.seq_len, micro_batch=query.micro_batch,
        recompute=query.recompute, activation_model=query.activation_model))


def _bytes(breakdown: dict) -> dict:
    return {k: round(v) for k, v in breakdown.items()}


def _crossover(c) -> dict:
    return {"tokens_per_gpu": c.tokens_per_gpu, "compute_s": c.compute_s, "comm_s": c.comm_s,
            "comm_bytes": round(c.comm_bytes), "busbw": round(c.busbw), "rate": round(c.rate),
            "factor": round(c.factor, 6), "crossover_tokens": round(c.crossover_tokens, 1),
            "hidden_tokens": round(c.hidden_tokens, 1),
            "ratio": round(c.compute_s / c.comm_s, 4) if c.comm_s else None,
            "sweep": [[t, round(v, 9)] for t, v in c.sweep]}


def to_api(result: ZeroResult) -> dict:
    inp, off, chosen = result.input, result.offload, result.chosen_traffic
    return {
        "model": inp.model.id, "model_name": inp.model.name, "gpu": inp.gpu.id,
        "recipe": inp.recipe, "params": result.params, "bytes_per_param": result.bytes_per_param,
        "dp": inp.dp, "zero": inp.zero, "offload": inp.offload,
        "gpus_per_node": inp.gpus_per_node, "nodes": inp.nodes, "link": inp.link,
        "cluster": result.cluster.name, "fsdp_name": FSDP_NAMES[inp.zero],
        "breakdown": _bytes(result.breakdown),
        "total_bytes": round(result.total_bytes),
        "state_bytes": round(result.state_bytes),
        "state_bytes_whole_model": round(result.params * result.bytes_per_param),
        "gpu_memory_bytes": round(result.gpu_memory_bytes),
        "fits": result.fits,
        "traffic_bytes": round(chosen.bytes_per_gpu),
        "traffic_seconds": chosen.seconds,
        "exposed_seconds": chosen.exposed_seconds,
        "compute_seconds": result.compute_seconds,
        "step_seconds": result.step_seconds,
        "mfu": achieved_mfu(result.input, result.compute_seconds),
        "host_bytes_per_node": round(result.host_bytes_per_node),
        "stages": [{"dp": b.dp, "zero": b.zero, "state_bytes": round(b.state_bytes),
                    "total_bytes": round(b.total_bytes), "breakdown": _bytes(b.breakdown)}
                   for b in result.bars],
        "traffic": [{
            "zero": r.zero, "bytes": round(r.bytes_per_gpu), "seconds": r.seconds,
            "exposed_seconds": r.exposed_seconds, "hidden_seconds": r.hidden_seconds,
            "ratio_to_zero0": (r.bytes_per_gpu / result.traffic[0].bytes_per_gpu
                               if result.traffic[0].bytes_per_gpu else None),
            "transfers": [{"collective": t.collective, "moves": t.moves, "phase": t.phase,
                           "bytes": round(t.bytes_per_gpu), "seconds": t.seconds,
                           "algorithm": t.algorithm} for t in r.transfers],
        } for r in result.traffic],
        "recompute": [{"recompute": r.recompute, "activation_bytes": round(r.activation_bytes),
                       "total_bytes": round(r.total_bytes), "compute_seconds": r.compute_seconds,
                       "extra_compute": r.extra_compute, "fits": r.fits}
                      for r in result.recompute],
        "offload_plan": {
            "gpu_bytes_without": round(off.gpu_bytes_without),
            "gpu_bytes_with": round(off.gpu_bytes_with),
            "host_bytes_per_gpu": round(off.host_bytes_per_gpu),
            "host_bytes_per_node": round(off.host_bytes_per_node),
            "pcie_bytes": round(off.pcie_down_bytes + off.pcie_up_bytes),
            "pcie_seconds": off.pcie_seconds, "adam_bytes": round(off.adam_bytes),
            "adam_seconds": off.adam_seconds,
            "host_memory_bandwidth": off.host_memory_bandwidth,
            "exposed_seconds": off.exposed_seconds,
            "delayed_exposed_seconds": off.delayed_exposed_seconds,
            "download_hidden": off.download_hidden,
        },
        "crossover": _crossover(crossover(result)),
        "deepspeed": {f"stage{d.stage}": {
            "gpu_bytes": d.gpu_bytes, "cpu_bytes_per_node": d.cpu_bytes_per_node,
            "largest_layer_params": d.largest_layer_params,
            "num_gpus_per_node": d.num_gpus_per_node, "num_nodes": d.num_nodes,
        } for d in result.deepspeed},
    }
