"""EP02: a gradient all-reduce's cost as GPUs are added, on each kind of link; compute from tokens
per GPU (micro-batch x micro-batches x sequence) at 6·P FLOPs a token over the H100's achieved
rate, and the compute-to-communication ratio with its crossover tokens per GPU
(`compute_to_comm`); `nccl_all_reduce`, the same all-reduce as NCCL's model prices it, term by
term (or, with `ring_protocol`, its ring on one protocol: `data_parallel_point` times a step
that way for step 6)"""

FLOOR = 4  # imports only labs packages of floors <= 4 (tests/test_project.py)
