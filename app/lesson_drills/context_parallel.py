"""EP06's predict and decide drills (``LESSON_DRILLS["cp"]``)."""

from collections.abc import Callable
from functools import lru_cache

from app.charts.units import worked_digits
from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import mb
from labs.context_parallel.lab import head_dims, mask_layout
from labs.hardware.links import get_link
from labs.model.presets import get_model

CROSSOVER_70B = {"model": "llama-3.1-70b", "seq_len": 131072, "cp": 8, "tokens": 64,
                 "layout": "zigzag", "link": "ib-ndr"}
CROSSOVER_8B = {**CROSSOVER_70B, "model": "llama-3.1-8b"}
CROSSOVER_ETH100 = {**CROSSOVER_70B, "cp": 16, "link": "eth-100g"}
UNEVEN = ("that is an even share, s(s + 1)/(2c). A contiguous split is not even: the last "
          "rank's queries see the most keys.")


def even_share(tokens: int, cp: int) -> float:
    """Causal pairs a rank would compute were they shared evenly, s(s+1)/(2c): a wrong answer
    for the busiest rank of an uneven layout (the engine's total over the ranks)."""
    return sum(r.causal_pairs for r in mask_layout(tokens, cp, "contiguous").ranks) / cp


def cp_mistakes(busiest: Callable[[], float], tokens: int, cp: int,
                even: str = UNEVEN) -> tuple[Mistake, ...]:
    """A CP pair-count drill's common wrong answers: every rank's even share, and the busiest
    rank without the diagonal (query q sees keys 0..q, q + 1 of them). EP06's derive drills
    (app/routers/context_parallel.py) use them."""
    return (Mistake("even", lambda: even_share(tokens, cp), even),
            Mistake("no-diagonal", lambda: busiest() - tokens // cp,
                    "query q sees keys 0..q, q + 1 of them: its own key too. Each query "
                    "of the rank is one pair short."))


def _crossover(params: dict) -> float:
    return lab_value("cp", params, "crossover.crossover")


def _l_star(api: dict, rate: float, busbw: float, share: float = 1.0) -> float:
    """Step 8's L* = 2 × (h_kv/a) × rate ÷ (ι × B), rate in TFLOP/s and B in GB/s as the page
    prints them: a ring's round against one send (step 7's bound, ι = 1). ``share`` (c − 1)/c
    gives the totals' figure, c rounds against c − 1 sends, which step 8's note names."""
    x = api["crossover"]
    return 2 * x["kv_share"] * share * rate * 1e12 / (x["imbalance"] * busbw * 1e9)


STEP_7_ETH = {"tokens": 64, "cp": 8, "seq_len": 4096, "layout": "zigzag", "link": "eth-25g"}
STEP_7_NVLINK = {**CROSSOVER_70B, "link": "nvlink-4"}


@lru_cache(maxsize=1)
def crossover_inputs() -> dict[str, tuple[str, str]]:
    """The attention rate (TFLOP/s) and send rate B (GB/s) steps 7 and 8 and this drill's
    solution print, each to the places its sums need: on NDR, the 70B's L*, the totals'
    (c − 1)/c of it beside it and the 8B's L* (this drill's answer); over 100 Gb/s Ethernet
    at CP 16, its L*; step 7's two states, 25 Gb/s Ethernet and NVLink 4, their
    rate ÷ (4 × B) (on Ethernet to the hundred tokens). Redone from the printed figures,
    each sum gives the engine's (round-21 cold reading Q, finding 5: 549 ÷ 47.4 gave 2,534
    against the page's 2,535)."""
    ib, b8, eth, e7, nv = (lab_value("cp", p, lambda a: a)
                           for p in (CROSSOVER_70B, CROSSOVER_8B, CROSSOVER_ETH100,
                                     STEP_7_ETH, STEP_7_NVLINK))
    whole, tenth = "{:,.0f}".format, "{:,.1f}".format

    def hundreds(value: float) -> str:  # step 7's "about 35,600": five figures need more
        return f"{round(value, -2):,.0f}"  # places of its rates than a sum can carry

    def rates(api: dict, checks, places=(0, 1)) -> tuple[str, str]:
        x = api["crossover"]
        return worked_digits((x["rate"] / 1e12, x["busbw"] / 1e9), places, checks)

    def own(api: dict, fmt=whole) -> tuple:
        return ((lambda r, b: _l_star(api, r, b), api["crossover"]["crossover"], fmt),)

    c = ib["cp"]
    return {
        "ib": rates(ib, (
            *own(ib),
            (lambda r, b: _l_star(ib, r, b, (c - 1) / c),
             ib["crossover"]["crossover"] * (c - 1) / c, whole),
            (lambda r, b: _l_star(b8, r, b), b8["crossover"]["crossover"], tenth))),
        "eth100": rates(eth, own(eth)),
        "eth7": rates(e7, own(e7, hundreds), (0, 3)),
        "nvlink7": rates(nv, own(nv), (0, 0)),
    }


