"""EP10 activation offload: saved activations copied to host memory over the GPU's host link
while the next layers compute, and copied back before the backward needs them.

- What moves: a share of each layer's saved activations (the ledger's, ``labs.memory.lab``);
  the GPU keeps the rest, and the host holds the moved share of every micro-batch in flight:
  host RAM per node = share x activations x GPUs per node. Megatron-LM's
  --cpu-offloading-activations and PyTorch's torch.autograd.graph.save_on_cpu work this way
  (a side stream copies each saved tensor out as the forward moves on).
- When it hides: a layer's copy must end before the next one's compute does, sustained
  layer after layer: hidden while copy time <= one layer's forward (and the reload <= its
  backward, 2 x the forward: Narayanan et al. 2021). The copy runs at the host link's
  bandwidth per direction (``labs/presets/links.json``: PCIe 4/5 x16).
- The compute it hides behind: the forward FLOPs of one layer (2 per weight per token plus
  the attention core, ``labs.model.flops``) on its TP shard at the GPU's measured full-wave
  GEMM rate, the step model's (``labs.hardware.kernels.matmul_rate``). A faster compute
  (FP8) leaves the copy less time to hide in.
"""

from __future__ import annotations

from labs.core.limits import OFFLOAD_SHARES
from labs.hardware.kernels import matmul_rate
from labs.hardware.links import get_link
from labs.memory.inputs import MemoryResult
from labs.model.flops import attention_flops_per_token, matmul_params
from labs.precision.inputs import Offload, OffloadPoint, PrecisionInput

BACKWARD_OVER_FORWARD = 2  # Narayanan et al. 2021: backward ≈ 2 x forward


def layer_forward_s(inp: PrecisionInput) -> float:
    """One layer's forward on one GPU for one micro-batch, in seconds: its FLOPs at the GPU's
    measured full-wave GEMM rate (``labs.hardware.kernels.matmul_rate``, the step model's)."""
    m = inp.model
    layer_weights = (matmul_params(m) - m.vocab * m.hidden) / m.layers  # the head excluded
    per_token = 2 * layer_weights + attention_flops_per_token(m, inp.seq_len) / 3 / m.layers
    tokens = inp.seq_len * inp.micro_batch / inp.cp
    return tokens * per_token / inp.tp / matmul_rate(inp.gpu)


def offload(inp: PrecisionInput, ledger: MemoryResult) -> Offload:
    """The offload of ``inp.offload`` of the saved activations of ``ledger``'s heaviest GPU."""
    link = get_link(inp.host_link)
    stage = ledger.stages[ledger.heaviest_stage]
    acts = ledger.breakdown["activations"]
    # The ledger holds in_flight micro-batches of the stage's layers: one layer, one of them.
    layer_bytes = acts / (stage.in_flight * stage.layers) if acts else 0.0
    forward = layer_forward_s(inp)
    backward = BACKWARD_OVER_FORWARD * forward
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
        forward_s=forward, backward_s=backward, hidden_share=hidden_share, exposed_s=exposed,
        points=tuple(OffloadPoint(s, s * full_copy) for s in OFFLOAD_SHARES))
