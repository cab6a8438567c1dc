"""POST /api/models/parse: a pasted config.json read as the lab's model shape."""

from pydantic import BaseModel, Field


class ParsedModel(BaseModel):
    """The shape every lab uses for a pasted config.json, its counts and its model code."""

    code: str = Field(description="The model code: pass it as ?model= to any lab (it is the "
                                  "model's id in their answers).")
    name: str = Field(description="How pages name it: 'Your model (70.6B)'.")
    architecture: str = Field(description="The Transformers class read, e.g. LlamaForCausalLM.")
    params: int = Field(description="Total parameters, counted from the shape (embeddings and "
                                    "output head included; an MTP layer excluded).")
    active_params: int = Field(description="Parameters one token uses (MoE: shared + top-k "
                                           "routed experts).")
    expert_params: int = Field(description="Routed-expert weights (what EP divides).")
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int = Field(description="Dense MLP width (intermediate_size).")
    vocab: int
    tied_embeddings: bool
    qkv_bias: bool
    qk_norm: bool
    experts: int
    top_k: int
    shared_experts: int
    expert_ffn: int
    dense_layers: int = Field(description="Leading layers with a dense MLP (MoE models).")
    q_lora_rank: int = Field(description="MLA: query compression rank (0 = full rank).")
    kv_lora_rank: int = Field(description="MLA: latent width (0 = no MLA).")
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    notes: list[str] = Field(description="What the count leaves out, and why.")
