"""EP08's answer draws each view of its result once (issue 31): the figures, the template's
readouts and the JSON all read one timeline and one step-by-cause, kept on the result."""

from collections import Counter

from app import recipe_answer
from labs.recipe.timing import Timing

SEED = {"model": "gpt-3-175b", "gpu": "a100-80gb", "nodes": 8, "gpus_per_node": 8,
        "tp": 8, "pp": 4, "dp": 2, "zero": 1, "seq_len": 2048}


def test_a_bench_and_its_api_compute_the_timeline_and_causes_once(client, monkeypatch):
    # The lesson's own step facts (step 12's and 13's states) draw their timelines once a
    # process, on the first bench: draw one first, so the count below is the new state's alone
    # whichever test ran before this one.
    warm = client.get("/episodes/recipe-3d", params=SEED,
                      headers={"HX-Request": "true", "HX-Target": "bench"})
    assert warm.status_code == 200
    calls = Counter()
    timeline, causes = recipe_answer.timeline, Timing.causes

    def counted_timeline(r):
        calls["timeline"] += 1
        return timeline(r)

    def counted_causes(self, *args):
        calls["causes"] += 1
        return causes(self, *args)

    monkeypatch.setattr(recipe_answer, "timeline", counted_timeline)
    monkeypatch.setattr(Timing, "causes", counted_causes)
    state = {**SEED, "microbatches": 23}  # a state no other test draws
    bench = client.get("/episodes/recipe-3d", params=state,
                       headers={"HX-Request": "true", "HX-Target": "bench"})
    assert bench.status_code == 200 and 'id="recipe-timeline"' in bench.text
    assert calls == {"timeline": 1, "causes": 1}
    body = client.get("/api/recipe", params=state).json()  # the same result, kept
    assert calls == {"timeline": 1, "causes": 1}
    assert body["timeline"]["seconds"] > 0 and body["micro_causes"]
