"""EP02's predict and decide drills (``LESSON_DRILLS["dp"]``)."""

from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import ms, pct
from labs.hardware.links import get_link

DP_16 = {"gpus": 16, "link": "ib-ndr", "nics_per_node": 2}


def _dp_16(field: str) -> float:
    return lab_value("dp", DP_16, field)


def _dp_16_speedup(comm_s: float) -> float:
    """The predict drill's speedup had its all-reduce taken ``comm_s`` (a wrong derivation)."""
    n, compute = _dp_16("gpus"), _dp_16("compute_s")
    return n * compute / (compute + comm_s)


def _flat_ring_s() -> float:
    """One flat ring of 16 at one NDR port's busBW, 2(N-1)/N of the gradients."""
    n = _dp_16("gpus")
    return 2 * (n - 1) / n * _dp_16("grad_bytes") / get_link("ib-ndr").ring_busbw


def _one_port_s() -> float:
    """The drill's hierarchical all-reduce with the servers' ring through one port, not two:
    the across-servers part (half the gradients, sent twice: 2 x 1/2) at one port's busBW,
    plus the NVLink ring inside a server."""
    inside = 2 * 7 / 8 * _dp_16("grad_bytes") / get_link("nvlink-4").ring_busbw
    return inside + _dp_16("grad_bytes") / get_link("ib-ndr").ring_busbw


DRILLS: tuple[Drill | Decide, ...] = (
    predict(
        "dp-predict-16-ib",
        "16 GPUs in 2 servers on InfiniBand NDR, two 400 Gb/s ports per server (48 GB/s "
        "busBW each; NVLink's ring inside a server 367 GB/s), weak scaling, 1,020 ms of "
        "compute a step (the page's 16,384 tokens per GPU), no overlap. Predict the "
        "speedup over one GPU.",
        "dp", {"gpus": 16, "link": "ib-ndr", "nics_per_node": 2}, "speedup", unit="×",
        hint="Speedup = N × compute / (compute + all-reduce). Inside a server: 2 × 7/8 × "
             "14 GB over NVLink; across: the servers' rings push 2 × ½ × 14 GB through "
             "the server's two ports.",
        explanation="{answer}×: inside, 2 × 7/8 × 14 GB ÷ 367 GB/s = 66.8 ms; across, "
                    "14 GB through 2 × 48 GB/s = 145.8 ms; the all-reduce 212.7 ms with "
                    "latency, and 16 × 1,020 ÷ (1,020 + 213).",
        mistakes=(
            Mistake("perfect", lambda: lab_value("dp", DP_16, "gpus"),
                    "that is perfect scaling. Without overlap the all-reduce adds to every "
                    "step: N × compute ÷ (compute + all-reduce)."),
            Mistake("flat-ring", lambda: _dp_16_speedup(_flat_ring_s()),
                    "that runs one flat ring of 16 over a server's port at 48 GB/s. Inside "
                    "a server NVLink carries the ring, and across, each server's two ports "
                    "carry half the bytes each."),
            Mistake("one-port", lambda: _dp_16_speedup(_one_port_s()),
                    "that sends the servers' share through one port. Each server has two, "
                    "which carry it at twice the rate."),
        )),
    decide(
        "dp-decide-exposed",
        "64 GPUs (8 servers) on 100 Gb/s Ethernet, one network port per server: the "
        "gradient all-reduce is exposed, added to every step. Which change cuts the "
        "exposed all-reduce the most?",
        "dp", "exposed_comm_s",
        (("ports", "Give each server 8 Ethernet ports instead of 1",
          {"gpus": 64, "link": "eth-100g", "nics_per_node": 8},
          "Eight ports carry eight rings at once: 8 × 12 GB/s of busBW out of each "
          "server; one ring through all 64 at that rate, 27.56 GB ÷ 96 GB/s, is the "
          "faster way. Exposed: {value}."),
         ("overlap", "Overlap the all-reduce with the backward pass, in buckets",
          {"gpus": 64, "link": "eth-100g", "overlap": "bucketed"},
          "Overlap hides only as much as the backward pass lasts; the bytes and the link "
          "are unchanged. Exposed: {value}."),
         ("compute", "Double the compute per step (a bigger micro-batch)",
          {"gpus": 64, "link": "eth-100g", "micro_batch": 8},
          "Without overlap the all-reduce waits for the backward pass whatever its "
          "length: the same bytes over the same link. Exposed: {value}."),
         ("ib", "Move to one InfiniBand NDR port (400 Gb/s) per server",
          {"gpus": 64, "link": "ib-ndr"},
          "One NDR port carries four times one 100 Gb/s Ethernet port, but it is still "
          "the one link out of each server the ring waits on, and eight Ethernet ports "
          "carry eight times. Exposed: {value}.")),
        best="min", fmt=ms,
        hint="The ring's time is bytes over the slowest link. Compare the bandwidth out "
             "of each server in each choice.",
        solution="{best}. Exposed all-reduce: 8 ports {ports}, one NDR port {ib}, "
                 "bucketed overlap {overlap}, double compute {compute}. The server's "
                 "bandwidth out, 800 Gb/s against 400, decides it.",
        reveals=("eight ports carry eight rings", "bandwidth out, 800 Gb/s against 400")),
    decide(
        "dp-decide-bound",
        "128 GPUs (16 servers) on 100 Gb/s Ethernet, one port per server, 4 sequences of "
        "4,096 tokens per GPU per step, no overlap: compute is under half the all-reduce. "
        "Which change raises the efficiency most?",
        "dp", "efficiency",
        (("accum", "Accumulate 4 micro-batches per step",
          {"gpus": 128, "link": "eth-100g", "microbatches": 4},
          "Four times the tokens per all-reduce: compute grows 4×, the one all-reduce a "
          "step does not. Efficiency {value}."),
         ("seq", "Double the sequence length to 8,192",
          {"gpus": 128, "link": "eth-100g", "seq_len": 8192},
          "Twice the tokens per GPU: compute doubles in the lab's 6·P·T (a real run's a "
          "little more, since attention grows with s) against the same all-reduce, and the "
          "activations double too. Efficiency {value}."),
         ("ports", "Give each server 2 Ethernet ports",
          {"gpus": 128, "link": "eth-100g", "nics_per_node": 2},
          "Twice the bandwidth out of each server halves the all-reduce's network part. "
          "Efficiency {value}."),
         ("overlap", "Overlap the all-reduce with backward, in buckets",
          {"gpus": 128, "link": "eth-100g", "overlap": "bucketed"},
          "Only the backward pass, two thirds of compute, can hide it; most of the "
          "all-reduce stays exposed. Efficiency {value}.")),
        best="max", fmt=pct,
        hint="Efficiency without overlap is ratio ÷ (1 + ratio), ratio = compute ÷ "
             "all-reduce. Which choice multiplies the ratio most?",
        solution="{best}. Efficiency: 4 micro-batches {accum}, 8,192 tokens {seq}, 2 ports "
                 "{ports}, bucketed overlap {overlap}. Accumulation multiplies compute by 4 "
                 "and leaves the once-a-step all-reduce alone; the others gain 2× or less.",
        reveals=("accumulation multiplies compute by 4",)),
)
