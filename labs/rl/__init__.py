"""EP09: `lab.py` with `cluster.py`, `serving.py`, `timeline.py`, `recipes.py`"""

FLOOR = 6  # imports only labs packages of floors <= 6 (tests/test_project.py)