LAYOUT_DECIDE = {"model": "llama-3.1-8b", "seq_len": 131072, "tokens": 64, "link": "nvl72",
                 "gpu": "b200"}


def _ulysses_bytes(api: dict) -> dict:
    """What a Ulysses rank's all-to-alls carry a token of its shard, from the state's model:
    Q and the output for every query head, K and V for every KV head, each KV head sent to
    c/h_kv ranks once c passes h_kv (``cp_cost``'s copies), and their sum."""
    d_qk, d_v = head_dims(get_model(api["model"]))
    kv_heads, cp = api["kv_heads"], api["cp"]
    copies = max(kv_heads, cp) // kv_heads
    q, o = api["heads"] * d_qk * 2, api["heads"] * d_v * 2
    kv = api["kv_bytes_per_token"]
    return {"q": q, "o": o, "kv": kv, "copies": copies, "total": q + copies * kv + o}


def _shard_sum(api: dict) -> str:
    """The sum a Ulysses option's feedback prints, "8,192 + 4,096 + 8,192 = 20,480"."""
    u = _ulysses_bytes(api)
    kv = f"{u['copies']} × {u['kv']:,.0f}" if u["copies"] > 1 else f"{u['kv']:,.0f}"
    return f"{u['q']:,} + {kv} + {u['o']:,} = {u['total']:,.0f}"


# Round-29 cold reading B, finding 10: the options compared "fewest bytes per GPU" over 2, 8
# and 16 GPUs, a metric that mostly rewards the plan with the most GPUs (Ulysses over CP 16
# moves 3.0 GB in all against the ring's 0.54 GB), and Ulysses over CP 8 lost to Ulysses over
# CP 16 by step 6's own "its bytes fall". The three methods now meet at one CP degree, and the
# question asks for time: attention on the busiest rank plus the traffic it waits for.
LAYOUT_CP = 16
LAYOUT_OPTIONS = (("ring", "zigzag"), ("allgather", "allgather"), ("ulysses", "ulysses"))


def _nvlink5():
    """The decide's fabric, its rate as the question states it (round-31 reading B, finding 9:
    the page's only rate was the H100's)."""
    return get_link(LAYOUT_DECIDE["link"])


def layout_time(api: dict) -> float:
    """What cp-decide-layout ranks: the busiest rank's attention and the communication it
    waits for (the lab's exposed_s: a ring's sends past their rounds, all of an all-gather's
    or an all-to-all's)."""
    return api["attention_s"] + api["exposed_s"]


def _layout_state(layout: str) -> dict:
    return lab_value("cp", {**LAYOUT_DECIDE, "cp": LAYOUT_CP, "layout": layout},
                     lambda a: a)


def _ms2(seconds: float) -> str:  # two places: the ring and Ulysses differ by 0.3 ms
    return f"{seconds * 1e3:,.2f} ms"


def _ms3(seconds: float) -> str:  # a sum's parts, one place more than the figure
    return f"{seconds * 1e3:,.3f} ms"


def _ring_why(a: dict) -> str:
    c, steps = a["cp"], a["steps"]
    return (f"Each of the {steps} sends, {mb(a['comm_bytes_per_gpu'] / steps)} in "
            f"{a['comm_s'] / steps * 1e6:.1f} µs, travels while the rank attends to the block "
            f"in hand, {a['attention_s'] / c * 1e6:.1f} µs a round: none of the ring's "
            f"{mb(a['comm_bytes_per_gpu'])} is waited for, and zigzag keeps the {c} ranks "
            f"even. {_ms3(a['attention_s'])} + {_ms3(a['exposed_s'])} = {{value}}.")


