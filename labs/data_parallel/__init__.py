"""EP02: a gradient all-reduce's cost as GPUs are added, on each kind of link; compute from tokens
per GPU (micro-batch x micro-batches x sequence) at 6·P FLOPs a token over the achieved rate of
the GPU the link ships with (`timed_gpu`: the H100 SXM on NVLink 4 and the networks, the H100
PCIe card on PCIe, a vendor fabric's own GPU; a chosen `gpu` where it goes on the link, refused
by `check_peer_link` where its GPUs never talk over it), and the compute-to-communication ratio
with its crossover tokens per GPU (`compute_to_comm`); `nccl_all_reduce`, the same all-reduce
as NCCL's model prices it, term by term (or, with `ring_protocol`, its ring on one protocol:
`data_parallel_point` times a step that way for step 6)"""

FLOOR = 4  # imports only labs packages of floors <= 4 (tests/test_project.py)
