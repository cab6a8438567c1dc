"""EP10 activation offload: saved activations copied to host memory over the GPU's host link
while the next layers compute, and copied back before the backward needs them.

- What moves: a share of each layer's saved activations (the ledger's, ``labs.memory.lab``);
  the GPU keeps the rest, and the host holds the moved share of every micro-batch in flight:
  host RAM per node = share x activations x GPUs per node. Megatron-LM's
  --cpu-offloading-activations and PyTorch's torch.autograd.graph.save_on_cpu work this way
  (a side stream copies each saved tensor out as the forward moves on).
- When it hides: a layer's copy must end before the next one's compute does, sustained
  layer after layer: hidden while copy time <= one layer's forward (and the reload <= its
  backward). The copy runs at the host link's bandwidth per direction
  (``labs/presets/links.json``: PCIe 4/5 x16).
- The window it hides in: one layer's pass as EP08's step model times it
  (``labs.recipe.stage_time.layer_kinds``, the layer EP05 steps 4-5 quote): its kernels
  (GEMMs, attention, norms and activations) and its TP, CP and EP collectives. The copy runs
  on a copy engine over PCIe, beside both the SMs and NVLink, so the collectives' time is
  window too. The backward's includes its recomputation. An FP8 recipe's layer is timed with
  FP8 GEMMs where ``labs.precision.speed`` times its step so: a faster compute leaves the copy
  less time to hide in. Until round 29 (cold reading r29B, finding 1) the window was the
  layer's GEMM and attention FLOPs at the full-wave GEMM rate alone (1.42 ms for EP10 step
  12's 70B layer against the step model's 1.58 ms of kernels + 0.77 ms of collectives), and
  the backward twice that.
"""

from __future__ import annotations

from labs.core.limits import OFFLOAD_SHARES
from labs.hardware.links import get_link
from labs.memory.inputs import MemoryResult
from labs.parallel.layer_time import PassTime
from labs.precision.inputs import Offload, OffloadPoint, PrecisionInput
from labs.precision.speed import cluster_of, fp8_timed, plan_of
from labs.recipe.stage_time import layer_kinds


def layer_passes(inp: PrecisionInput) -> tuple[PassTime, PassTime]:
    """One layer's forward and backward (its recomputation included) on one GPU for one
    micro-batch, as EP08's step model times them (module docstring): of a MoE model's dense
    and MoE layers, and of a layer-granular recomputation's two modes, the shorter of each
    pass, the layer whose copy hides least."""
    cluster, _ = cluster_of(inp)
    plan = plan_of(inp, inp.recipe, fp8_timed(inp))
    kinds = layer_kinds(inp.model, plan.layout, cluster, seq_len=inp.seq_len,
                        micro_batch=inp.micro_batch, recompute=inp.recompute,
                        options=plan.step_options(None))
    times = [lt for pair in kinds.times.values() for lt in pair if lt is not None]
    return (min((lt.forward for lt in times), key=lambda p: p.seconds),
            min((lt.backward for lt in times), key=lambda p: p.seconds))


def offload(inp: PrecisionInput, ledger: MemoryResult) -> Offload:
    """The offload of ``inp.offload`` of the saved activations of ``ledger``'s heaviest GPU."""
    link = get_link(inp.host_link)
    stage = ledger.stages[ledger.heaviest_stage]
    acts = ledger.breakdown["activations"]
    # The ledger holds in_flight micro-batches of the stage's layers: one layer, one of them.
    layer_bytes = acts / (stage.in_flight * stage.layers) if acts else 0.0
    fwd, bwd = layer_passes(inp)
    forward, backward = fwd.seconds, bwd.seconds
    full_copy = layer_bytes / link.bandwidth
    copy = inp.offload * full_copy
    hidden_share = 1.0 if full_copy <= forward else forward / full_copy
    layers = stage.layers * ledger.input.pipeline_microbatches
    exposed = layers * (max(0.0, copy - forward) + max(0.0, copy - backward))
    moved = inp.offload * acts
    return Offload(
        share=inp.offload, link_name=link.name, link_bandwidth=link.bandwidth,
        activation_bytes=acts, freed_bytes=moved, host_bytes_per_gpu=moved,
        host_bytes_per_node=moved * inp.gpus_per_node, layer_bytes=layer_bytes, copy_s=copy,
        forward_s=forward, backward_s=backward, forward_kernels_s=fwd.compute,
        forward_comms_s=fwd.exposed, hidden_share=hidden_share, exposed_s=exposed,
        points=tuple(OffloadPoint(s, s * full_copy) for s in OFFLOAD_SHARES))
