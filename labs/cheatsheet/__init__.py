"""EP12: `lab.py` with `lines.py` (EP01-EP07), `run_lines.py` (EP08-EP09), `precision_lines.py`
(EP10) and `failure_lines.py` (EP11), a whole run's: every formula's worked example, each
computed by the lab that teaches it; `app/routers/cheatsheet.py`'s `STEPS` builds each line's
link from the same inputs, so the linked lab's API answers the line's result
(tests/app/test_cheatsheet_round18.py)"""

FLOOR = 6  # imports only labs packages of floors <= 6 (tests/test_project.py)
