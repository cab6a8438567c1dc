"""EP06's shapes: a context-parallel plan (``CPInput``, checked where it is built by the rules
each layout sets on the sequence and the heads) and its answers (``MaskResult``, who computes
which rows of the causal mask; ``CPCost`` per layer at a real length; ``CPResult``).
``labs.context_parallel.lab`` computes them."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from labs.core.errors import LabInputError
from labs.core.limits import CP_LAYOUTS, MAX_CP, MAX_CP_TOKENS, MAX_SEQ_LEN
from labs.core.validate import one_of, whole
from labs.hardware.gpus import GPUSpec
from labs.hardware.links import Link, check_pairing
from labs.model.spec import ModelSpec


def check_layout(field: str, s: int, c: int, layout: str, heads: int | None = None,
                 kv_heads: int | None = None) -> None:
    """Raise ``LabInputError`` when ``layout`` cannot split ``s`` tokens over ``c`` ranks."""
    one_of("layout", layout, CP_LAYOUTS, "layout")
    if c > s:
        raise LabInputError(field, f"CP = {c} ranks need at least {c} tokens (got {s:,})")
    if layout == "zigzag" and s % (2 * c):
        raise LabInputError(field, f"zigzag cuts the sequence into 2 x CP = {2 * c} equal "
                                   f"chunks (rank r takes chunks r and {2 * c}−1−r): {s:,} "
                                   f"tokens do not divide by {2 * c}; Megatron-LM pads to a "
                                   "multiple of 2 x CP")
    if layout == "ulysses" and heads is not None:
        if heads % c:
            raise LabInputError("cp", f"Ulysses gives each rank whole attention heads: "
                                      f"{heads} heads do not divide by CP = {c}")
        if kv_heads is not None and kv_heads % c and c % kv_heads:
            raise LabInputError("cp", f"Ulysses shards the {kv_heads} KV heads too (or "
                                      f"replicates them when CP is a multiple): CP = {c} "
                                      "neither divides them nor is a multiple of them")


@dataclass(frozen=True)
class RankWork:
    rank: int
    tokens: tuple[int, ...]  # tokens held outside attention (Ulysses: its sequence shard)
    causal_pairs: int | Fraction  # cells of the mask (Ulysses: its heads' 1/c share)
    heads: tuple[int, int] | None = None  # Ulysses: the [first, last] head of this rank


@dataclass(frozen=True)
class MaskResult:
    tokens: int
    cp: int
    layout: str
    heads: int
    ranks: tuple[RankWork, ...]
    owner: tuple[int, ...]  # rank holding each query token (Ulysses: its sequence shard)
    total_pairs: int  # s(s+1)/2

    @property
    def imbalance(self) -> float:
        """Busiest rank over the mean: 1.0 is perfectly balanced."""
        mean = Fraction(self.total_pairs, self.cp)
        return float(max(r.causal_pairs for r in self.ranks) / mean)

    @property
    def busiest(self) -> RankWork:
        return max(self.ranks, key=lambda r: r.causal_pairs)


@dataclass(frozen=True)
class CPInput:
    """One context-parallel plan: the mask picture (``tokens`` ≤ 64) and the cost at a real
    ``seq_len`` on ``link`` for ``model``'s attention on ``gpu``."""

    tokens: int
    cp: int
    layout: str
    model: ModelSpec
    seq_len: int
    link: Link
    gpu: GPUSpec

    def __post_init__(self) -> None:  # page order: tokens, CP, layout, model, seq_len, link
        whole("tokens", self.tokens, 1, MAX_CP_TOKENS, "the tokens drawn")
        whole("cp", self.cp, 1, MAX_CP, "the context parallel degree")
        heads, kv = attention_heads(self.model)
        check_layout("tokens", self.tokens, self.cp, self.layout, heads, kv)
        check_cost(self.model, self.seq_len, self.cp, self.layout, self.link)
        if self.link.kind == "scale-up" and self.cp > 1:  # the GPU's compute on its own fabric
            check_pairing(self.gpu, self.link, "link")


def check_cost(model: ModelSpec, seq_len: int, cp: int, layout: str, link: Link) -> None:
    """The rules of the cost at a real length: the sequence splits, the link reaches c GPUs."""
    whole("seq_len", seq_len, 1, MAX_SEQ_LEN, "the sequence length")
    heads, kv = attention_heads(model)
    check_layout("seq_len", seq_len, cp, layout, heads, kv)
    if link.kind == "scale-up" and link.domain and cp > link.domain:
        raise LabInputError("link", f"{link.name} connects at most {link.domain} GPUs: "
                                    f"CP = {cp} must cross nodes, so choose a scale-out link")


def attention_heads(model: ModelSpec) -> tuple[int, int]:
    """(query heads, KV heads); MLA expands its latent into one K/V per query head."""
    return model.heads, model.heads if model.uses_mla else model.kv_heads


@dataclass(frozen=True)
class CPCost:
    collective: str  # "ring p2p", "all-gather" or "all-to-all"
    steps: int  # communication rounds a GPU takes part in
    kv_bytes_per_token: float  # K and V of one token, one layer
    block_bytes: float  # one ring step's K/V block (ring layouts), else the local shard sent
    comm_bytes_per_gpu: float
    comm_s: float
    attention_s: float  # busiest rank's attention forward at its fused kernel's rate
    attention_flops: float  # the busiest rank's attention forward FLOPs (QKᵀ and AV)
    exposed_s: float  # communication attention must wait for
    kv_held_bytes: float  # K/V of other ranks held at once for attention
    busiest_pairs: float  # at seq_len (Ulysses: s(s+1)/2c, possibly fractional)
    imbalance: float
    activation_bytes_per_gpu: float  # all layers, selective recomputation, this rank
    activation_bytes_no_cp: float


@dataclass(frozen=True)
class CPResult:
    input: CPInput
    mask: MaskResult
    cost: CPCost
    # layout -> ((c, cost or None where that c is refused), ...) over SWEEP_CP
    sweep: dict[str, tuple[tuple[int, CPCost | None], ...]]
