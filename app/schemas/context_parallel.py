"""EP06's answer: context parallelism (a sequence's tokens over CP ranks)."""

from typing import Literal

from pydantic import BaseModel, Field


class CPRank(BaseModel):
    rank: int
    tokens: list[int] = Field(description="Tokens this rank holds (Ulysses: outside "
                                          "attention, its sequence shard).")
    causal_pairs: float = Field(description="(query, key) cells with key <= query this rank "
                                            "computes, per head (Ulysses: its heads' share).")
    heads: list[int] | None = Field(None, description="Ulysses: first and last head held.")
class CPCrossover(BaseModel):
    """One layer's attention against the time to move its keys and values, and the tokens
    per rank where they meet (EP06 step 8; labs.context_parallel.crossover)."""

    per_rank: float = Field(description="seq_len / cp: tokens per rank, L.")
    attention_s: float = Field(description="The busiest rank's attention, one layer forward, s.")
    comm_s: float = Field(description="Its K/V transfers, none hidden, seconds (0 at cp 1).")
    rate: float = Field(description="attention_flops / attention_s, FLOP/s.")
    busbw: float = Field(description="comm_bytes_per_gpu / comm_s, bytes/s (0 at cp 1).")
    kv_share: float = Field(description="KV heads / query heads.")
    imbalance: float = Field(description="The busiest rank's pairs over the mean (1 zigzag).")
    round_attention_s: float = Field(description="What one transfer is set against: a ring's "
                                     "round of attention, attention_s / cp (the layer's "
                                     "attention for the all-gather and Ulysses), seconds.")
    send_s: float = Field(description="A ring's one K/V send, comm_s / (cp - 1) (the whole "
                          "collective for the all-gather and Ulysses), seconds.")
    crossover: float = Field(description="L* = per_rank x send_s / round_attention_s: for a "
                             "ring, per round, 2 x kv_share x rate / (imbalance x busbw); "
                             "for the all-gather, per layer, 2 x kv_share x (cp-1)/cp x "
                             "rate / (imbalance x busbw); the tokens per rank where they take "
                             "equal time at this state's rate and busbw (0 at cp 1).")
    ratio: float | None = Field(description="round_attention_s / send_s: 1 or more hides a "
                                "ring's sends (null at cp 1).")
    lab_crossover: float | None = Field(description="Where points cross, each run at its own "
                                        "block's rates (log-log between the two runs that "
                                        "bracket it), set as crossover sets them; null where "
                                        "no two do.")
    points: list[list[float]] = Field(description="The lab's own layer at L = 128 ... 131,072 "
                                      "tokens a rank: [L, attention s, communication s].")


class CPAnswer(BaseModel):
    tokens: int
    layout: Literal["contiguous", "zigzag", "allgather", "ulysses"]
    seq_len: int
    link: str
    gpu: str
    heads: int
    kv_heads: int = Field(description="KV heads (MLA: one per query head).")
    ranks: list[CPRank]
    total_pairs: int = Field(description="s(s+1)/2 of the tokens drawn.")
    busiest_pairs: float
    imbalance: float = Field(description="Busiest rank's pairs over the mean (1 = balanced).")
    collective: str = Field(description="ring p2p, all-gather or all-to-all.")
    steps: int = Field(description="Communication rounds per GPU per layer (forward).")
    kv_bytes_per_token: float = Field(description="K and V of one token in one layer, bytes.")
    comm_bytes_per_gpu: float = Field(description="Bytes each GPU sends per layer, forward, "
                                                  "one sequence of seq_len tokens.")
    comm_s: float = Field(description="Seconds of that communication on the link (α–β).")
    attention_s: float = Field(description="Busiest rank's attention forward per layer, s.")
    attention_flops: float = Field(description="Its FLOPs: 2·(d_qk + d_v)·heads per causal "
                                   "pair (QKᵀ and AV).")
    attention_flops_per_s: float = Field(description="The fused attention kernel's achieved "
                                         "rate at this block size, FLOP/s.")
    comm_bytes_per_s: float = Field(description="Bytes sent per GPU over the communication "
                                    "time: the link's rate as NCCL achieves it, latency "
                                    "included (0 without communication).")
    exposed_s: float = Field(description="Communication attention waits for, seconds.")
    kv_held_bytes: float = Field(description="K/V held at once per layer, this rank's block "
                                "included.")
    seq_imbalance: float = Field(description="Imbalance at seq_len.")
    activation_bytes_per_gpu: float = Field(description="Activations of all layers on one "
                                                        "GPU (selective recomputation).")
    activation_bytes_no_cp: float
    crossover: CPCrossover