def _zigzag_attention() -> float:
    """The busiest rank's attention under zigzag chunks at the decide's state: a balanced
    all-gather's too, since where K and V come from does not change which queries a rank holds
    (the engine's allgather layout is slime's contiguous one, step 4)."""
    return _layout_state("zigzag")["attention_s"]


def balanced_allgather_time(api: dict) -> float:
    """cp-decide-layout's all-gather, as Llama 3 runs it (arXiv:2407.21783 sec 3.3.2: 2 x CP
    chunks, rank i keeping chunks i and 2 x CP - 1 - i): zigzag's attention, and the engine's
    all-gather of the whole K/V, all of it waited for (round-31 reading B, finding 1: the
    option was slime's contiguous slices, which lose by 2x on imbalance step 2 already
    taught)."""
    return _zigzag_attention() + api["exposed_s"]


def _allgather_why(a: dict) -> str:
    return (f"Zigzag's chunks keep its ranks even, {_ms3(_zigzag_attention())} of attention, "
            f"and it sends a ring's bytes, {mb(a['comm_bytes_per_gpu'])}, in "
            f"one collective: but attention waits for all of it, {_ms3(a['exposed_s'])}. "
            f"{_ms3(_zigzag_attention())} + {_ms3(a['exposed_s'])} = {{value}}.")


def _ulysses_why(a: dict) -> str:
    c = a["cp"]
    return (f"Past the {a['kv_heads']} KV heads each goes to {_ulysses_bytes(a)['copies']} "
            f"ranks: {_shard_sum(a)} B a token × {c - 1}/{c} × {a['seq_len'] // c:,} tokens "
            f"= {mb(a['comm_bytes_per_gpu'])}, the fewest bytes of the three. But attention "
            f"waits for the all-to-alls: {_ms3(a['attention_s'])} + "
            f"{_ms3(a['exposed_s'])} = {{value}}.")


def _layout_solution(found: dict) -> str:
    """cp-decide-layout's worked solution: each plan's time, and the bytes against it; the
    ring's margin over the runner-up and which way the lab errs (round-31 reading B, finding
    9)."""
    sent = {key: _layout_state(layout)["comm_bytes_per_gpu"] for key, layout in LAYOUT_OPTIONS}
    ring = found["ring"]
    second = min(v for k, v in found.items() if k != "ring")
    return ("{best}. Attention and the traffic it waits for: ring {ring}, all-gather "
            "{allgather}, Ulysses {ulysses}. Ulysses sends the fewest bytes, "
            f"{mb(sent['ulysses'])} against {mb(sent['ring'])}, but a ring's send travels "
            "behind the block in hand, so its bytes cost no time while each send is shorter "
            "than a round (step 7 shortens the rounds). The margin is thin, "
            f"{(second - ring) * 1e3:.2f} ms, {(second - ring) / second:.0%}, and the lab errs "
            f"in the ring's favour: it times the ring's {LAYOUT_CP} block-sized FlashAttention "
            "calls a rank at the rate of one call, where Ulysses runs one call over the whole "
            "sequence, and short calls run below that rate.")


def _crossover_solution() -> str:
    """The worked L* for the 8B, from the lab's own rate and B at that state (step 8's, as
    step 8 prints them), and why ι is 1: the engine's imbalance of a zigzag split (fixD #1:
    the sum printed "(1 × 47.39 GB/s)" and never said what the 1 was)."""
    found = lab_value("cp", CROSSOVER_8B, lambda a: a)
    x = found["crossover"]
    rate, busbw = crossover_inputs()["ib"]
    return (f"{{answer}} tokens a rank: 2 × {found['kv_heads']}/{found['heads']} × "
            f"{rate} TFLOP/s ÷ ({x['imbalance']:g} × {busbw} GB/s), ι = {x['imbalance']:g}: "
            "zigzag's ranks are even (step 3). Twice the 70B's "
            f"{_crossover(CROSSOVER_70B):,.0f}: the 8B moves the same K and V for half the "
            "query heads' attention, so each rank needs twice the tokens to hide its sends.")


