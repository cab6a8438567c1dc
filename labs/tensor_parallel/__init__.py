"""EP04: where the matrices are cut, with `notes.py`, `comm.py`, the one TP communication
model EP08 counts too, and `crossover.py` (the hidden size per GPU h/t above which a layer's
compute outlasts its collectives; EP04 step 6)"""

FLOOR = 4  # imports only labs packages of floors <= 4 (tests/test_project.py)
