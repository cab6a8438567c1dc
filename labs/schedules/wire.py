"""What a pipeline costs on the wire: the bytes at each stage boundary and their send time.

A pipeline sends only to its neighbours: at every boundary between consecutive model pieces
that live on different ranks, each micro-batch's activations go forward and their gradients
come back, one tensor each way of the same shape. Nothing else crosses a stage boundary.
"""

from __future__ import annotations

from labs.core.limits import MAX_DEGREE, MAX_MICRO_BATCH, MAX_SEQ_LEN
from labs.core.validate import WHOLE_SENTENCE, whole

MAX_HIDDEN = 1_048_576
MAX_BYTES_PER_VALUE = 8
MAX_SEND_BYTES = 1e12  # one send; 1 TB is far beyond any activation tensor
MIN_BANDWIDTH, MAX_BANDWIDTH = 1e6, 1e14  # bytes/s: 1 MB/s to 100 TB/s
MAX_LATENCY = 1.0  # seconds per send
MAX_FORWARD_SECONDS = 1e4


def boundary_bytes(seq_len: int, micro_batch: int, hidden: int, *, cp: int = 1, tp: int = 1,
                   bytes_per_value: int = 2) -> float:
    """Bytes one GPU sends across a stage boundary per micro-batch, in each direction.

    The tensor crossing a boundary is the layer output, s x b x h values: s·b·h·2 bytes in
    bf16 (Narayanan et al., 2021, "Efficient Large-Scale Language Model Training on GPU
    Clusters Using Megatron-LM", sec. 4.1: "bsh" elements per microbatch per direction).
    The backward sends its gradient, the same shape. With tensor parallelism the t GPUs of
    a stage hold the same output; Megatron's scatter/gather optimisation (sec. 4.1) has
    each send 1/t of it and all-gathers on the receiving side over NVLink, and with
    sequence parallelism (Korthikanti et al., 2022) the output is already split along the
    sequence, so either way each GPU's send is s·b·h·2/t. Context parallelism splits the
    sequence over cp ranks (each holds s/cp tokens), dividing it again.
    """
    s = whole("seq_len", seq_len, 1, MAX_SEQ_LEN, "sequence length", WHOLE_SENTENCE)
    b = whole("micro_batch", micro_batch, 1, MAX_MICRO_BATCH, "micro-batch size",
              WHOLE_SENTENCE)
    h = whole("hidden", hidden, 1, MAX_HIDDEN, "hidden size", WHOLE_SENTENCE)
    c = whole("cp", cp, 1, MAX_DEGREE, "context-parallel degree", WHOLE_SENTENCE)
    t = whole("tp", tp, 1, MAX_DEGREE, "tensor-parallel degree", WHOLE_SENTENCE)
    size = whole("bytes_per_value", bytes_per_value, 1, MAX_BYTES_PER_VALUE,
                 "bytes per value", WHOLE_SENTENCE)
    return s * b * h * size / (c * t)


def send_seconds(nbytes: float, bandwidth: float, latency: float) -> float:
    """Time of one point-to-point send: latency + bytes / bandwidth.

    The alpha-beta (latency-bandwidth) model of a message, Hockney, "The communication
    challenge for MPP: Intel Paragon and Meiko CS-2", Parallel Computing 20 (1994).
    """
    return latency + nbytes / bandwidth


def sends_per_rank(plan, owner: list[int]) -> tuple[int, ...]:
    """Sends each rank makes, counted from its actions in ``plan``.

    An F of piece k sends its output on if piece k+1 lives on another rank; a B or I of
    piece k sends the input gradient back if piece k-1 does. W sends nothing.
    """
    pieces = range(len(owner))
    onward = [k + 1 in pieces and owner[k + 1] != owner[k] for k in pieces]
    back = [k > 0 and owner[k - 1] != owner[k] for k in pieces]
    sends = {"F": onward, "B": back, "I": back, "W": [False] * len(owner)}
    return tuple(sum(sends[kind][k] for kind, _mb, _chunk, k in acts) for acts in plan)
