"""EP06's predict and decide drills (``LESSON_DRILLS["cp"]``)."""

from app.labkit import Decide, Drill, Mistake, decide, predict
from app.labkit.drills import lab_value
from app.lesson_drills.units import gb

CP_32 = {"tokens": 32, "cp": 8}

DRILLS: tuple[Drill | Decide, ...] = (
    predict(
        "cp-predict-busiest-32",
        "32 tokens split contiguously over CP = 8 ranks (4 tokens each). Predict the "
        "causal (query, key) pairs of the busiest rank.",
        "cp", {"tokens": 32, "cp": 8}, "busiest_pairs", unit="pairs",
        hint="The last rank holds tokens 28–31; query q sees keys 0..q.",
        explanation="{answer}: 29 + 30 + 31 + 32, on the rank holding the last tokens.",
        rel_tol=0.005,
        mistakes=(
            Mistake("even", lambda: lab_value("cp", CP_32, "total_pairs") / 8,
                    "that is an even share, s(s + 1)/(2c). A contiguous split is not even: "
                    "the last rank's queries see the most keys."),
            Mistake("no-diagonal", lambda: lab_value("cp", CP_32, "busiest_pairs") - 4,
                    "query q sees keys 0..q, q + 1 of them: its own key too. Each query of "
                    "the rank is one pair short."),
        )),
    decide(
        "cp-decide-layout",
        "GPT-3 175B (96 heads, each with its own K and V: no grouped-query attention), "
        "one 131,072-token sequence over CP = 8 on NVLink 4. Which layout sends the fewest "
        "bytes per GPU per layer?",
        "cp", "comm_bytes_per_gpu",
        tuple((key, label, {"model": "gpt-3-175b", "seq_len": 131072, "cp": 8,
                            "tokens": 64, "layout": layout, "link": "nvlink-4"}, why)
              for key, label, layout, why in (
            ("ring", "Zigzag ring: pass K/V blocks c − 1 times", "zigzag",
             "Every rank must see every other rank's keys and values once, so the ring "
             "passes it the other 7 blocks of 16,384 tokens, each token's K and V "
             "2 × 12,288 × 2 B = 49,152 B: {value}. That grows with the whole sequence, "
             "whatever c is."),
            ("allgather", "All-gather the whole sequence's K/V", "allgather",
             "Gathering at once moves the same keys and values as the ring, 7/8 of 131,072 "
             "tokens × 49,152 B: {value}; it only gives up hiding each block under the "
             "attention it feeds."),
            ("ulysses", "Ulysses: all-to-all by heads", "ulysses",
             "7/8 of each rank's 16,384 tokens of Q, K, V and the output, 98,304 B a "
             "token: {value}. Without grouped-query attention K and V are as large as "
             "Q, and Ulysses' 1/c shard wins."))),
        best="min", fmt=gb,
        hint="The ring and the all-gather send the whole sequence's K/V; Ulysses sends a "
             "1/c shard of Q, K, V and the output. Which is smaller when K/V is big?",
        solution="{best}. Bytes per GPU: ring {ring}, all-gather {allgather}, Ulysses "
                 "{ulysses}. With Llama 3.1 70B's 8 KV heads (grouped-query attention) "
                 "the ring sends less than Ulysses instead.",
        reveals=("1/c shard wins",)),
)
