"""EP02's answer: data parallelism (replicas and their gradient all-reduce)."""

from pydantic import BaseModel, Field


class DataParallelPoint(BaseModel):
    link: str = Field(description="Link preset id.")
    kind: str = Field(description="nvlink, infiniband, ethernet, pcie (or infinity-fabric).")
    gpu: str = Field(description="GPU preset id timed on this link: the query's gpu where it "
                     "goes on the link, else the link's own (the H100 PCIe on PCIe, the H100 "
                     "SXM on NVLink 4 and the networks).")
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
    algorithm: str = Field(description="ring, nvls or tree (NCCL's pick).")
    bottleneck: str = Field(description="The link that bounds the all-reduce.")
    bucket_s: float = Field(description="One full bucket's all-reduce, seconds (without "
                            "overlap: the whole gradient's).")
    bucket_algorithm: str = Field(description="NCCL's algorithm for one bucket.")
    bucket_across: str = Field(description="NCCL's algorithm where the bucket crosses "
                               "servers (ring or tree, as bucket_algorithm); empty inside one "
                               "fabric.")
    backward_s: float = Field(description="The backward the buckets hide behind (the last "
                              "micro-batch's, 2/3 of its compute), seconds.")
    first_bucket_fill_s: float = Field(description="Seconds into that backward when the first "
                                       "bucket is full and the all-reduce stream can start (0 "
                                       "without overlap).")


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
    gpu: str = Field(description="GPU preset id timed (the answer's gpu).")
    gpu_name: str = Field(description="Its name.")
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
