"""EP02, EP03, EP04, EP06 and EP07 answers: one cut each (DP, ZeRO, TP, CP, EP)."""

from typing import Literal

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
    ops: list[str] = Field(description="all_reduce, or all_gather + reduce_scatter with SP.")


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
    backward_comm_s: float = Field(description="Of comm_s, what the backward's exchanges add "
                                   "beyond the weight-gradient GEMMs they run beside.")
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
    collectives_per_layer: int = Field(description="4 all-reduces, or 8 with SP (4 all-gathers "
                                                   "+ 4 reduce-scatters).")
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


class DataParallelPoint(BaseModel):
    link: str = Field(description="Link preset id.")
    kind: str = Field(description="nvlink, infiniband, ethernet, pcie (or infinity-fabric).")
    gpus: int
    speedup: float = Field(description="Against one GPU (2 decimals).")
    efficiency: float = Field(description="speedup / N.")
    compute_s: float = Field(description="Compute seconds per GPU per step.")
    comm_s: float = Field(description="Every all-reduce of the step, hidden or not, seconds.")
    exposed_comm_s: float = Field(description="All-reduce the step waits for, seconds.")
    overlapped_comm_s: float = Field(description="All-reduce hidden behind backward, seconds.")
    step_s: float = Field(description="compute_s + exposed_comm_s.")
    allreduce_bytes_per_gpu: int = Field(description="2(N-1)/N x gradient bytes.")
    buckets: int
    algorithm: str = Field(description="ring, nvls, tree or hierarchical (NCCL's pick).")
    bottleneck: str = Field(description="The link that bounds the all-reduce.")
    bucket_s: float = Field(description="One full bucket's all-reduce, seconds (without "
                            "overlap: the whole gradient's).")
    bucket_algorithm: str = Field(description="NCCL's algorithm for one bucket.")
    bucket_across: str = Field(description="NCCL's algorithm for the bucket's part across "
                               "servers (ring or tree); empty inside one fabric.")


class DataParallelReplica(BaseModel):
    gpu: str
    total_bytes: int = Field(description="EP01 ledger of one replica, bytes per GPU.")
    state_bytes: int
    breakdown: dict[str, int]
    gpu_memory_bytes: int
    fits: bool


class DataParallelRatio(BaseModel):
    """Compute against communication for the state (EP02's ratio step)."""

    tokens_per_gpu: float = Field(description="Tokens one GPU computes per step: micro_batch x "
                                  "microbatches x seq_len (strong: global_batch x seq_len / N).")
    global_batch_tokens: float = Field(description="Tokens per step over all N GPUs.")
    flops_per_gpu: float = Field(description="6 x active parameters x tokens_per_gpu (Kaplan "
                                 "et al. 2020), FLOPs.")
    peak_flops: float = Field(description="The GPU's dense bf16 datasheet rate, FLOP/s.")
    achieved_share: float = Field(description="Its preset's measured matmul share of that peak "
                                  "(matmul_efficiency x matmul_sustain).")
    rate: float = Field(description="peak_flops x achieved_share, FLOP/s.")
    compute_s: float = Field(description="One GPU's compute per step, seconds.")
    allreduce_s: float = Field(description="The whole gradient's all-reduce, once per step, s.")
    busbw: float = Field(description="Bytes each GPU sends / allreduce_s, bytes/s (0 on 1 GPU).")
    crossover_tokens: float = Field(description="Tokens per GPU where compute equals the "
                                    "all-reduce: (2/3)(N-1)/N x rate / busbw (0 on 1 GPU).")
    ratio: float | None = Field(description="compute_s / allreduce_s (null on 1 GPU).")
    sweep: list[list[float]] = Field(description="[tokens per GPU, compute seconds] pairs.")


class DataParallelAnswer(DataParallelPoint):
    model: str
    model_name: str
    grad_bytes: float
    scaling: str
    overlap: str
    bucket_bytes: float
    nics_per_node: int
    global_batch: int
    seq_len: int
    micro_batch: int
    microbatches: int
    ratio: DataParallelRatio
    max_gpus: int = Field(description="Largest N on the curve (strong: the global batch).")
    curve_links: list[str]
    curve: list[DataParallelPoint] = Field(description="One entry per GPU count per link.")
    flat_ring: DataParallelPoint | None = Field(
        description="Scale-out links: a port per GPU and one flat ring (the textbook reading).")
    replica: DataParallelReplica
    assumptions: list[str]
