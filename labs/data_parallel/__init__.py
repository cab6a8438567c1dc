"""EP02: a gradient all-reduce's cost as GPUs are added, on each kind of link"""

FLOOR = 4  # imports only labs packages of floors <= 4 (tests/test_project.py)
