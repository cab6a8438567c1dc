"""EP02's predict and decide drills (``LESSON_DRILLS["dp"]``)."""

from app.charts.data_parallel import IB16_DRILL
from app.charts.units import fmt_link_gbs
from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import gb, ms, pct
from labs.data_parallel.lab import nccl_all_reduce
from labs.hardware.links import get_link

DP_16 = IB16_DRILL  # the bench keys its figures at this state to the drill
NVLINK_GBS = fmt_link_gbs(get_link("nvlink-4").ring_busbw)  # as step 2's list states it
# dp-decide-exposed's two options that change the link out of each server.
ETH_8_PORTS = {"gpus": 64, "link": "eth-100g", "nics_per_node": 8}
IB_1_PORT = {"gpus": 64, "link": "ib-ndr"}


def _ring(state: dict, answer: dict) -> str:
    """The ring's bytes a GPU over the busBW it runs at, then NCCL's latency, as the lab
    times the state's all-reduce (``labs.data_parallel.lab.nccl_all_reduce``, the collective
    its answer times): '27.56 GB ÷ 96 GB/s = 287.1 ms, plus 1.0 ms of NCCL's latency'."""
    t = nccl_all_reduce(answer["grad_bytes"], state["gpus"], get_link(state["link"]),
                        state.get("nics_per_node", 1))
    sent = answer["allreduce_bytes_per_gpu"]
    return (f"{sent / 1e9:.2f} GB ÷ {t.busbw / 1e9:g} GB/s = {ms(sent / t.busbw)}, plus "
            f"{ms(t.latency)} of NCCL's latency (step 4)")


def _dp_16(field: str) -> float:
    return lab_value("dp", DP_16, field)


def _dp_16_speedup(comm_s: float) -> float:
    """The predict drill's speedup had its all-reduce taken ``comm_s`` (a wrong derivation)."""
    n, compute = _dp_16("gpus"), _dp_16("compute_s")
    return n * compute / (compute + comm_s)


def _ring_at(busbw: float) -> float:
    """One ring of 16 at ``busbw``: 2(N-1)/N of the gradients (a wrong derivation where it is
    not the ring's slowest hop, the server's two ports)."""
    n = _dp_16("gpus")
    return 2 * (n - 1) / n * _dp_16("grad_bytes") / busbw


def _dp_16_explanation() -> str:
    """dp-predict-16-ib's worked solution, from the lab's answer for its state: one NCCL ring
    through the 16 GPUs at its slowest hop (labs.hardware.comm.nccl_collective, the function
    EP08 times the same all-reduce with)."""
    a = lab_value("dp", DP_16, lambda answer: answer)
    port, nv = get_link("ib-ndr").ring_busbw / 1e9, get_link("nvlink-4").ring_busbw / 1e9
    sent = a["allreduce_bytes_per_gpu"]
    return (f"{{answer}}×: the ring's slowest hop is the server's two ports, 2 × {port:g} = "
            f"{2 * port:g} GB/s (NVLink's {nv:g} GB/s is faster): 2 × 15/16 × 14 GB = "
            f"{sent / 1e9:.2f} GB ÷ {2 * port:g} GB/s = {sent / 2 / port / 1e6:.1f} ms, "
            f"{a['comm_s'] * 1e3:.1f} ms with NCCL's latency, and "
            f"16 × {a['compute_s'] * 1e3:,.0f} ÷ ({a['compute_s'] * 1e3:,.0f} + "
            f"{a['comm_s'] * 1e3:,.0f}).")


# dp-decide-crossover's state: step 3's 64 GPUs on one 100 Gb/s Ethernet port a server, whose
# T* step 8 works (round-17 cold reading of EP02, finding 8: dp-crossover-pcie re-ran step
# 8's worked T* for 4 GPUs, reading not understanding; which change moves T* needs the formula).
CROSS = {"gpus": 64, "link": "eth-100g"}


def tokens(value: float) -> str:
    return f"{value:,.0f} tokens"


