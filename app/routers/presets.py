"""The presets every lab shares: models (with computed parameter counts) and GPUs."""

from fastapi import APIRouter
from pydantic import BaseModel, Field

from labs.data_parallel.lab import link_family
from labs.hardware.gpus import capacity_note, gpus
from labs.hardware.links import links
from labs.model.presets import models

router = APIRouter(prefix="/api", tags=["presets"])


class ModelPreset(BaseModel):
    id: str
    name: str
    params: int = Field(description="Total parameters, computed from the shape.")
    active_params: int = Field(description="Parameters used per token (MoE: top-k experts).")
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tied_embeddings: bool
    experts: int
    top_k: int
    shared_experts: int
    expert_ffn: int
    source: str


class GpuPreset(BaseModel):
    id: str
    name: str
    memory_bytes: int = Field(description="The datasheet's GB as 10⁹ B: what the lab budgets "
                              "and every fit verdict reads (see capacity_note).")
    memory_note: str = Field(description="The datasheet's figure against what the card "
                             "carries and what the driver reports.")
    capacity_note: str = Field(description="memory_bytes beside the card's GiB and what CUDA "
                               "gives a process, where known, each in GB worked from the "
                               "GiB, and which way the lab's fit verdicts err.")
    bf16_flops: float = Field(description="Dense BF16 FLOP/s.")
    scale_up_bandwidth: float = Field(description="NVLink-class bandwidth per GPU, B/s.")
    network_bandwidth: float = Field(description="Scale-out network bandwidth per GPU, B/s.")
    scale_up_domain: int = Field(description="GPUs in one scale-up (NVLink) domain.")
    source: str


def model_json(spec) -> dict:
    return {
        "id": spec.id,
        "name": spec.name,
        "params": spec.params,
        "active_params": spec.active_params,
        "layers": spec.layers,
        "hidden": spec.hidden,
        "heads": spec.heads,
        "kv_heads": spec.kv_heads,
        "head_dim": spec.head_dim,
        "ffn": spec.ffn,
        "vocab": spec.vocab,
        "tied_embeddings": spec.tied_embeddings,
        "experts": spec.experts,
        "top_k": spec.top_k,
        "shared_experts": spec.shared_experts,
        "expert_ffn": spec.expert_ffn,
        "source": spec.source,
    }


def gpu_json(spec) -> dict:
    return {
        "id": spec.id,
        "name": spec.name,
        "memory_bytes": spec.memory_bytes,
        "memory_note": spec.memory_note,
        "capacity_note": capacity_note(spec),
        "bf16_flops": spec.bf16_flops,
        "scale_up_bandwidth": spec.scale_up_bandwidth,
        "network_bandwidth": spec.network_bandwidth,
        "scale_up_domain": spec.scale_up_domain,
        "source": spec.source,
    }


@router.get("/models", summary="Model presets, with parameter counts computed from their shape",
            response_model=list[ModelPreset])
def list_models() -> list[dict]:
    return [model_json(spec) for spec in models().values()]


@router.get("/gpus", summary="GPU presets: memory (bytes), dense BF16 FLOP/s, bandwidths (B/s)",
            response_model=list[GpuPreset])
def list_gpus() -> list[dict]:
    return [gpu_json(spec) for spec in gpus().values()]


class LinkPreset(BaseModel):
    id: str
    name: str
    kind: str = Field(description="nvlink, infiniband, ethernet, pcie (or infinity-fabric).")
    scope: str = Field(description="scale-up (inside a node) or scale-out (between nodes).")
    bandwidth_bytes_per_s: float = Field(description="Per GPU (scale-up) or per port, per "
                                                     "direction.")
    latency_s: float = Field(description="α of the α–β model, per ring step.")
    domain: int | None = Field(description="Most GPUs one scale-up fabric joins.")
    source: str


@router.get("/links", summary="Link presets: bandwidth per direction (B/s) and latency (s)",
            response_model=list[LinkPreset])
def list_links() -> list[dict]:
    return [{"id": link.id, "name": link.name, "kind": link_family(link), "scope": link.kind,
             "bandwidth_bytes_per_s": link.bandwidth, "latency_s": link.latency,
             "domain": link.domain, "source": link.source} for link in links().values()]
