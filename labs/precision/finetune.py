"""EP10 fine-tuning on one GPU: full fine-tuning, LoRA and QLoRA, where every byte lives.

Sources:
- LoRA: Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models"
  (arXiv:2106.09685). A frozen W gains B·A (B: d_out x r, A: r x d_in) on the chosen
  projections and only A and B train: r·(d_in + d_out) parameters per matrix (sec 4.1).
  Sec 4.2: "we reduce the VRAM usage by up to 2/3 if r << d_model as we do not need to store
  the optimizer states for the frozen parameters"; on GPT-3 175B from 1.2 TB to 350 GB, and
  with r = 4 on Wq and Wv the checkpoint from 350 GB to 35 MB, "roughly 10,000x"
  (``paper_check`` is that accounting: 16-bit weights and two 16-bit Adam moments).
- QLoRA: Dettmers et al. 2023, "QLoRA: Efficient Finetuning of Quantized LLMs"
  (arXiv:2305.14314): the frozen base in 4-bit NormalFloat with double-quantized constants
  (``labs.core.catalogue.FORMATS['nf4-dq']``), adapters on every linear layer (sec 4),
  gradient checkpointing, and paged optimizers: NVIDIA unified memory moves optimizer state
  to CPU RAM when the GPU runs out and back when the update needs it (sec 3). bitsandbytes
  quantizes the linear layers (nn.Linear, the output head skipped): embeddings, the output
  head, norms and biases stay 16-bit; each 4-bit matrix is dequantized to bf16 for its
  matmul, one at a time (the dequantization workspace, its largest matrix).
- activations: full training's, from the ledger (``labs.memory.lab``), plus each adapter's
  r-wide intermediate x·A kept for B's gradient (s·b·r·2 B per adapted matrix a token passes);
  an upper bound, as a framework may skip saving the inputs of frozen matrices without
  adapters (their weight gradient is never computed).
- activation offload (``labs.precision.offload``): the page's offloaded share of each
  method's saved activations waits for the backward in host RAM, as it does for the FP8
  ledger's (the logits and the final norm's tensors stay); what it costs in time is that
  module's rule, a layer's copy against its forward.
- the adapters train in a 16-bit recipe of ``labs.core.catalogue`` (``FT_RECIPES``): QLoRA's
  scripts use bf16 adapters with paged 32-bit AdamW, our ``adam12``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from labs.core.catalogue import FORMATS, RECIPES
from labs.core.recomputation import RECOMPUTATION
from labs.memory.inputs import MemoryInput
from labs.memory.lab import compute_memory
from labs.model.activations import ACT_BYTES
from labs.model.spec import ModelSpec
from labs.precision.inputs import FT_KEYS, FineTune, PaperCheck, PrecisionInput

BASE_FORMAT = "nf4-dq"  # QLoRA's frozen base
LORA_BYTES = 2  # the LoRA paper's accounting: 16-bit weights and Adam moments
ADAM_MOMENTS = 2


@dataclass(frozen=True)
class Linear:
    """The linear layers of one kind over the whole model: ``count`` matrices of d_in x d_out,
    ``passes`` of them on each token's way (a routed expert's: top_k of the experts)."""

    module: str  # PEFT's name: q, k, v, o, gate, up, down; "router" is never adapted
    d_in: int
    d_out: int
    count: int
    passes: int

    @property
    def params(self) -> int:
        return self.d_in * self.d_out * self.count


def _attention(m: ModelSpec) -> list[Linear]:
    n = m.layers
    if m.uses_mla:
        # DeepSeek-V2 sec 2.1.2 / HF DeepseekV3Attention: q_a and q_b (or q_proj), the joint
        # KV latent with the shared RoPE key (kv_a_proj_with_mqa), its up-projection (kv_b).
        # LoRA's q adapts q_a and q_b, k the latent's down-projection, v its up-projection.
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = ([Linear("q", m.hidden, m.q_lora_rank, n, n),
              Linear("q", m.q_lora_rank, m.heads * qk, n, n)] if m.q_lora_rank
             else [Linear("q", m.hidden, m.heads * qk, n, n)])
        return q + [Linear("k", m.hidden, m.kv_lora_rank + m.qk_rope_head_dim, n, n),
                    Linear("v", m.kv_lora_rank, m.heads * (m.qk_nope_head_dim + m.v_head_dim),
                           n, n),
                    Linear("o", m.heads * m.v_head_dim, m.hidden, n, n)]
    q, kv = m.heads * m.head_dim, m.kv_heads * m.head_dim
    return [Linear("q", m.hidden, q, n, n), Linear("k", m.hidden, kv, n, n),
            Linear("v", m.hidden, kv, n, n), Linear("o", q, m.hidden, n, n)]


def _mlp(m: ModelSpec, width: int, count: int, passes: int) -> list[Linear]:
    gate = [Linear("gate", m.hidden, width, count, passes)] if m.gated_mlp else []
    return gate + [Linear("up", m.hidden, width, count, passes),
                   Linear("down", width, m.hidden, count, passes)]


@lru_cache(maxsize=64)
def linears(m: ModelSpec) -> tuple[Linear, ...]:
    """Every linear layer of the transformer blocks (the matrices QLoRA quantizes)."""
    found = _attention(m) + _mlp(m, m.ffn, m.layers - m.moe_layers, m.layers - m.moe_layers)
    if m.is_moe:
        n = m.moe_layers
        found += _mlp(m, m.expert_ffn, n * m.experts, n * m.top_k)
        if m.shared_experts:
            found += _mlp(m, m.expert_ffn, n * m.shared_experts, n * m.shared_experts)
        found.append(Linear("router", m.hidden, m.experts, n, n))
    return tuple(x for x in found if x.count)


def linear_params(m: ModelSpec) -> float:
    """The linear layers' weights; a custom size scales its stand-in shape's."""
    shape = sum(x.params for x in linears(m))
    return shape * m.params / m.shape_params


def trainable_params(m: ModelSpec, rank: int, modules: tuple[str, ...]) -> int:
    """LoRA's trainable parameters: r·(d_in + d_out) for every adapted matrix."""
    return sum(rank * (x.d_in + x.d_out) * x.count for x in linears(m) if x.module in modules)


