"""EP07: experts placed on GPUs, routing and its all-to-all"""

FLOOR = 4  # imports only labs packages of floors <= 4 (tests/test_project.py)
