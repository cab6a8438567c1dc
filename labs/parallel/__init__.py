"""`layout.py` (`ParallelLayout`: TP/PP/CP/DP/EP/expert-TP, Megatron's rank groups, `problems()`),
`rank_map.py` (each rank's node and groups), `layer_time.py` (one layer on one GPU of a layout:
its kernels and its TP, CP and EP collectives exposed or hidden, recomputation; `tp_schedule`,
a layer's TP collectives in order, which EP04 counts: 4, or 10 with SP) over `layer_parts.py`
(`Group`, `Piece`, `Comm`: what a layer's timing is made of) and `ring.py` (CP's ring:
`ring_exposed`, each round's send exposed past its attention block, which EP06's `cp_cost`
and the step model's `cp_comms` share), `dispatch.py`
(the copies of a token an EP dispatch sends over the network and NVLink: NCCL's all-to-all or
DeepEP's, under uniform or node-limited routing)"""

FLOOR = 3  # imports only labs packages of floors <= 3 (tests/test_project.py)
