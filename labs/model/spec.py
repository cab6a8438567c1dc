"""A model's shape (``ModelSpec``) and the parameter counts computed from it.

Every parameter count here is *computed* from a model's shape (layer sizes from its published
``config.json`` or paper), never typed in, so the lab's totals can be checked against the
published ones (see ``tests/labs/test_presets.py``). The counting rules follow the Hugging Face
Transformers implementations of each architecture (LlamaForCausalLM, MixtralForCausalLM,
Qwen2ForCausalLM, DeepseekV3ForCausalLM, Glm4MoeForCausalLM, Glm4MoeLiteForCausalLM) and, for
GPT-3, Brown et al. 2020 (arXiv:2005.14165) with GPT-2's layer layout.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from labs.core.errors import LabInputError
from labs.core.validate import is_int as _is_int


@dataclass(frozen=True)
class ModelSpec:
    """The shape of a decoder-only transformer, enough to count its weights exactly.

    ``ffn`` is the dense MLP's intermediate width (used by the first ``dense_layers`` layers of
    a MoE model, and by every layer of a dense one); ``expert_ffn`` is one routed or shared
    expert's intermediate width. MLA fields (``kv_lora_rank`` > 0) switch attention to
    DeepSeek's multi-head latent attention (DeepSeek-V2, arXiv:2405.04434).
    """

    id: str
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    source: str
    tied_embeddings: bool = False
    gated_mlp: bool = True  # SwiGLU: gate, up, down (3 matrices); GPT-style: up, down (2)
    qkv_bias: bool = False  # Qwen2, GLM-4: bias on the Q, K, V projections only
    linear_bias: bool = False  # GPT-2/3: bias on every linear layer (also o-proj and MLP)
    qk_norm: bool = False  # GLM-4.5/4.7: RMSNorm on each query and key head (head_dim weights)
    norm: str = "rmsnorm"  # "rmsnorm" (weight only) or "layernorm" (weight and bias)
    experts: int = 0  # routed experts per MoE layer (0 = dense model)
    top_k: int = 0  # routed experts each token visits
    shared_experts: int = 0  # always-on experts per MoE layer (DeepSeek, GLM)
    expert_ffn: int = 0
    dense_layers: int = 0  # leading layers with a dense MLP in a MoE model
    router_bias: bool = False  # aux-loss-free balancing bias per expert (DeepSeek-V3, GLM-4.5)
    # Node-limited routing (DeepSeek-V3 sec 2.1.2; config.json n_group, topk_group): the
    # experts fall in route_groups groups and a token picks its top-k among the experts of its
    # best route_group_limit groups (0: no limit).
    route_groups: int = 0
    route_group_limit: int = 0
    q_lora_rank: int = 0  # MLA query compression rank (0 = full-rank query projection)
    kv_lora_rank: int = 0  # MLA latent width (0 = ordinary multi-head / grouped-query attention)
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    max_positions: int = 0  # learned absolute position embeddings (GPT-3: 2048); 0 for RoPE
    # Trained with dropout (hidden and attention): GPT-3 as Megatron-LM trains it (its default
    # --hidden-dropout and --attention-dropout 0.1, the runs Korthikanti et al. 2022 count).
    # False for the Llama family and the other current presets, whose configs set it to 0
    # (attention_dropout 0.0; Megatron-LM's Llama 3 examples: --attention-dropout 0.0
    # --hidden-dropout 0.0): activation memory then keeps no dropout masks in attention.
    dropout: bool = False
    notes: str = ""
    params_override: int | None = None  # custom models only: the requested total
    # True when the config is not published and a published architecture stands in for it,
    # scaled to the stated size (``notes`` says which and how): pages label it "stand-in shape".
    stand_in: bool = False

    def __post_init__(self) -> None:
        for name in ("id", "name", "source"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise LabInputError("model", f"model field '{name}' must be a non-empty string")
        positive = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab")
        non_negative = (
            "experts", "top_k", "shared_experts", "expert_ffn", "dense_layers", "q_lora_rank",
            "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "max_positions",
            "route_groups", "route_group_limit",
        )
        for name in positive:
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise LabInputError("model", f"{self.id}: '{name}' must be a whole number >= 1")
        for name in non_negative:
            value = getattr(self, name)
            if not _is_int(value) or value < 0:
                raise LabInputError("model", f"{self.id}: '{name}' must be a whole number >= 0")
        if self.norm not in ("rmsnorm", "layernorm"):
            raise LabInputError("model", f"{self.id}: norm must be 'rmsnorm' or 'layernorm'")
        if not self.uses_mla and self.heads % self.kv_heads:
            raise LabInputError(
                "model", f"{self.id}: {self.heads} query heads cannot share {self.kv_heads} "
                "KV heads evenly"
            )
        if self.experts:
            if not 1 <= self.top_k <= self.experts or self.expert_ffn < 1:
                raise LabInputError(
                    "model", f"{self.id}: a MoE model needs 1 <= top_k <= experts and "
                    "expert_ffn > 0"
                )
            if self.dense_layers >= self.layers:
                raise LabInputError("model", f"{self.id}: dense_layers must be fewer than layers")
            if self.route_groups and (self.experts % self.route_groups
                                      or not 1 <= self.route_group_limit <= self.route_groups
                                      or self.top_k > self.route_group_limit
                                      * (self.experts // self.route_groups)):
                raise LabInputError(
                    "model", f"{self.id}: routing groups must divide the experts, and a token's "
                    "groups (1 to route_groups) must hold its top_k experts")
            if self.route_group_limit and not self.route_groups:
                raise LabInputError("model", f"{self.id}: route_group_limit needs route_groups")
        elif self.top_k or self.shared_experts or self.dense_layers or self.route_groups:
            raise LabInputError("model", f"{self.id}: top_k/shared/dense_layers/route_groups "
                                         "need experts > 0")
        if self.uses_mla and not (self.qk_rope_head_dim and self.qk_nope_head_dim
                                  and self.v_head_dim):
            raise LabInputError("model", f"{self.id}: MLA needs qk_nope, qk_rope and v head dims")
        if self.params_override is not None and (
            not _is_int(self.params_override) or self.params_override < 1
        ):
            raise LabInputError("model", f"{self.id}: params_override must be a positive integer")

    # ----- shape helpers -------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def uses_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0

    def _norm(self, width: int) -> int:
        # RMSNorm has a gain only; LayerNorm a gain and a bias (Ba et al. 2016).
        return width if self.norm == "rmsnorm" else 2 * width

    @cached_property
    def attention_params(self) -> int:
        """Weights of one attention block (projections, biases, q/k norms), per layer."""
        h = self.hidden
        if self.uses_mla:
            # DeepSeek-V2 (arXiv:2405.04434) sec 2.1.2 / HF DeepseekV3Attention: low-rank query
            # (q_a, q_a_layernorm, q_b), joint KV latent plus a shared RoPE key (kv_a_proj_with_mqa,
            # kv_a_layernorm, kv_b), output projection from heads x v_head_dim.
            qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                rank = self.q_lora_rank
                q = h * rank + rank + rank * self.heads * qk_head
            else:
                q = h * self.heads * qk_head
            kv = (h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
                  + self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim))
            return q + kv + self.heads * self.v_head_dim * h
        q_width = self.heads * self.head_dim
        kv_width = self.kv_heads * self.head_dim
        params = h * q_width + 2 * h * kv_width + q_width * h  # Q, K, V, O (GQA: Ainslie 2023)
        if self.qkv_bias or self.linear_bias:
            params += q_width + 2 * kv_width
        if self.linear_bias:
            params += h
        if self.qk_norm:
            params += 2 * self.head_dim
        return params

    def _mlp_params(self, width: int) -> int:
        # SwiGLU (Shazeer 2020): gate and up h x f, down f x h; GPT MLP: up and down.
        matrices = 3 if self.gated_mlp else 2
        params = matrices * self.hidden * width
        if self.linear_bias:
            params += (matrices - 1) * width + self.hidden
        return params

    @property
    def dense_mlp_params(self) -> int:
        """Weights of one dense layer's MLP (width ``ffn``)."""
        return self._mlp_params(self.ffn)

    @cached_property
    def expert_size(self) -> int:
        """Weights of one routed expert (a SwiGLU MLP of width expert_ffn)."""
        return self._mlp_params(self.expert_ffn) if self.is_moe else 0

    @cached_property
    def _shape_totals(self) -> tuple[int, int, int]:
        """(total, routed-expert, active) weights computed from the shape alone."""
        h = self.hidden
        layer_norms = 2 * self._norm(h)
        dense_layer = self.attention_params + self._mlp_params(self.ffn) + layer_norms
        n_dense = self.layers - self.moe_layers
        total = n_dense * dense_layer
        routed = active_routed = 0
        if self.is_moe:
            # Switch/Mixtral/DeepSeekMoE layer: router (experts x h, plus the aux-loss-free bias
            # of DeepSeek-V3 sec 2.1.2), shared experts that every token uses, routed experts.
            router = self.experts * h + (self.experts if self.router_bias else 0)
            shared = self.shared_experts * self.expert_size
            moe_common = self.attention_params + layer_norms + router + shared
            total += self.moe_layers * moe_common
            routed = self.moe_layers * self.experts * self.expert_size
            active_routed = self.moe_layers * self.top_k * self.expert_size
        embeddings = self.vocab * h + self.max_positions * h
        head = 0 if self.tied_embeddings else self.vocab * h
        total += embeddings + head + self._norm(h)  # final norm
        return total + routed, routed, total + active_routed

    # ----- the counts the lab uses ---------------------------------------------------------
    @property
    def shape_params(self) -> int:
        """Total weights implied by the shape (equals ``params`` except for custom models)."""
        return self._shape_totals[0]

    @property
    def params(self) -> int:
        """Total parameters: what memory must hold (embeddings and head included)."""
        return self.params_override if self.params_override is not None else self.shape_params

    @property
    def expert_params(self) -> int:
        """All routed-expert weights: the part expert parallelism divides."""
        return 0 if self.params_override is not None else self._shape_totals[1]

    @property
    def dense_params(self) -> int:
        """Everything but routed experts: attention, dense/shared MLPs, routers, embeddings."""
        return self.params - self.expert_params

    @property
    def embedding_params(self) -> int:
        """Token (and position) embeddings plus an untied output head. Some model cards quote
        active counts without them (GLM-4.5's 32B), others with them (Mixtral's 12.9B)."""
        head = 0 if self.tied_embeddings else self.vocab * self.hidden
        return self.vocab * self.hidden + self.max_positions * self.hidden + head

    @property
    def active_params(self) -> int:
        """Weights one token touches: dense part + shared experts + its top_k routed experts."""
        if self.params_override is not None:
            return self.params
        return self._shape_totals[2]
