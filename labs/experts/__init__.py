"""EP07: `lab.py` (experts placed on GPUs: the state's layer at its skew and balanced, its
grouped GEMMs' efficiency, the router's balance curve, each group's traffic (and the same on a
1:1 spine, `network_nonblocking`: which groups an oversubscribed spine slowed, step 7), the
weights a GPU holds) over `layer.py` (one MoE layer's forward timed: the experts' grouped
GEMMs, dispatch and combine over NCCL's all-to-all or DeepEP's, capacity) and `routing.py`
(the skewed router's picks, and DeepEP's copies as `labs/parallel/dispatch.py` counts them for
EP08), with `crossover.py` (the expert width f above which the experts' GEMMs outlast the
all-to-alls; EP07 step 11)"""

FLOOR = 4  # imports only labs packages of floors <= 4 (tests/test_project.py)
