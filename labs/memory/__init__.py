"""EP01: the ledger, with `notes.py`; the recipes it bills are `core/catalogue.py`'s"""

FLOOR = 4  # imports only labs packages of floors <= 4 (tests/test_project.py)