class MoEGroupAnswer(BaseModel):
    kind: str = Field(description="tp, cp, dp, pp, ep or edp (expert data parallel).")
    size: int = Field(description="GPUs per group.")
    count: int = Field(description="Groups of this kind.")
    nodes_spanned: int = Field(description="Most nodes one group covers.")
    inside_node: bool = Field(description="Every group of this kind sits inside one node.")


class MoENetworkAnswer(BaseModel):
    kind: str = Field(description="tp, pp, dp, ep or edp: whose collective this is.")
    collective: str = Field(description="all_reduce, all_to_all or p2p.")
    what: str = Field(description="What it moves.")
    bytes_per_gpu: float = Field(description="Bytes each GPU sends, bytes.")
    seconds: float = Field(description="Its time as NCCL's model prices it, s.")
    bandwidth: float = Field(description="bytes_per_gpu / seconds: what the group's links "
                                         "give each GPU, bytes/s.")
    per_node: int = Field(description="Members of one group on a node.")
    nodes: int = Field(description="Nodes one group spans.")
    leaves: int = Field(description="Leaf switches one group spans.")
    tier: str = Field(description="Where it runs: gpu, nvlink, leaf or spine.")


class MoEGemmPoint(BaseModel):
    tokens: int = Field(description="Tokens reaching one expert.")
    efficiency: float = Field(description="Share of the GPU's BF16 peak its forward GEMMs "
                                          "reach.")


class MoEGemmAnswer(BaseModel):
    curve: list[MoEGemmPoint] = Field(description="A GPU's routed experts' GEMMs, one grouped "
                                                  "GEMM, 16 to 65,536 tokens an expert.")
    tokens_per_expert: float = Field(description="Mean token copies one routed expert "
                                                 "receives here: T x k x EP / E.")
    efficiency: float = Field(description="Its GEMMs' share of the BF16 peak.")
    shared_tokens: int | None = Field(description="Tokens the shared expert computes on one "
                                                  "GPU (all of them); None without one.")
    shared_efficiency: float | None = Field(description="Its GEMMs' share of the peak.")
    shared_s: float | None = Field(description="The shared expert's forward GEMMs, seconds; "
                                               "None without one.")
    alone: list[MoEGemmPoint] = Field(description="The same sweep with each expert's GEMMs "
                                                  "run alone (an ungrouped loop of kernels).")
    alone_efficiency: float = Field(description="The routed expert's GEMMs run alone: share "
                                                "of the BF16 peak.")
    matmul_rate: float = Field(description="The GPU's achieved matmul FLOP/s at a full wave.")
    hbm_rate: float = Field(description="The GPU's achieved HBM bandwidth, bytes/s.")


class MoEBalancePoint(BaseModel):
    skew: float
    loss: float = Field(description="The balance loss over alpha, E x sum f_i P_i (1 balanced).")
    slowdown: float = Field(description="The layer's time over its balanced time.")


class MoERankMapAnswer(BaseModel):
    group: str = Field(description="The kind of group coloured.")
    gpus_per_node: int
    group_of_rank: list[int] = Field(description="Group index of each global rank (rank r on "
                                                 "node r // gpus_per_node).")


class EPCrossover(BaseModel):
    """The experts' GEMMs against the time to move their token copies, and the expert width
    where they meet (EP07 step 11; labs.experts.crossover). Uniform routing."""

    width: int = Field(description="f: the expert's FFN width (over expert-TP).")
    copies: int = Field(description="tokens x top_k: the copies each GPU computes.")
    compute_s: float = Field(description="The slowest GPU's expert GEMMs, forward, seconds.")
    comm_s: float = Field(description="Dispatch + combine, none hidden, seconds (0 at ep 1).")
    comm_bytes: float = Field(description="The slowest GPU's bytes over both all-to-alls.")
    rate: float = Field(description="copies x matrices x 2 x hidden x width / compute_s, "
                        "FLOP/s.")
    busbw: float = Field(description="comm_bytes / comm_s, bytes/s (0 at ep 1).")
    matrices: int = Field(description="3 for a gated expert (up, gate, down), 2 without.")
    crossover: float = Field(description="f* = width x comm_s / compute_s: with NCCL's "
                             "all-to-all and gated experts (2/3) x (ep-1)/ep x rate / busbw; "
                             "the width where the GEMMs equal the all-to-alls (0 at ep 1).")
    ratio: float | None = Field(description="compute_s / comm_s (null at ep 1).")
    points: list[list[float]] = Field(description="The lab's own layer with experts 256 ... "
                                      "32,768 wide: [f, compute s, communication s].")


