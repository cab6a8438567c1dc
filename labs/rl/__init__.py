"""EP09: `lab.py` with `cluster.py`, `serving.py` (an engine GPU's memory: SGLang's placement of
the weights, `ServingLayout`, the KV cache and the workspace), `serving_time.py` (an engine's
prefill and decode time, the busiest GPU's experts among them), `timeline.py`, `recipes.py`"""

FLOOR = 6  # imports only labs packages of floors <= 6 (tests/test_project.py)
