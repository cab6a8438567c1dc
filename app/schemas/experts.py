"""EP07's answer: expert parallelism (mixture-of-experts layers over EP ranks)."""

from pydantic import BaseModel, Field


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
    seconds_nonblocking: float = Field(
        description="Its time on the same leaves with a 1:1 spine (none oversubscribed), s: "
                    "above it, the spine slowed this group.")


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
    busbw: float = Field(description="The all-to-alls' effective rate, comm_bytes / comm_s "
                         "(latency included; not NCCL's bus bandwidth), bytes/s (0 at ep 1).")
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