def _cross(a: dict) -> str:
    """T* = ⅔ × (N−1)/N × rate ÷ busBW at a choice's state, worked with the busBW the page
    states (the ring's, ``nccl_all_reduce``), then the lab's T*, whose all-reduce adds NCCL's
    latency (``labs.data_parallel.lab.compute_to_comm``). Round-19 cold reading X, finding 6:
    it divided by the effective rate, latency folded in (23.98, 11.99, 12.00 GB/s for one
    link), which the page never names."""
    n, r = a["gpus"], a["ratio"]
    busbw = nccl_all_reduce(a["grad_bytes"], n, get_link(a["link"]), a["nics_per_node"]).busbw
    stated = 2 / 3 * (n - 1) / n * r["rate"] / busbw
    return (f"⅔ × {n - 1}/{n} × {r['rate'] / 1e12:.1f} TFLOP/s ÷ {busbw / 1e9:g} GB/s "
            f"= {tokens(stated)}; NCCL's latency adds "
            f"{100 * (r['crossover_tokens'] / stated - 1):.2f}%: {{value}}")


def _cross_solution(found: dict[str, float]) -> str:
    """dp-decide-crossover's worked solution: the right option's T* worked from the stated
    busBW as its feedback works it (round-20: the solution listed the lab's 18,458 alone),
    then the other options' T*."""
    ports = lab_value("dp", {**CROSS, "nics_per_node": 2}, lambda answer: answer)
    worked = _cross(ports).format(value=tokens(found["ports"]))
    return ("{best}. T* = ⅔ × (N−1)/N × rate ÷ busBW: a second port " + worked + ", half; "
            "128 GPUs {gpus}, 8,192 tokens {seq}, twice the model {model}. Of the four, only "
            "the busBW is in the formula whole (N only as (N − 1)/N); the sequence moves the "
            "tokens a GPU has, not the tokens it needs.")


# dp-decide-bound's state: 128 GPUs on one 100 Gb/s Ethernet port a server, no overlap.
BOUND = {"gpus": 128, "link": "eth-100g"}


def _hidden(a: dict) -> str:
    """What a bucketed state's backward hides, as EP02 step 5 derives it: the backward, two
    thirds of compute, less the time its first bucket takes to fill, when the all-reduce
    stream starts (round-21 cold reading P, finding 3: "two thirds of 1,020.3 ms" gave
    680.2 ms beside a hidden 678.9)."""
    return (f"its {ms(a['backward_s'])}, two thirds of {ms(a['compute_s'])} of compute, less "
            f"the {ms(a['first_bucket_fill_s'])} its first 25 MiB bucket takes to fill")


def _bound_overlap(a: dict) -> str:
    """dp-decide-bound's overlap option: bucketing lowers the efficiency here (round-14 cold
    reading of EP02-EP05, finding 5). Each bucket is its own all-reduce and pays NCCL's
    latency (``nccl_all_reduce`` of one full bucket, step 5's sum); the extra latencies add
    more all-reduce than the backward hides."""
    base = lab_value("dp", BOUND, lambda answer: answer)
    per = nccl_all_reduce(a["bucket_bytes"], BOUND["gpus"], get_link(BOUND["link"]),
                          1).latency
    extra = a["comm_s"] - base["comm_s"]
    each = f"{per * 1e3:.2f} ms"
    return (f"Worse: the {a['buckets']:,} buckets each pay NCCL's latency, {each} on this "
            f"ring over {BOUND['gpus'] // 8} servers (step 5's sum), so "
            f"{a['buckets'] - 1:,} more × {each} ≈ {ms(extra)} more all-reduce, more than the "
            f"{ms(a['overlapped_comm_s'])} the backward hides ({_hidden(a)}): "
            f"{ms(a['exposed_comm_s'])} stays exposed "
            f"against {ms(base['exposed_comm_s'])} without overlap. Efficiency falls from "
            f"{pct(base['efficiency'])} to {{value}}.")


