"""The presets every lab shares: models (with computed parameter counts) and GPUs."""

from fastapi import APIRouter

from labs.presets import gpus, models

router = APIRouter(prefix="/api", tags=["presets"])


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
        "bf16_flops": spec.bf16_flops,
        "scale_up_bandwidth": spec.scale_up_bandwidth,
        "network_bandwidth": spec.network_bandwidth,
        "scale_up_domain": spec.scale_up_domain,
        "source": spec.source,
    }


@router.get("/models", summary="Model presets, with parameter counts computed from their shape")
async def list_models() -> list[dict]:
    return [model_json(spec) for spec in models().values()]


@router.get("/gpus", summary="GPU presets: memory (bytes), dense BF16 FLOP/s, bandwidths (B/s)")
async def list_gpus() -> list[dict]:
    return [gpu_json(spec) for spec in gpus().values()]
