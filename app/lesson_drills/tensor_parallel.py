"""EP04's predict and decide drills (``LESSON_DRILLS["tp"]``)."""

from app.charts.tensor_parallel import MODEL_70B
from app.charts.units import fmt_busbw, fmt_bytes
from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import pct
from labs.hardware.links import get_link

# EP04's drills quote the lab's figures for their states, read when a drill is answered
# (lab_value: the same query model, run and to_api as GET /api/tp), never typed in.
# The drill asks the efficiency per step, the figure the bench's headline and efficiency chart
# draw (round-12 cold reading of EP04, finding 2: it answered the per-layer 75.8% beside the
# bench's 75.9%); at MODEL_70B the bench holds it until the drill is answered.
TP_GOOD, TP_70B = {"tp": 8}, {"model": MODEL_70B, "tp": 8}
# The decide's two link options state their rates, the H800's NVLink's and NDR's a port, and
# step 4's body teaches a ring's busBW across nodes (the node's ports x a port's): the choice
# is settled on what EP02 and EP04 teach, not on the only option with figures (round-14 cold
# reading of EP04, finding 7; round 16, finding 4: the ports rule was only in a closed note).
# Not PCIe 5.0 between the H100s: an SXM module's GPUs talk over NVLink, and PCIe only to the
# host, so the lab refuses that pairing (issue 36, error 6; labs.hardware.links.peer_links).
H800_NVLINK, NDR = get_link("nvlink-4-h800"), get_link("ib-ndr")
SPAN_NODE = 2  # GPUs (and NDR ports) a node in the span option


def tp_figures(params: dict) -> dict:
    return lab_value("tp", params, lambda answer: answer)


ALGORITHMS = {"nvls": "NVLS", "ring": "a ring", "tree": "a tree",
              "direct": "direct"}


def _busbw(answer: dict) -> str:
    name = ALGORITHMS.get(answer["algorithm"], answer["algorithm"])
    return f"{fmt_busbw(answer['bus_bandwidth'])} ({name})"


def tp_70b_estimate() -> float:
    """The page's first-order figure for 70B: 405B's layer with compute ÷ 4 (h²) and the
    bytes ÷ 2 (h)."""
    big = tp_figures(TP_GOOD)
    return (big["single_gpu_s"] / 8 / 4) / (big["compute_s"] / 4 + big["comm_s"] / 2)


def _tp_swapped() -> float:
    """405B's layer with compute ÷ 2 and the bytes ÷ 4: the h and h² swapped (a wrong
    derivation)."""
    big = tp_figures(TP_GOOD)
    return (big["single_gpu_s"] / 8 / 2) / (big["compute_s"] / 2 + big["comm_s"] / 4)


def tp_70b_band() -> tuple[float, float]:
    """Round-5b cold reading of EP04, item 5: at 10% tp-predict-70b took 70% to 82%, and 70%
    follows from no derivation. A guess counts from the lab's figure to the page's own
    first-order estimate, two points either side (73.8% to 83%)."""
    ends = (100 * tp_figures(TP_70B)["step_efficiency"], 100 * tp_70b_estimate())
    return min(ends) - 2, max(ends) + 2


def tp_70b_worked() -> str:
    """From 405B's layer: compute ÷ 4 (h²), bytes ÷ 2 (h), then what the lab adds."""
    big, small = tp_figures(TP_GOOD), tp_figures(TP_70B)
    estimate = tp_70b_estimate()
    return (f"{{answer}}%. From 405B's layer (one GPU {big['single_gpu_s'] * 1e3:.2f} ms ÷ 8 "
            f"against {big['compute_s'] * 1e3:.2f} ms of compute and "
            f"{big['comm_s'] * 1e3:.2f} ms of collectives), compute shrinks 4× and the bytes "
            f"2×, which gives about {100 * estimate:.0f}%. The lab gives less: 70B's narrower "
            f"GEMMs run a little slower ({small['gemm_tflops']} against {big['gemm_tflops']} "
            f"TFLOP/s), and NCCL reaches a lower busBW on the half-size tensor "
            f"({small['bus_bandwidth'] / 1e9:.0f} against {big['bus_bandwidth'] / 1e9:.0f} "
            "GB/s), since its fixed start-up time weighs more. Over the whole step (every "
            "layer, the embedding and the output layer) one GPU takes "
            f"{small['single_gpu_step_s'] * 1e3:,.1f} ms ÷ 8 against "
            f"{(small['step_compute_s'] + small['step_comm_s']) * 1e3:,.1f} ms at t = 8.")


def link_why(template: str):
    """The why of a choice whose TP group crosses a slower link than TP_GOOD's NVLink node:
    ``template`` with the lab's busBW (``busbw``) and one all-reduce (``collective``) for
    the choice and for NVLink (``nvlink``, ``nvlink_collective``), the choice's compute a
    layer (``compute``), and the drill's ``{value}`` left for it to fill."""
    def why(answer: dict) -> str:
        good = tp_figures(TP_GOOD)
        return template.format(
            busbw=_busbw(answer), nvlink=_busbw(good), rate=fmt_busbw(answer["bus_bandwidth"]),
            bytes=fmt_bytes(answer["collective_sent_bytes"]),
            collective=f"{answer['collective_s'] * 1e3:.2f} ms",
            nvlink_collective=f"{good['collective_s'] * 1e3:.2f} ms",
            comm=f"{answer['comm_s'] * 1e3:.2f} ms",
            compute=f"{answer['compute_s'] * 1e3:.2f} ms", value="{value}")
    return why


