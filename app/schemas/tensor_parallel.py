"""EP04's answer: tensor parallelism (Megatron's split of each layer)."""

from pydantic import BaseModel, Field


class TPCostRow(BaseModel):
    tp: int
    efficiency: float = Field(description="Per layer: one GPU's time / (t x the group's time).")
    speedup: float
    step_efficiency: float = Field(description="The same for a whole step (every layer, "
                                               "embedding and output layer).")
    compute_s: float = Field(description="Seconds of compute per layer per step per GPU.")
    comm_s: float = Field(description="Seconds of exposed collectives per layer per step.")
    gemm_rate: float = Field(description="FLOP/s the layer's GEMMs reach on one GPU at this "
                                         "t (narrower matrices run slower).")
    comm_bytes: float = Field(description="Bytes each GPU sends per layer per step.")
    bottleneck: str = Field(description="The link that bounds the collectives.")


class TPSweepRow(TPCostRow):
    memory_per_gpu_bytes: int | None = Field(
        description="The EP01 ledger at this t; None where Megatron refuses it (KV heads).")


class TPCollective(BaseModel):
    model_config = {"populate_by_name": True}

    pass_: str = Field(alias="pass", description="forward or backward.")
    at: str = Field(description="The matrix it follows or precedes.")
    ops: list[str] = Field(description="all_reduce; with SP all_gather + reduce_scatter "
                           "forward, and backward all_gather (dY), all_gather (the input "
                           "again) + reduce_scatter: as many, summed, as "
                           "collectives_per_layer.")


class SeqSplitKernel(BaseModel):
    kernel: str = Field(description="A memory-bound kernel sequence parallelism splits: norms "
                                    "(the layer's two) or bias-dropout-add (its two residual "
                                    "adds).")
    forward_bytes: float = Field(description="Bytes it reads and writes a layer, forward.")
    backward_bytes: float = Field(description="Bytes it reads and writes a layer, backward.")


class BackwardGemm(BaseModel):
    gemm: str = Field(description="The backward kernel a TP exchange runs beside, e.g. "
                                  "qkv.wgrad (its weight-gradient GEMM).")
    seconds: float = Field(description="That GEMM's seconds: the exchange is exposed only "
                                       "by what it takes beyond them (0: it hides nothing "
                                       "there, the exchange blocks).")


class TPShapes(BaseModel):
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    gated_mlp: bool
    heads_per_gpu: int
    kv_heads_per_gpu: int = Field(description="One replica each once t exceeds the KV heads.")
    ffn_per_gpu: int
    qkv_columns: int
    qkv_columns_per_gpu: int


class TPCrossover(BaseModel):
    """The layer's compute against the time to move its TP collectives' bytes, and the hidden
    size per GPU where they meet (EP04 step 6; labs.tensor_parallel.crossover)."""

    per_gpu: float = Field(description="h / t: the hidden size each GPU of the group holds.")
    tokens: int = Field(description="seq_len x micro_batch (they cancel in the crossover).")
    compute_s: float = Field(description="The layer's kernels on one GPU, forward + backward, "
                             "seconds.")
    comm_s: float = Field(description="The layer's TP collectives one after another, none "
                          "hidden, seconds (0 at t = 1).")
    comm_bytes: int = Field(description="Bytes each GPU sends per layer.")
    flops: float = Field(description="The layer's model FLOPs on one GPU of the group.")
    rate: int = Field(description="flops / compute_s, FLOP/s.")
    busbw: int = Field(description="comm_bytes / comm_s, bytes/s (0 at t = 1).")
    k: float = Field(description="FLOPs per token per layer on one GPU x t / (6 h^2): the "
                     "layer's weights over h^2, its attention scores counted in.")
    k_scores: float = Field(description="Of k, the attention scores' share: every (query, "
                            "key) pair of the sequence, as Megatron's FLOP count has it.")
    seq_len: int = Field(description="s, the tokens of a sequence: k_scores = 2 s / h.")
    beta: float = Field(description="Bytes sent per token per unit of h: 16(t-1)/t for 4 "
                        "all-reduces, 20(t-1)/t with sequence parallelism.")
    crossover: float = Field(description="(h/t)* = beta x rate / (6 k busbw): the hidden size "
                             "per GPU where compute equals the collectives (0 at t = 1).")
    crossover_degree: float | None = Field(description="h / (h/t)*: the TP degree where they "
                                           "meet at this rate and busBW (null at t = 1).")
    ratio: float | None = Field(description="compute_s / comm_s (null at t = 1).")
    points: list[list[float]] = Field(description="The lab's own op-level figures at each "
                                      "timed t > 1: [t, h/t, compute s, communication s].")


