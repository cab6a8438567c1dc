"""EP12: `lab.py` with `lines.py`: every formula's worked example, each computed by the lab that
teaches it"""

FLOOR = 6  # imports only labs packages of floors <= 6 (tests/test_project.py)
