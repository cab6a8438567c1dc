"""EP04: where the matrices are cut, with `notes.py` and `comm.py`, the one TP communication
model EP08 counts too"""

FLOOR = 4  # imports only labs packages of floors <= 4 (tests/test_project.py)
