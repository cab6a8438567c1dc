"""EP11: interruptions, checkpoints, restarts and goodput (Young 1974, Daly 2006)"""

FLOOR = 5  # imports only labs packages of floors <= 5 (tests/test_project.py)
