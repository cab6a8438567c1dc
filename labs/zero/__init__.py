"""EP03: what each ZeRO stage takes off every GPU and its traffic, and its
compute-to-communication crossover (`lab.crossover`), with `deepspeed.py` (DeepSpeed's own
memory estimators)"""

FLOOR = 4  # imports only labs packages of floors <= 4 (tests/test_project.py)