class MoEAnswer(BaseModel):
    model: str
    link: str = Field(description="Cluster preset id.")
    ep_dispatch: str = Field(description="How the tokens travel: alltoall or deepep.")
    world_size: int
    tp: int
    pp: int
    cp: int
    dp: int = Field(description="world / (TP x PP x CP).")
    ep: int
    etp: int
    expert_dp: int = Field(description="TP x CP x DP / (EP x expert-TP).")
    params: int = Field(description="Total parameters: what memory holds.")
    active_params: int = Field(description="Parameters one token computes with.")
    params_per_gpu: int = Field(description="Parameters one GPU of the heaviest stage holds.")
    experts_per_gpu: int
    ep_group: list[int] = Field(description="Global ranks of the first EP group.")
    ep_per_node: int = Field(description="EP group members sharing one node.")
    tokens_per_expert: list[int] = Field(description="Token copies routed to each expert over "
                                                     "one EP group, one MoE layer.")
    dropped_per_expert: list[int] = Field(description="Of those, dropped over capacity.")
    capacity: int | None = Field(description="Tokens per expert over the EP group (None: no "
                                             "limit).")
    dropped_fraction: float
    max_over_mean: float = Field(description="Busiest expert's tokens / the mean.")
    tokens_per_gpu: list[int] = Field(description="Token copies each EP rank computes.")
    gpu_max_over_mean: float
    dispatch_bytes_per_gpu: list[int] = Field(description="Bytes each EP rank receives in the "
                                                          "dispatch all-to-all (and sends back "
                                                          "in the combine).")
    dispatch_sent_bytes_per_gpu: list[int] = Field(description="Bytes each EP rank sends in "
                                                               "the dispatch.")
    dispatch_s_per_gpu: list[float]
    compute_s_per_gpu: list[float]
    dispatch_s: float = Field(description="The dispatch all-to-all: its slowest member.")
    combine_s: float = Field(description="The combine all-to-all (same bytes, reversed).")
    compute_s: float = Field(description="The slowest GPU's expert compute.")
    layer_s: float = Field(description="One MoE layer's forward: dispatch + compute + combine, "
                                       "each phase ending with its slowest GPU.")
    balanced_layer_s: float = Field(description="The same with uniform routing.")
    slowdown: float = Field(description="layer_s / balanced_layer_s.")
    slowest_gpu: int
    groups: list[MoEGroupAnswer]
    balance_loss: float = Field(description="The Switch balance loss over alpha at this "
                                            "routing: E x sum f_i P_i, 1 when balanced.")
    balance: list[MoEBalancePoint] = Field(description="The same and the layer's slowdown "
                                                       "at skews 0, 0.1 .. 1.")
    gemm: MoEGemmAnswer
    crossover: EPCrossover
    leaf_nodes: int = Field(description="Nodes under one leaf switch (per rail).")
    oversubscription: float = Field(description="Leaf-to-spine oversubscription, r in r:1.")
    network: list[MoENetworkAnswer] = Field(description="Each kind of group's collective on "
                                                        "the cluster's links.")
    rank_map: MoERankMapAnswer | None = Field(description="None above 4,096 GPUs.")
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
    crossover: float = Field(description="L* = per_rank x comm_s / attention_s: for a ring or "
                             "all-gather 2 x kv_share x (cp-1)/cp x rate / (imbalance x "
                             "busbw); the tokens per rank where attention equals the "
                             "transfers at this state's rate and busbw (0 at cp 1).")
    ratio: float | None = Field(description="attention_s / comm_s (null at cp 1).")
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
    kv_held_bytes: float = Field(description="Other ranks' K/V held at once per layer.")
    seq_imbalance: float = Field(description="Imbalance at seq_len.")
    activation_bytes_per_gpu: float = Field(description="Activations of all layers on one "
                                                        "GPU (selective recomputation).")
    activation_bytes_no_cp: float
    crossover: CPCrossover
class ZeroStageBar(BaseModel):
    dp: int
    zero: int
    state_bytes: int
    total_bytes: int
    breakdown: dict[str, int]
class ZeroTransfer(BaseModel):
    collective: str
    moves: str
    phase: Literal["forward", "backward"] = Field(description="The pass it hides behind.")
    bytes: int = Field(description="Bytes each GPU sends per step.")
    seconds: float
    algorithm: str