def adapter_activation_bytes(m: ModelSpec, rank: int, modules: tuple[str, ...],
                             tokens: float) -> float:
    """Each adapted matrix's r-wide intermediate x·A for ``tokens`` tokens, in bf16."""
    return tokens * rank * ACT_BYTES * sum(x.passes for x in linears(m)
                                           if x.module in modules)


def paper_check(m: ModelSpec, rank: int, modules: tuple[str, ...]) -> PaperCheck:
    """One accounting near the LoRA paper's totals (sec 4.2 gives no parts; this one is 12%
    under its 1.2 TB for GPT-3 175B): full = weights + two Adam moments, all 16-bit;
    LoRA = the frozen weights + the adapters' weights and moments; the checkpoint = the
    adapters in 16-bit."""
    trainable = trainable_params(m, rank, modules)
    copies = 1 + ADAM_MOMENTS
    return PaperCheck(trainable=trainable, full_bytes=m.params * LORA_BYTES * copies,
                      lora_bytes=(m.params + trainable * copies) * LORA_BYTES,
                      checkpoint_bytes=trainable * LORA_BYTES)


def _page(bill: dict[str, float], gpu_bytes: float, paged: bool) -> float:
    """Paged optimizer: what does not fit moves to host RAM, taken from the optimizer state
    (master weights, then moments), up to all of it. Returns the bytes moved."""
    over = sum(bill.values()) - gpu_bytes
    moved = 0.0
    for key in ("master_weights", "optimizer_moments"):
        if not paged or over <= 0:
            break
        take = min(bill[key], over)
        bill[key] -= take
        moved += take
        over -= take
    return moved


def _offload(bill: dict[str, float], share: float) -> float:
    """Activation offload: ``share`` of the saved activations moves to host RAM. Returns the
    bytes moved."""
    moved = share * bill["activations"]
    bill["activations"] -= moved
    return moved


def _trainable_bill(count: float, recipe: str) -> dict[str, float]:
    r = RECIPES[recipe]
    return {"gradients": count * r.gradients, "master_weights": count * r.master_weights,
            "optimizer_moments": count * r.optimizer_moments}


def finetunes(inp: PrecisionInput) -> tuple[FineTune, ...]:
    """Full fine-tuning, LoRA and QLoRA of ``inp.model`` on one ``inp.gpu``."""
    m, gpu = inp.model, inp.gpu
    full = compute_memory(MemoryInput(model=m, gpu=gpu, mode="train", recipe=inp.ft_recipe,
                                      seq_len=inp.seq_len, micro_batch=inp.micro_batch,
                                      recompute=inp.recompute))
    acts = {k: full.breakdown[k] for k in ("activations", "embedding_and_logits")}
    out = []
    bill = dict.fromkeys(FT_KEYS, 0.0)
    bill.update(weights=full.breakdown["weights"], gradients=full.breakdown["gradients"],
                master_weights=full.breakdown["master_weights"],
                optimizer_moments=full.breakdown["optimizer_moments"], **acts)
    offloaded = _offload(bill, inp.offload)
    host = _page(bill, gpu.memory_bytes, inp.paged)
    out.append(FineTune("full", bill, host, m.params, gpu.memory_bytes, offloaded))

    trainable = trainable_params(m, inp.rank, inp.module_names)
    adapters = _trainable_bill(trainable, inp.ft_recipe)
    tokens = inp.seq_len * inp.micro_batch
    # The adapters' intermediates stay on the layers that keep more than their input.
    keeping = sum(dense for mode, dense, _ in RECOMPUTATION[inp.recompute].groups(m.layers)
                  if not RECOMPUTATION[mode].input_only)
    kept = adapter_activation_bytes(m, inp.rank, inp.module_names, tokens) * (keeping
                                                                             / m.layers)
    linear = linear_params(m)
    nf4 = FORMATS[BASE_FORMAT]
    for method in ("lora", "qlora"):
        bill = dict.fromkeys(FT_KEYS, 0.0)
        if method == "lora":
            bill["weights"] = m.params * ACT_BYTES
        else:
            bill["weights"] = linear * nf4.bits / 8 + (m.params - linear) * ACT_BYTES
            bill["quant_constants"] = linear * nf4.scale_bits_per_element / 8
            bill["dequant_workspace"] = max(x.d_in * x.d_out for x in linears(m)) * ACT_BYTES
        bill["adapter_weights"] = trainable * RECIPES[inp.ft_recipe].weight_bytes
        bill.update(adapters)
        bill["activations"] = acts["activations"] + kept
        bill["embedding_and_logits"] = acts["embedding_and_logits"]
        offloaded = _offload(bill, inp.offload)
        host = _page(bill, gpu.memory_bytes, inp.paged)
        out.append(FineTune(method, bill, host, trainable, gpu.memory_bytes, offloaded))
    return tuple(out)
