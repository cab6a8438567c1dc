"""EP12: `lab.py` with `lines.py` (EP01-EP07) and `run_lines.py` (EP08-EP11, a whole run): every
formula's worked example, each computed by the lab that teaches it"""

FLOOR = 6  # imports only labs packages of floors <= 6 (tests/test_project.py)