class ZeroTraffic(BaseModel):
    zero: int
    bytes: int = Field(description="Wire bytes per GPU per step.")
    seconds: float = Field(description="Time on the link per step.")
    exposed_seconds: float = Field(description="Part that does not hide behind compute.")
    hidden_seconds: float
    ratio_to_zero0: float | None
    transfers: list[ZeroTransfer]
class ZeroRecompute(BaseModel):
    recompute: str
    activation_bytes: int
    total_bytes: int
    compute_seconds: float
    extra_compute: float = Field(description="Compute over no recomputation, as a fraction.")
    fits: bool
class ZeroOffload(BaseModel):
    gpu_bytes_without: int
    gpu_bytes_with: int
    host_bytes_per_gpu: int
    host_bytes_per_node: int
    pcie_bytes: int = Field(description="Gradients down and weights up, per GPU per step.")
    pcie_seconds: float
    adam_bytes: int = Field(description="CPU Adam's host-memory traffic per GPU: 28 B per "
                            "parameter of its shard (read fp32 weight, gradient, m, v; write "
                            "weight, m, v).")
    adam_seconds: float = Field(description="CPU Adam: the node's GPUs' adam_bytes over the "
                                "node's host memory bandwidth.")
    host_memory_bandwidth: float = Field(description="A node's host memory bandwidth, bytes/s "
                                         "(DGX H100: 2 x 8 channels of DDR5-4800).")
    exposed_seconds: float = Field(description="Gradients' overrun of backward + CPU Adam + "
                                   "the weights' upload.")
    delayed_exposed_seconds: float = Field(description="The same with ZeRO-Offload's one-step "
                                           "delayed parameter update (CPU Adam and upload "
                                           "beside the next step's compute).")
    download_hidden: bool
class DeepSpeedColumn(BaseModel):
    gpu_bytes: int = Field(description="DeepSpeed's estimate per GPU.")
    cpu_bytes_per_node: int = Field(description="DeepSpeed's estimate of CPU RAM per node.")
    largest_layer_params: int
    num_gpus_per_node: int
    num_nodes: int
class ZeroCrossover(BaseModel):
    """The chosen stage's communication against the step's compute (EP03 step 5)."""

    tokens_per_gpu: int = Field(description="micro_batch x seq_len.")
    compute_s: float = Field(description="The step's compute, op by op, seconds.")
    comm_s: float = Field(description="The stage's collectives in all, seconds.")
    comm_bytes: int = Field(description="Bytes each GPU sends: k(D-1)/D x 2P.")
    busbw: int = Field(description="comm_bytes / comm_s, bytes/s.")
    rate: int = Field(description="6 x params x tokens / compute_s, FLOP/s.")
    factor: float = Field(description="k/3: 2/3 for stages 0-2, 1 for ZeRO-3.")
    crossover_tokens: float = Field(description="factor x (D-1)/D x rate / busbw: tokens per "
                                    "GPU where compute equals the stage's communication.")
    ratio: float | None = Field(description="compute_s / comm_s (null on one GPU).")
    sweep: list[list[float]] = Field(description="[tokens per GPU, compute seconds] pairs.")


class ZeroAnswer(BaseModel):
    model_name: str
    recipe: str
    params: int
    bytes_per_param: float
    dp: int
    zero: int
    offload: bool
    nodes: int
    cluster: str
    fsdp_name: str = Field(description="PyTorch FSDP's name for this ZeRO stage.")
    breakdown: dict[str, int] = Field(description="Bytes per GPU, by component.")
    total_bytes: int = Field(description="Bytes per GPU, every component.")
    state_bytes: int = Field(description="Weights, gradients and optimizer state per GPU.")
    gpu_memory_bytes: int
    fits: bool
    traffic_bytes: int = Field(description="Wire bytes per GPU per step at this stage.")
    traffic_seconds: float
    exposed_seconds: float
    compute_seconds: float
    step_seconds: float
    mfu: float
    host_bytes_per_node: int = Field(description="Host RAM per node (optimizer offload).")
    stages: list[ZeroStageBar]
    traffic: list[ZeroTraffic]
    recompute: list[ZeroRecompute]
    offload_plan: ZeroOffload
    crossover: ZeroCrossover
    deepspeed: dict[str, DeepSpeedColumn] = Field(
        description="DeepSpeed's estimators for stages 2 and 3 (keys stage2, stage3).")