DRILLS: tuple[Drill | Decide, ...] = (
    # Step 8's crossover for another model (round-18 cold reading, finding 19: this drill
    # summed the last rank's rows again, as cp-busiest-contiguous does): Llama 3.1 8B's
    # blocks carry the same 16,384 tokens x 4,096 B as step 8's 70B, so attention's rate and
    # B are step 8's and only h_kv/a changes, 8/32 for 8/64.
    predict(
        "cp-predict-crossover-8b",
        "Step 8 finds L* for Llama 3.1 70B (8 KV heads for 64 query heads), 131,072 tokens "
        "zigzag over CP 8 on InfiniBand NDR. Llama 3.1 8B has the same 8 KV heads of 128 but "
        "32 query heads. At the same 131,072 tokens, zigzag over CP 8 on NDR, its blocks "
        "carry the same 16,384 tokens × 4,096 B of K and V, so attention runs at step 8's "
        "rate and the sends reach step 8's B. Predict the 8B's L*, in tokens per rank.",
        "cp", CROSSOVER_8B, "crossover.crossover", unit="tokens",
        hint="Step 8's L* = 2 × (h_kv/a) × rate ÷ (ι × B): which of its terms differs "
             "for the 8B?",
        explanation=_crossover_solution,
        rel_tol=0.02,
        mistakes=(
            Mistake("70b-share", lambda: _crossover(CROSSOVER_70B),
                    "that is step 8's L* for the 70B, h_kv/a = 8/64. The 8B has 8 KV heads "
                    "for 32 query heads, h_kv/a = 1/4: twice the K and V a FLOP of "
                    "attention, so twice the tokens a rank before attention hides them."),
            Mistake("totals", lambda: _crossover(CROSSOVER_8B) * 7 / 8,
                    "that sets the layer's totals against each other, c rounds of attention "
                    "against c − 1 sends, the (c − 1)/c. But a send hides only behind its own "
                    "round: the next round needs the block it brings, and the last round's "
                    "attention comes after every send, covering none. Set one round against "
                    "one send."),
            Mistake("no-gqa", lambda: _crossover(CROSSOVER_8B) * 32 / 8,
                    "that counts every query head's K and V, h_kv/a = 1. Grouped-query "
                    "attention sends only the 8 KV heads' K and V, 8/32 of that."),
        )),
    # A model no link of step 6 draws (round-6 cold reading of EP06, item 2: GPT-3's chart, a
    # link above, showed Ulysses far below the ring). Round-29 cold reading B, finding 10: the
    # three methods at one CP degree, ranked by time (LAYOUT_OPTIONS' comment). On one NVL72
    # rack (EP04), whose NVLink reaches all 16 GPUs, so every plan is one fabric.
    decide(
        "cp-decide-layout",
        "Llama 3.1 8B: 32 query heads and 8 KV heads of 128, so a token carries 4,096 B of K "
        "and V and 8,192 B each of Q and the attention output. One 131,072-token sequence "
        f"over CP {LAYOUT_CP} on the B200s of an NVL72 rack, whose NVLink 5 joins all 72 GPUs "
        f"at {_nvlink5().bandwidth / 1e9:,.0f} GB/s a direction "
        f"({_nvlink5().ring_busbw / 1e9:,.0f} GB/s of NCCL ring busBW): which plan finishes "
        "a layer's attention, with the traffic it waits for, soonest?",
        "cp", {"ring": layout_time, "allgather": balanced_allgather_time,
               "ulysses": layout_time},
        tuple((key, label, {**LAYOUT_DECIDE, "cp": LAYOUT_CP, "layout": layout}, why)
              for key, label, layout, why in (
            ("ring", "Zigzag ring: pass K/V blocks c − 1 times", "zigzag", _ring_why),
            ("allgather", "All-gather every rank's K/V once, before attention, zigzag "
                          "chunks (Llama 3's)", "allgather", _allgather_why),
            ("ulysses", "Ulysses: all-to-all by heads, 2 query heads a rank", "ulysses",
             _ulysses_why))),
        best="min", fmt=_ms2,
        solution=_layout_solution,
        reveals=("travels behind the block in hand",)),
)