class TensorParallelAnswer(BaseModel):
    model: str
    gpu: str
    tp: int
    sp: bool
    topology: str = Field(description="Where the TP group's GPUs talk.")
    efficiency: float = Field(description="Per layer: speedup / t.")
    speedup: float = Field(description="Per layer: one GPU's time / the group's time.")
    compute_s: float = Field(description="Seconds of compute per layer per step per GPU "
                                         "(forward + backward), a t-th of one GPU's.")
    comm_s: float = Field(description="Seconds of the 4 blocking collectives per layer per "
                                      "step.")
    comm_bytes: float = Field(description="Bytes each GPU sends per layer per step.")
    collective_s: float = Field(description="Seconds of one f or g exchange (an all-reduce, or "
                                "with SP a reduce-scatter plus an all-gather) as NCCL runs it.")
    collective_sent_bytes: float = Field(description="Bytes each GPU sends in that exchange: "
                                         "2(t-1)/t of the tensor.")
    bus_bandwidth: float = Field(description="Bytes/s that exchange reaches: its sent bytes "
                                 "over its seconds (NCCL's bus bandwidth at this size, latency "
                                 "included); 0 at t = 1.")
    forward_comm_s: float = Field(description="Of comm_s, the forward's exchanges, which block.")
    forward_compute_s: float = Field(description="Of compute_s, the forward's kernels: what "
                                     "its blocking exchanges are set against.")
    backward_comm_s: float = Field(description="Of comm_s, what the backward's exchanges add "
                                   "beyond the weight-gradient GEMMs they run beside.")
    backward_beside: list[BackwardGemm] = Field(
        description="Each backward exchange's GEMM, the one it runs beside (its weight-"
                    "gradient GEMM), in order: backward_comm_s is the sum of what each "
                    "exchange outlasts its GEMM by.")
    seq_split_bytes: float = Field(description="Bytes the kernels sequence parallelism splits "
                                   "along the sequence (the norms and the residual adds) "
                                   "read and write on one GPU a layer, forward + backward: "
                                   "all the tokens' without SP, s/t of them with it.")
    seq_split_s: float = Field(description="Their seconds: memory-bound, the bytes at the "
                               "GPU's achieved HBM rate.")
    seq_split_kernels: list[SeqSplitKernel] = Field(
        description="seq_split_bytes kernel by kernel (labs.model.ops: the layer's two norms, "
                    "its two residual adds), forward and backward.")
    single_gpu_s: float = Field(description="One layer's step on one GPU.")
    step_efficiency: float
    step_speedup: float
    step_compute_s: float = Field(description="Seconds of compute per step (one micro-batch).")
    gemm_rate: float = Field(description="FLOP/s the layer's GEMMs reach on one GPU at t.")
    gemm_tflops: int = Field(description="The same in whole TFLOP/s, as the lesson quotes it.")
    step_comm_s: float
    step_comm_bytes: float
    single_gpu_step_s: float
    collective_bytes: float = Field(description="The tensor of each collective: s·b·h·2.")
    collectives_per_layer: int = Field(description="The TP collectives a layer runs per step, "
                                       "as the lab times them: 4 all-reduces, or 10 with SP "
                                       "(forward 2 all-gathers + 2 reduce-scatters; backward "
                                       "2 all-gathers of dY, 2 all-gathers of each column-"
                                       "split matrix's input again for its weight gradient, "
                                       "2 reduce-scatters).")
    collectives: list[TPCollective]
    algorithm: str
    bottleneck: str
    memory_per_gpu_bytes: int = Field(description="The EP01 ledger's total per GPU (training).")
    memory_breakdown: dict[str, int]
    gpu_memory_bytes: int
    fits: bool
    shapes: TPShapes
    sweep: list[TPSweepRow] = Field(description="The chosen link or cluster, against t.")
    links: dict[str, list[TPCostRow]] = Field(description="Each compared link alone, against t.")
    crossover: TPCrossover
    assumptions: list[str]
