"""EP03: what each ZeRO stage takes off every GPU and its traffic, its recomputation modes
priced against fused attention with nothing recomputed (`lab.BASELINE_RECOMPUTE`, "flash",
the lesson's default), and its compute-to-communication crossover (`lab.crossover`, with the
tokens from which its overlap hides the traffic, `lab.hidden_tokens`), with `deepspeed.py`
(DeepSpeed's own memory estimators) and `published.py` (ZeRO-3's published fall, Narayanan et
al. 2021 Table 2, beside the lab's step for each run and the bandwidth each published step
leaves its collectives, and the lab's error split in two factors: its compute against
Megatron-LM's Table 1 runs on the same A100s, and the rest; EP03 step 10)"""

FLOOR = 4  # imports only labs packages of floors <= 4 (tests/test_project.py)
