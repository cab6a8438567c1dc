"""EP06: one sequence's causal attention split over CP ranks, and its K/V traffic"""

FLOOR = 4  # imports only labs packages of floors <= 4 (tests/test_project.py)
