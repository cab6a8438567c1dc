"""EP06: one sequence's causal attention split over CP ranks, and its K/V traffic, with
`crossover.py` (the tokens per rank L above which a layer's attention outlasts moving its
keys and values; EP06 step 8)"""

FLOOR = 4  # imports only labs packages of floors <= 4 (tests/test_project.py)
