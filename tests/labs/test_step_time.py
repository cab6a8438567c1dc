"""The step model against published training runs, through the recipe lab itself.

Calibration set (no constant is fitted to it: every kernel rate, bus bandwidth and latency
comes from a datasheet or a microbenchmark, labs/presets/*.json):

- Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
  Megatron-LM" (arXiv:2104.04473) Table 1: ten GPT runs on DGX A100 nodes (Selene: 8 x HDR
  InfiniBand per node), TFLOP/s per GPU by the paper's eq. 3 (which counts the extra forward
  of recomputation). Configurations from NVIDIA/Megatron-LM examples/sc21/run_table_1.sh and
  CONFIG.sh: sequence 2048, --fp16, full ("uniform") recomputation, the micro-batch and
  global batch below, --DDP-impl torch for PP = 1 (buckets reduced during backward) and local
  otherwise (after it), interleaving by --num-layers-per-virtual-pipeline-stage. 2021 software:
  Megatron's unfused attention (fused softmax), dropout 0.1, no sequence parallelism, blocking
  TP collectives, gradient accumulation in a backward hook (no fusion).
- Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
  (arXiv:2205.05198) Table 4 (one 22B layer) and Table 5 (iteration times): the same
  software with sequence parallelism, selective recomputation and the backward TP collectives
  overlapped with the weight-gradient GEMM (sec 6.2), the DP all-reduce after backward
  (sec 6.3), gradient accumulation fused.

Tolerance, as issue 18 states it: median |lab/published − 1| ≤ 10%, every run within ±25%.
The printout of ``table1_rows`` is what README and the report quote (python -m
tests.labs.test_step_time).
"""

import statistics

import pytest

from labs.hardware.links import get_cluster
from labs.parallel.layer_time import Group, layer_time
from labs.recipe.planner import PlanRequest, search
from labs.recipe.runs import RUNS, SEQ_LEN, SOFTWARE, check, gpt

A100 = get_cluster("dgx-a100")
SEQ = SEQ_LEN  # Narayanan sec 5.1
# The runs, each with its citation and configuration: labs/presets/runs.json, the one source
# this test and the "Checked against real runs" page (/validation) read.
TABLE1 = tuple(r for r in RUNS if r.group == "narayanan-2021-table1")
TABLE5 = tuple(r for r in RUNS if r.group == "korthikanti-2022-table5")
MEGATRON_2021 = SOFTWARE["megatron-2021"]["settings"]
KORTHIKANTI = SOFTWARE["korthikanti-2022"]["settings"]


def table1_rows() -> list[tuple]:
    """(params B, published TFLOP/s per GPU, the lab's by eq. 3, the recipe's result)."""
    rows = []
    for run in TABLE1:
        r = check(run).result
        rows.append((run.params_b, run.published_tflops, run.tflops(r.step_s), r))
    return rows


@pytest.fixture(scope="module")
def table1():
    return table1_rows()


def test_runs_file_holds_the_papers_figures():
    assert len(TABLE1) == 10 and len(TABLE5) == 8
    assert [r.published_tflops for r in TABLE1] == [137, 138, 142, 135, 138, 140, 148, 155,
                                                    163, 163]
    assert [r.gpus for r in TABLE1] == [32, 64, 128, 256, 512, 1024, 1536, 1920, 2520, 3072]
    assert [r.global_batch for r in TABLE1] == [512, 512, 512, 1024, 1536, 1792, 2304, 2160,
                                                2520, 3072]
    assert [r.published_step_s for r in TABLE5] == [1.42, 1.10, 18.13, 13.75, 49.05, 37.83,
                                                    94.42, 71.49]
    assert all("arXiv:" in r.source for r in RUNS)


def test_table1_median_within_10_percent_and_every_run_within_25(table1):
    ratios = [lab / published for _, published, lab, _ in table1]
    deviations = [abs(x - 1) for x in ratios]
    assert statistics.median(deviations) <= 0.10
    assert max(deviations) <= 0.25
    # As it stands: median 8.3%, worst 12.0%, every run fast (the model leaves out kernel
    # launch gaps, allocator effects, stragglers beyond a node, network congestion).
    assert statistics.median(deviations) == pytest.approx(0.083, abs=0.01)
    assert all(x > 1 for x in ratios)


@pytest.mark.parametrize("index", range(len(TABLE1)))
def test_each_table1_run(table1, index):
    params, published, lab, r = table1[index]
    assert lab == pytest.approx(published, rel=0.25), f"{params}B"
    assert r.legal


def test_table1_time_goes_where_the_paper_says(table1):
    """Sec 5: larger models spend a smaller share in TP and attention, a larger in GEMMs."""
    small, large = table1[3][3], table1[-1][3]
    assert small.segments["tp"] / small.step_s > large.segments["tp"] / large.step_s
    assert small.timing.micro.attention / small.timing.micro.compute \
        > large.timing.micro.attention / large.timing.micro.compute


# Korthikanti et al. 2022 Table 3 (DP = 1, sequence 2048, V 51,200, 3 interleaved stages for
# 175B and 530B) with Table 5's iteration seconds: full recomputation, then sequence
# parallelism + selective recomputation ("present work"), in pairs.
TABLE5_PAIRS = tuple(zip(TABLE5[::2], TABLE5[1::2], strict=True))


