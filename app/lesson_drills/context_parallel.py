"""EP06's predict and decide drills (``LESSON_DRILLS["cp"]``)."""

from collections.abc import Callable
from functools import lru_cache

from app.charts.units import worked_digits
from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import mb
from labs.context_parallel.lab import head_dims, mask_layout
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


LAYOUT_OPTIONS = (("ring", "zigzag", 2), ("ulysses", "ulysses", 8), ("ulysses16", "ulysses", 16))


def layout_winner(model: str) -> str:
    """The cp-decide-layout option that sends the fewest bytes for ``model``, by the engine
    (round-26 reading A, finding 6: with the ring at CP 8 the 8B's winner, Ulysses over CP 16,
    was step 6's 70B's too, readable off step 6's why; with the ring at CP 2 the 70B's is the
    ring, and the 8B's needs its bytes worked out)."""
    sent = {key: lab_value("cp", {**LAYOUT_DECIDE, "model": model, "cp": cp,
                                  "layout": layout}, "comm_bytes_per_gpu")
            for key, layout, cp in LAYOUT_OPTIONS}
    return min(sent, key=sent.get)


def _layout_solution() -> str:
    """cp-decide-layout's worked solution: each plan's bytes a token of the sequence, from the
    engine's states (the ring's K and V, a Ulysses shard's sum ÷ c), and step 6's 70B beside
    it, where the ring over CP 2 sends the least of the three."""
    state = {key: lab_value("cp", {**LAYOUT_DECIDE, "cp": cp, "layout": layout},
                            lambda a: a)
             for key, layout, cp in LAYOUT_OPTIONS}
    big = lab_value("cp", {**LAYOUT_DECIDE, "model": "llama-3.1-70b", "cp": 16,
                           "layout": "ulysses"}, lambda a: a)
    ring = state["ring"]

    def per(api: dict) -> str:
        # Round-27 reading A, finding 1: the (c − 1)/c a rank keeps, as the MB figures and the
        # ring's 2,048 B count it (without it 2,560 B × 131,072 was 336 MB beside 294 MB).
        total, c = _ulysses_bytes(api)["total"], api["cp"]
        return f"{total:,.0f} B × {c - 1}/{c} ÷ {c} = {total * (c - 1) / c / c:,.0f} B"

    share = (ring["cp"] - 1) / ring["cp"] * ring["kv_bytes_per_token"]
    return ("{best}. Bytes per GPU: ring over CP 2 {ring}, Ulysses over CP 8 {ulysses}, "
            "over CP 16 {ulysses16}. Per token of the sequence Ulysses sends (c − 1)/c of "
            f"its shard's bytes ÷ c: {per(state['ulysses'])} at CP 8, "
            f"{per(state['ulysses16'])} at CP 16, where the ring over CP {ring['cp']} sends "
            f"{ring['cp'] - 1}/{ring['cp']} of "
            f"K + V, {share:,.0f} B. Step 6's Llama 3.1 70B has the same 8 KV heads but "
            f"{big['heads']} query heads: {per(big)} at CP 16, above {share:,.0f} B, and "
            f"there the ring over CP {ring['cp']} sends the least of the three.")


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
    # link above, showed Ulysses far below the ring), whose answer needs the bytes worked out:
    # Llama 3.1 8B keeps Llama 3.1 70B's 8 KV heads but has half its query heads. fixD #3: the
    # all-gather sent the ring's bytes to the byte, and a second ring lost by its (c − 1)/c
    # alone; Ulysses over CP 16, past the 8 KV heads where K and V are copied, beside Ulysses
    # over CP 8 (does it still fall?). Round-26 reading A, finding 6: with the ring at CP 8
    # the 8B's winner (Ulysses over CP 16) was the 70B's in step 6's why, read off, not
    # worked; the ring over CP 2 sends the least of the three for the 70B (layout_winner), so
    # the 8B's answer needs its shard's bytes. The engine models no hybrid Ulysses x ring.
    # On one NVL72 rack (EP04), whose NVLink reaches all 16 GPUs, so every plan is one fabric.
    decide(
        "cp-decide-layout",
        "Llama 3.1 8B: 32 query heads and 8 KV heads of 128, so a token carries 4,096 B of K "
        "and V and 8,192 B each of Q and the attention output. One 131,072-token sequence on "
        "the B200s of an NVL72 rack, whose NVLink joins all 72 GPUs: which plan sends the "
        "fewest bytes per GPU per layer?",
        "cp", "comm_bytes_per_gpu",
        tuple((key, label, {**LAYOUT_DECIDE, "cp": cp, "layout": layout}, why)
              for key, label, layout, cp, why in (
            ("ring", "Zigzag ring over CP 2: pass K/V blocks c − 1 times", "zigzag", 2,
             lambda a: ("The ring passes each rank "
                        + (f"the other {a['cp'] - 1} blocks" if a["cp"] > 2 else
                           "the other rank's block")
                        + f" of {a['seq_len'] // a['cp']:,} tokens' K and V: "
                        f"{a['cp'] - 1}/{a['cp']} × {a['seq_len']:,} × "
                        f"{a['kv_bytes_per_token']:,.0f} B = {{value}}, the fewest a ring "
                        "sends at any c. Work out what the other plans send.")),
            ("ulysses", "Ulysses over CP 8: all-to-all by heads", "ulysses", 8,
             lambda a: (f"Each rank sends {a['cp'] - 1}/{a['cp']} of its own "
                        f"{a['seq_len'] // a['cp']:,} tokens' Q, K, V and output, "
                        f"{_shard_sum(a)} B a token: {{value}}. But a 1/c shard keeps "
                        "shrinking as c grows; past the KV heads only K and V stop "
                        "shrinking.")),
            ("ulysses16", "Ulysses over CP 16: 2 query heads a rank", "ulysses", 16,
             lambda a: (f"Past the {a['kv_heads']} KV heads each goes to "
                        f"{_ulysses_bytes(a)['copies']} ranks, so K and V go twice: "
                        f"{_shard_sum(a)} B a token × {a['cp'] - 1}/{a['cp']} × "
                        f"{a['seq_len'] // a['cp']:,} tokens = {{value}}. The copies slow "
                        "the fall, but Q and the output keep shrinking.")))),
        best="min", fmt=mb,
        solution=lambda found: _layout_solution(),
        reveals=("Q and the output keep shrinking",)),
)
