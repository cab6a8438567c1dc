"""EP06's predict and decide drills (``LESSON_DRILLS["cp"]``)."""

from collections.abc import Callable

from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import mb
from labs.context_parallel.lab import mask_layout

CP_32 = {"tokens": 32, "cp": 8}
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
    (app/routers/context_parallel.py) and its predict drill below use them."""
    return (Mistake("even", lambda: even_share(tokens, cp), even),
            Mistake("no-diagonal", lambda: busiest() - tokens // cp,
                    "query q sees keys 0..q, q + 1 of them: its own key too. Each query "
                    "of the rank is one pair short."))


DRILLS: tuple[Drill | Decide, ...] = (
    predict(
        "cp-predict-busiest-32",
        "32 tokens split contiguously over CP = 8 ranks (4 tokens each). Predict the "
        "causal (query, key) pairs of the busiest rank.",
        "cp", {"tokens": 32, "cp": 8}, "busiest_pairs", unit="pairs",
        hint="The last rank holds tokens 28–31; query q sees keys 0..q.",
        explanation="{answer}: 29 + 30 + 31 + 32, on the rank holding the last tokens.",
        rel_tol=0.005,
        mistakes=cp_mistakes(lambda: lab_value("cp", CP_32, "busiest_pairs"), **CP_32)),
    # A model no link of step 6 draws (round-6 cold reading of EP06, item 2: GPT-3's chart, a
    # link above, showed Ulysses far below the ring), whose answer needs the bytes worked out:
    # Llama 3.1 8B keeps Llama 3.1 70B's 8 KV heads but has half its query heads, so here
    # Ulysses sends less, where step 6's 70B sends less by the ring.
    decide(
        "cp-decide-layout",
        "Llama 3.1 8B: 32 query heads and 8 KV heads of 128, so a token carries 4,096 B of K "
        "and V and 8,192 B each of Q and the attention output. One 131,072-token sequence "
        "over CP = 8 on NVLink 4: which plan sends the fewest bytes per GPU per layer?",
        "cp", "comm_bytes_per_gpu",
        tuple((key, label, {"model": "llama-3.1-8b", "seq_len": 131072, "cp": cp,
                            "tokens": 64, "layout": layout, "link": "nvlink-4"}, why)
              for key, label, layout, cp, why in (
            ("ring", "Zigzag ring: pass K/V blocks c − 1 times", "zigzag", 8,
             "The ring passes each rank the other 7 blocks of 16,384 tokens' K and V: "
             "7/8 × 131,072 × 4,096 B = {value}. That grows with the whole sequence, "
             "whatever c is."),
            ("allgather", "All-gather the whole sequence's K/V", "allgather", 8,
             "Gathering at once moves the same keys and values as the ring, 7/8 of 131,072 "
             "tokens × 4,096 B: {value}; it only gives up hiding each block under the "
             "attention it feeds."),
            ("ulysses", "Ulysses: all-to-all by heads", "ulysses", 8,
             "Each rank sends 7/8 of its own 16,384 tokens' Q, K, V and output, 8,192 + "
             "4,096 + 8,192 = 20,480 B a token: {value}. A 1/8 shard of 20,480 B is "
             "2,560 B a token, below the ring's 4,096 B, so the head shards send the least."),
            ("ring4", "Zigzag ring over CP = 4 instead: fewer blocks to pass", "zigzag", 4,
             "3/4 × 131,072 × 4,096 B = {value}: fewer ranks shave only the (c − 1)/c, and the "
             "ring still sends most of the whole sequence's K/V."))),
        best="min", fmt=mb,
        solution="{best}. Bytes per GPU: ring {ring}, all-gather {allgather}, Ulysses "
                 "{ulysses}, ring over CP 4 {ring4}. Per token of the sequence, Ulysses sends "
                 "(Q + K + V + O) ÷ c, 20,480 B ÷ 8 = 2,560 B, where the ring sends K + V, "
                 "4,096 B. Step 6's Llama 3.1 70B has the same 8 KV heads but 64 query heads: "
                 "36,864 B ÷ 8 = 4,608 B, above 4,096 B, and there the ring sends less.",
        reveals=("head shards send the least",)),
)
