"""EP05: the schedule, the ledger per stage and sends on a link, in units of a stage's forward
timed op by op by `parallel/layer_time.py`"""

FLOOR = 4  # imports only labs packages of floors <= 4 (tests/test_project.py)