@pytest.mark.parametrize("pair", TABLE5_PAIRS, ids=[f.name.split(",")[0] for f, _ in TABLE5_PAIRS])
def test_korthikanti_table5_iteration_times(pair):
    full_run, present_run = pair
    full, present = check(full_run).lab_step_s, check(present_run).lab_step_s
    assert full == pytest.approx(full_run.published_step_s, rel=0.10)
    assert present == pytest.approx(present_run.published_step_s, rel=0.15)
    # Sequence parallelism + selective recomputation speed the step up 29-32% (Table 5);
    # the lab gains a little more (it leaves out per-kernel costs they do not remove).
    published_gain = full_run.published_step_s / present_run.published_step_s - 1
    gain = full / present - 1
    assert published_gain - 0.02 <= gain <= published_gain + 0.09


# Table 4: one 22B layer (TP 8, micro-batch 4), forward and backward ms.
TABLE4 = (
    ("no recompute", False, "none", 7.7, 11.9),
    ("sequence parallelism", True, "none", 7.2, 11.8),
    ("full recompute", False, "full", 7.7, 19.5),
    ("selective recompute", False, "selective", 7.7, 13.2),
    ("selective + sequence", True, "selective", 7.2, 13.1),
)


@pytest.mark.parametrize("name,sp,recompute,forward,backward", TABLE4,
                         ids=[r[0] for r in TABLE4])
def test_korthikanti_table4_layer_times(name, sp, recompute, forward, backward):
    from labs.model.ops import ComputeOptions

    lt = layer_time(gpt(6144, 64, 48), A100, tp=Group(8, 8), cp=Group(), ep=Group(),
                    micro_batch=4, seq_len=SEQ, sp=sp, recompute=recompute,
                    options=ComputeOptions(attention="unfused", dropout=True),
                    tp_overlap="backward")
    assert lt.forward.seconds * 1e3 == pytest.approx(forward, rel=0.10)
    assert lt.backward.seconds * 1e3 == pytest.approx(backward, rel=0.10)


def test_korthikanti_table4_orderings():
    """Sec 6.2: SP saves forward time; full recomputation costs ~the forward again in
    backward, selective a little; RS + AG run slower than one all-reduce."""
    from labs.model.ops import ComputeOptions

    def times(sp, recompute):
        lt = layer_time(gpt(6144, 64, 48), A100, tp=Group(8, 8), cp=Group(), ep=Group(),
                        micro_batch=4, seq_len=SEQ, sp=sp, recompute=recompute,
                        options=ComputeOptions(attention="unfused", dropout=True),
                        tp_overlap="backward")
        return lt
    base, sp = times(False, "none"), times(True, "none")
    assert sp.forward.seconds < base.forward.seconds
    assert sp.forward.comm("tp").seconds > base.forward.comm("tp").seconds
    full, selective = times(False, "full"), times(False, "selective")
    assert full.backward.seconds - base.backward.seconds > \
        5 * (selective.backward.seconds - base.backward.seconds)


def test_korthikanti_530b_at_dp8():
    """Sec 6.3: 530B at 8-way DP (2,240 GPUs) takes 39.15 s, the all-reduce after backward.
    The lab is 12% fast: its DP all-reduce at the nccl-tests bus bandwidth of two nodes
    (0.3 s) against ~1.3 s the paper implies on the fat tree."""
    run = next(r for r in RUNS if r.id == "korthikanti-530b-dp8")
    assert run.published_step_s == 39.15 and run.gpus == 2240
    assert check(run).lab_step_s == pytest.approx(39.15, rel=0.15)


def table1_planner_hits() -> list[tuple[float, bool, int]]:
    """For each Table 1 run: whether the published TP x PP (CP 1) is among the planner's top
    10 for that model, GPU count and global batch, the planner offering what the 2021
    software offered (no ZeRO, recomputation none or full, no context parallelism)."""
    out = []
    for run in TABLE1:
        plan = run.plan
        software = tuple((k, getattr(plan, k)) for k in (*MEGATRON_2021, "dp_overlap"))
        found = search(PlanRequest(run.model, A100, run.gpus, SEQ, run.global_batch, top=10,
                                   software=software, zero_stages=(0,),
                                   recompute_modes=("none", "full"), cp_sizes=(1,)))
        layouts = [(p.plan.tp, p.plan.pp, p.plan.cp) for p in found.plans]
        out.append((run.params_b, (plan.tp, plan.pp, 1) in layouts, len(layouts)))
    return out


def test_published_layouts_among_the_planners_top_10():
    hits = table1_planner_hits()
    assert all(n == 10 for *_, n in hits)
    # Issue 18 asks for 7 of 10; the lab reaches 7 (all but 18.4B, 39.1B and 530B) once the
    # planner offers no context parallelism, which the 2021 software did not have (offering
    # it, CP-2 plans took top-10 places: 5 of 10). Where it misses, its top plans skip
    # recomputation or take a smaller TP with more pipeline stages, each within a few
    # percent of the published layout's own time.
    assert sum(hit for _, hit, _ in hits) >= 7


if __name__ == "__main__":
    rows = table1_rows()
    print("run      published  lab    ratio")
    for params, published, lab, _ in rows:
        print(f"{params:7.1f}B {published:6.0f} {lab:7.1f} {lab / published:7.3f}")
    dev = [abs(lab / published - 1) for _, published, lab, _ in rows]
    print(f"median |ratio - 1| {statistics.median(dev):.1%}, worst {max(dev):.1%}")
