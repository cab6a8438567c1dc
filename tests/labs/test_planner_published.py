"""Issue 18's planner check, over every published run the lab is checked against: the layout
each team ran (its TP x PP x CP x EP) among the planner's top plans for that model, cluster,
sequence, global batch, precision and software.

When the issue was filed the published layout was in the planner's top 50 for 16 of 37 runs
(the planner preferred context parallelism at 2,048 tokens or pure-DP ZeRO-3). Each search
here offers what the run's software offered: Megatron-LM 2021 (Narayanan et al.) had neither
ZeRO nor context parallelism and recomputed all or nothing; Korthikanti et al. 2022 added
selective recomputation and the distributed optimizer (ZeRO-1).
"""

import pytest

from labs.recipe.inputs import SOFTWARE
from labs.recipe.planner import PlanRequest, search
from labs.recipe.runs import RUNS, VALIDATION, Run

OFFERED = {  # what each calibration group's software could run (the rest: the planner's own)
    "narayanan-2021-table1": dict(zero_stages=(0,), cp_sizes=(1,),
                                  recompute_modes=("none", "full")),
    "korthikanti-2022-table5": dict(zero_stages=(0, 1), cp_sizes=(1,),
                                    recompute_modes=("none", "selective", "full")),
    "korthikanti-2022-dp": dict(zero_stages=(0, 1), cp_sizes=(1,),
                                recompute_modes=("none", "selective", "full")),
}


def published_rank(run: Run) -> int | None:
    """The rank of the run's TP x PP x CP x EP among the planner's top 50 (None: not there)."""
    p = run.plan
    found = search(PlanRequest(
        run.model, run.cluster, run.gpus, p.seq_len, p.global_batch, recipe=p.recipe, top=50,
        software=tuple((k, getattr(p, k)) for k in SOFTWARE), **OFFERED.get(run.group, {})))
    layouts = [(r.plan.tp, r.plan.pp, r.plan.cp, r.plan.ep) for r in found.plans]
    want = (p.tp, p.pp, p.cp, p.ep)
    return layouts.index(want) + 1 if want in layouts else None


@pytest.fixture(scope="module")
def ranks() -> dict[str, int | None]:
    return {run.id: published_rank(run) for run in (*RUNS, *VALIDATION)}


def test_the_published_layout_is_among_the_planners_top_plans_for_most_runs(ranks):
    # Measured at this commit: 37 of 51 in the top 50, 30 in the top 10 (among the misses:
    # torchtitan's FSDP-only 70B runs and its 405B TP 8 x PP 8, where the lab ranks TP 4 or
    # CP first; Qwen3-235B's EP 32 across nodes, whose exposed all-to-all fails the EP audit).
    assert len(ranks) == len(RUNS) + len(VALIDATION) == 51
    in_50 = [k for k, r in ranks.items() if r is not None]
    in_10 = [k for k, r in ranks.items() if r is not None and r <= 10]
    assert len(in_50) >= 35, sorted(set(ranks) - set(in_50))
    assert len(in_10) >= 28


def test_the_dense_runs_teams_ran_most_are_ranked_first(ranks):
    """Where a team's layout is the obvious one (one node, or NeMo's GPT-3 175B), the planner
    puts it first."""
    for run_id in ("narayanan-1.7b", "narayanan-145.6b", "torchtitan-llama31-8b-h100x128",
                   "nemo-gpt3-175b-h100x512", "korthikanti-530b-present"):
        assert ranks[run_id] == 1, run_id
