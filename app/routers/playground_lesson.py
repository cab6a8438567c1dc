"""EP12's lesson states: the states its steps link to, with the JSON their prose quotes
(``facts``), and the TP ring's time at one of them, term by term, which step 5 derives
(``tp_ring``)."""

from functools import lru_cache

from app.routers.playground_panels import PlaygroundQuery
from app.routers.playground_state import run, to_api
from labs.hardware.nccl import nccl_time

SEED: dict = {}  # the defaults: Llama 3.1 70B on 32 H100s as TP8 x PP2 x DP2
ALL = {"show_memory": "ledger", "show_pipeline": "gantt", "show_recipe": "all"}


def step_state(**params) -> dict:
    ran = run(PlaygroundQuery(**params))
    return {"params": params, "result": ran, "api": to_api(ran)}


@lru_cache(maxsize=1)
def facts() -> dict:
    """The states the lesson links to, with the JSON its prose quotes (tests/app/test_prose)."""
    return {
        "seed": step_state(show_memory="ledger"),
        # Step 1's move: the worked plan at twice the tokens, EP01's ledger and EP08's audit
        # moving together past the H100's 80 GB (round-15 cold reading of EP12, finding 2's
        # link: it set the opening state, so nothing moved).
        "long": step_state(seq_len=16384),
        "dp32": step_state(tp=1, pp=1, dp=32, microbatches=1),
        "m2": step_state(microbatches=2),
        "zero1_dp32": step_state(tp=1, pp=1, dp=32, microbatches=1),
        "zero3_dp32": step_state(tp=1, pp=1, dp=32, microbatches=1, zero=3),
        # Step 5 asks a wait: its links show EP04's time per layer, compute and the exposed
        # collectives, where the panel's default is its efficiency (round-16 cold reading of
        # EP12, finding 4: the move showed only efficiencies).
        "tp_eth": step_state(gpus_per_node=4, nodes=8, inter_link="eth-100g", show_tp="cost"),
        "tp_node": step_state(show_tp="cost"),
        # Step 6: a case EP06 does not draw (its step 2 is CP 8 on 64 tokens), so the recap
        # asks for a count the student derives (round-6 cold reading of EP12, item 4), on
        # contiguous slices: zigzag's every rank was the panel's total pairs ÷ 4, both on
        # screen (round-15 cold reading, finding 7).
        "cp4": step_state(cp=4, pp=1, dp=1, cp_layout="contiguous", cp_tokens=16),
        # Step 8: steps 2 and 4 combined with EP01's full recomputation, a state no earlier
        # step shows (round-6 cold reading of EP12, item 3: DP32 alone was step 2's answer).
        "fsdp": step_state(tp=1, pp=1, dp=32, microbatches=1, zero=3, recompute="full"),
        # Step 7 asks what one GPU holds (round-6 cold reading of EP12, item 2: the share a
        # token runs was one division of the model list's "46.7B, 12.9B active"): the
        # experts panel shows its parameters chart.
        "mixtral": step_state(model="mixtral-8x7b", tp=2, pp=1, dp=8, ep=8, nodes=2,
                              show_tp="off", show_moe="params"),
    }


def tp_ring(fact: str):
    """NCCL's time for one of the TP group's all-reduces at a lesson state, term by term
    (labs.hardware.nccl.nccl_time, the call EP04's lab times them by: its ``collective_s``):
    step 5 derives its 5.02 ms from the busBW and the latency's terms (round-15 cold reading of
    EP12, finding 10: it quoted 47 GB/s, the bytes over the whole time, as a rate)."""
    r = facts()[fact]["result"].panel("tp").result
    tp, cluster = r.input.tp, r.input.topology.cluster_for(r.input.gpu, r.input.tp)
    return nccl_time("all_reduce", r.collective_bytes, tp, cluster,
                     min(tp, cluster.gpus_per_node))