def _bound_half(a: dict) -> str:
    """dp-decide-bound's fewer-GPUs option (step 4: "the bytes do not grow with N, and the
    latency barely does"): each GPU's bytes, 2·(N−1)/N of the gradients, over the same one
    port a server."""
    base = lab_value("dp", BOUND, lambda answer: answer)
    n, n0 = a["gpus"], base["gpus"]
    return (f"A ring's GPU sends 2·(N−1)/N of the gradients whatever N: 2 × {n - 1}/{n} × "
            f"{gb(a['grad_bytes'])} = {gb(a['allreduce_bytes_per_gpu'])}, against "
            f"{gb(base['allreduce_bytes_per_gpu'])} on {n0}, over the same one port out of "
            f"each server. The all-reduce barely shortens, {ms(base['comm_s'])} → "
            f"{ms(a['comm_s'])} (its latency, which grows with the ring's steps, shrinks a "
            f"little too), against the same {ms(a['compute_s'])} of compute. Efficiency {{value}}.")


# dp-decide-bound's options: (key, label, state, why).
BOUND_CHOICES = (
    ("accum", "Accumulate 4 micro-batches per step",
     {**BOUND, "microbatches": 4},
     "Four times the tokens per all-reduce: compute grows 4×, the one all-reduce a "
     "step does not. Efficiency {value}."),
    # Round-24 cold reading A, finding 7: "Double the sequence length" only doubled the
    # tokens per all-reduce, where accumulation quadruples them: it lost by inspection.
    ("half", "Train on 64 GPUs (8 servers) instead of 128, the same batch per GPU",
     {**BOUND, "gpus": BOUND["gpus"] // 2}, _bound_half),
    ("ports", "Give each server 2 Ethernet ports",
     {**BOUND, "nics_per_node": 2},
     lambda a: "Twice the bandwidth out of each server halves only the all-reduce's "
               f"network part: {ms(a['comm_s'])} against {ms(a['compute_s'])} of "
               "compute. Efficiency {value}."),
    ("overlap", "Overlap the all-reduce with backward, in buckets",
     {**BOUND, "overlap": "bucketed"}, _bound_overlap))


DRILLS: tuple[Drill | Decide, ...] = (
    decide(
        "dp-decide-crossover",
        "64 GPUs (8 servers) on 100 Gb/s Ethernet, one port a server, each GPU taking 4 "
        "sequences of 4,096 tokens a step: compute is under half the all-reduce, and the "
        "crossover T* (step 8) is over twice the 16,384 tokens a GPU has. Which one change "
        "halves T*?",
        "dp", "ratio.crossover_tokens",
        (("ports", "Give each server a second Ethernet port", {**CROSS, "nics_per_node": 2},
          lambda a: "Two ports carry two rings at once, twice the busBW out of each "
                    f"server, and T* falls with the busBW: {_cross(a)}, half."),
         ("gpus", "Double the GPUs to 128 (16 servers)", {**CROSS, "gpus": 128},
          lambda a: "T* depends on N only through (N − 1)/N, 127/128 against 63/64, and the "
                    "ring's busBW is still one port's: "
                    f"{_cross(a)}, a little more, not half."),
         ("seq", "Double the sequence length to 8,192 tokens", {**CROSS, "seq_len": 8192},
          lambda a: "Twice the tokens a GPU doubles its compute, which brings the state "
                    "nearer T*, but T* is a rate over a bandwidth, and neither changed: "
                    f"{_cross(a)}, the same."),
         ("model", "Train a model twice the size (28 GB of gradients)",
          {**CROSS, "model": "custom", "grad_bytes": 28e9},
          lambda a: "Twice the parameters double the FLOPs a token and the bytes "
                    f"all-reduced alike, so P cancels: {_cross(a)}, the same.")),
        best="min", fmt=tokens,
        solution=_cross_solution,
        reveals=("two ports carry two rings at once", "only the busBW is in the formula")),
    predict(
        "dp-predict-16-ib",
        "16 GPUs in 2 servers on InfiniBand NDR, two 400 Gb/s ports per server (48 GB/s "
        f"busBW each; NVLink's ring inside a server {NVLINK_GBS} GB/s), weak scaling, 1,020 ms "
        "of compute a step (the page's 16,384 tokens per GPU), no overlap. Predict the "
        "speedup over one GPU.",
        "dp", DP_16, "speedup", unit="×",
        hint="Speedup = N × compute / (compute + all-reduce). One ring through all 16: "
             "each GPU sends 2 × 15/16 × 14 GB, at the busBW of the ring's slowest hop, "
             "the server's two ports together or NVLink inside it.",
        explanation=_dp_16_explanation,
        mistakes=(
            Mistake("perfect", lambda: lab_value("dp", DP_16, "gpus"),
                    "that is perfect scaling. Without overlap the all-reduce adds to every "
                    "step: N × compute ÷ (compute + all-reduce)."),
            Mistake("nvlink", lambda: _dp_16_speedup(_ring_at(get_link("nvlink-4").ring_busbw)),
                    f"that runs the ring at NVLink's {NVLINK_GBS} GB/s. Every hop of a ring "
                    "carries the same bytes at once, so it runs at its slowest hop, out of the "
                    "server."),
            Mistake("one-port", lambda: _dp_16_speedup(_ring_at(get_link("ib-ndr").ring_busbw)),
                    "that sends the ring through one port. Each server has two, which carry "
                    "two rings at once, at twice the rate."),
        )),
    decide(
        "dp-decide-exposed",
        "64 GPUs (8 servers) on 100 Gb/s Ethernet, one network port per server: the "
        "gradient all-reduce is exposed, added to every step. Which change cuts the "
        "exposed all-reduce the most?",
        "dp", "exposed_comm_s",
        (("ports", "Give each server 8 Ethernet ports instead of 1", ETH_8_PORTS,
          lambda a: "Eight ports carry eight rings at once: 8 × "
                    f"{get_link('eth-100g').ring_busbw / 1e9:g} GB/s of busBW out of each "
                    "server, so the ring through all 64 runs at that rate: "
                    f"{_ring(ETH_8_PORTS, a)}. Exposed: {{value}}."),
         ("overlap", "Overlap the all-reduce with the backward pass, in buckets",
          {"gpus": 64, "link": "eth-100g", "overlap": "bucketed"},
          lambda a: "Overlap hides the all-reduce only while the backward runs: "
                    f"{ms(a['overlapped_comm_s'])}, {_hidden(a)}. In buckets over the same "
                    f"link the all-reduce takes {ms(a['comm_s'])}. Exposed: {{value}}."),
         ("compute", "Double the compute per step (a bigger micro-batch)",
          {"gpus": 64, "link": "eth-100g", "micro_batch": 8},
          lambda a: "Compute doubles to "
                    f"{ms(a['compute_s'])}, but without overlap the all-reduce waits for the "
                    "backward whatever its length: the same bytes over the same link. "
                    "Exposed: {value}."),
         ("ib", "Move to one InfiniBand NDR port (400 Gb/s) per server", IB_1_PORT,
          lambda a: "One NDR port carries four times one 100 Gb/s Ethernet port, but it is "
                    "still the one link out of each server the ring waits on, and eight "
                    f"Ethernet ports carry eight times: {_ring(IB_1_PORT, a)}. "
                    "Exposed: {value}.")),
        best="min", fmt=ms,
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
        BOUND_CHOICES,
        best="max", fmt=pct,
        solution="{best}. Efficiency: 4 micro-batches {accum}, 64 GPUs {half}, 2 ports "
                 "{ports}, bucketed overlap {overlap}. Accumulation multiplies compute by 4 "
                 "and leaves the once-a-step all-reduce alone; a second port halves only the "
                 "all-reduce's network part, half the GPUs barely shorten it (each GPU still "
                 "sends 2·(N−1)/N of the gradients), and bucketing here loses: its buckets' "
                 "latencies outgrow what backward hides.",
        reveals=("accumulation multiplies compute by 4",)),
)