# Nodes of 2: the engine's algorithm and busBW across the four nodes, against NVLink's. Not
# nodes of 4: TP8 across two of them ran at 75.9%, tp-predict-70b's answer on the same page
# (round-13 cold reading of EP04, finding 3).
tp_span_why = link_why(
    # Round-20 cold reading P, finding 8: the working step 4 teaches, ports to ms.
    f"The ring crosses each node on its {SPAN_NODE} NDR ports, {SPAN_NODE} × "
    f"{NDR.ring_busbw / 1e9:g} = {SPAN_NODE * NDR.ring_busbw / 1e9:g} GB/s; NCCL's latency "
    "brings it to {busbw}, against {nvlink} inside one NVLink node, where the switch "
    "adds. One all-reduce takes {bytes} ÷ {rate} = {collective} against {nvlink_collective}; "
    "a layer's collectives that do not hide, {comm}, beside {compute} of compute: {value}.")
# The H800: the H100's chip on NVLink 4 as export rules cut it, the same bytes at a lower busBW
# (its NVLS all-reduce busBW, stated in the option: round-20 cold reading P, finding 8).
tp_h800_why = link_why(
    f"Every layer's all-reduces now cross the H800's cut NVLink: its measured "
    f"{H800_NVLINK.allreduce_busbw / 1e9:.0f} GB/s falls to {{busbw}} with NCCL's latency, "
    "against the H100's {nvlink}. One takes {bytes} ÷ {rate} = {collective} against "
    "{nvlink_collective}; a layer's collectives that do not hide, {comm}, beside {compute} of "
    "compute: {value}.")


def tp_half_why(answer: dict) -> str:
    """TP 4: a GPU's share of a layer's GEMMs doubles (h²/t), the bytes it sends barely move
    (2·(t − 1)/t of the activations). Not sequence parallelism: its 86.0% is step 5's answer
    (round-14 cold reading of EP04, finding 2)."""
    good = tp_figures(TP_GOOD)
    return (f"Each GPU now computes a quarter of every layer, not an eighth (compute "
            f"{good['compute_s'] * 1e3:.2f} → {answer['compute_s'] * 1e3:.2f} ms a layer), "
            "while an all-reduce sends 2 × 3/4 of the activations where t = 8 sent 2 × 7/8 "
            f"(collectives {good['comm_s'] * 1e3:.2f} → {answer['comm_s'] * 1e3:.2f} ms a "
            "layer): a smaller share of the time goes to communication, {value}.")


DRILLS: tuple[Drill | Decide, ...] = (
    predict(
        "tp-predict-70b",
        "If the model were Llama 3.1 70B (hidden size 8,192, half of 405B's 16,384), still "
        "TP8 in the NVLink node, what would its efficiency per step be, in %? (The bench "
        "holds 70B's efficiency until you answer.)",
        "tp", TP_70B, "step_efficiency", unit="%", scale=100,
        hint="Compute per layer grows with h², the bytes all-reduced with h: a smaller "
             "model spends a larger share of its time communicating.",
        explanation=tp_70b_worked, band=tp_70b_band,
        mistakes=(
            Mistake("same-as-405b", lambda: 100 * tp_figures(TP_GOOD)["step_efficiency"],
                    "that is 405B's efficiency, as if compute and communication shrank "
                    "alike. Halving h cuts a layer's compute 4× (it grows with h²) but the "
                    "bytes all-reduced only 2× (they grow with h)."),
            Mistake("better", lambda: 100 * _tp_swapped(),
                    "that has the smaller model communicating less of its time. Compute "
                    "shrinks with h² (4×), the bytes only with h (2×): communication takes a "
                    "larger share."),
        )),
    decide(
        "tp-decide-efficiency",
        "Llama 3.1 405B runs TP8 inside an NVLink node. Which change costs the most TP "
        "efficiency?",
        "tp", "efficiency",
        (("h800", f"H800s in place of the H100s: the same chip, its NVLink cut by export "
                  f"rules ({H800_NVLINK.bandwidth / 1e9:.0f} GB/s a direction; an all-reduce "
                  f"with NVLS measured at {H800_NVLINK.allreduce_busbw / 1e9:.0f} GB/s of "
                  "busBW)",
          {"tp": 8, "gpu": "h800"}, tp_h800_why),
         ("span", f"Nodes of {SPAN_NODE} GPUs, so TP8 spans four nodes over InfiniBand NDR "
                  f"(a port per GPU: {NDR.bandwidth / 1e9:.0f} GB/s a direction, "
                  f"{NDR.ring_busbw / 1e9:.0f} GB/s of ring busBW measured)",
          {"tp": 8, "gpus_per_node": SPAN_NODE}, tp_span_why),
         ("tp4", "Halve the TP group: TP4 inside the node", {"tp": 4}, tp_half_why),
         ("long", "Train on 8,192-token sequences instead of 4,096",
          {"tp": 8, "seq_len": 8192},
          "Compute and the bytes sent both double; attention grows a little faster: "
          "{value}.")),
        best="min", fmt=pct,
        solution="{best}. TP efficiency: across four nodes {span}, the H800's NVLink "
                 "{h800}, TP4 {tp4}, longer sequences {long}. TP needs the fastest "
                 "link on every GPU of its group.",
        reveals=("TP needs the fastest link on every GPU",)),
)
