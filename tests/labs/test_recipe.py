"""EP08 the 3D recipe: the seed figures, the worked plan, exports that round-trip, re-planning.

Seed (CURRICULUM EP08): 64 GPUs as 8 nodes x 8 with NVLink inside (DGX A100), GPT-3 175B,
sequence 2048, TP8 x PP4 x DP2, 16 micro-batches, Megatron's distributed optimizer (ZeRO-1):
fits, keeps TP in the node, ≈76% efficient (≈0.90 TP x 16/19 pipeline x ≈1.0 DP). The lab,
timing every kernel at the A100's measured rates (labs.recipe.step_time), gives 72.8% = stages
0.990 x TP 0.906 x 16/19 x DP 0.979 x optimizer 0.986 (and sends 0.998): the DP pair across
HDR InfiniBand cannot hide the distributed optimizer's weight all-gather behind the first
stage's first forward, the first and last stages carry the embedding and the loss, and the
optimizer step runs after the pipeline.
"""

import argparse
import ast
import dataclasses
import json
import math
import shlex
from collections import Counter

import pytest

from labs.core.errors import LabInputError
from labs.core.limits import DEFAULT_MATMUL_EFFICIENCY
from labs.hardware.kernels import SLOWEST_GPU
from labs.hardware.links import get_cluster
from labs.model.flops import hardware_flops_per_token, model_flops_per_token
from labs.model.presets import get_model
from labs.parallel.layout import ParallelLayout
from labs.recipe.export import export
from labs.recipe.inputs import Plan
from labs.recipe.lab import evaluate, measured_bubble, pipeline_slack
from labs.recipe.replan import nearest
from labs.recipe.step_time import megatron_bucket_params, spread
from labs.schedules.inputs import PipelineInput
from labs.schedules.simulate import simulate
from labs.tensor_parallel.inputs import Topology, TPInput
from labs.tensor_parallel.lab import tensor_parallel

A100 = get_cluster("dgx-a100")
H100 = get_cluster("dgx-h100")
GPT3 = get_model("gpt-3-175b")
LLAMA70 = get_model("llama-3.1-70b")
SEED = Plan(tp=8, pp=4, dp=2, zero=1, microbatches=16, seq_len=2048)


def audit(result, name):
    return next(a for a in result.audits if a.name == name)


def test_seed_fits_keeps_tp_in_the_node_and_is_about_76_percent():
    r = evaluate(SEED, GPT3, A100, 8)
    assert r.legal and r.fits and r.passes
    # The full-wave GEMM rate it was timed at: He's 258 TFLOP/s on the slowest GPU of a node.
    assert DEFAULT_MATMUL_EFFICIENCY is None
    assert r.matmul_efficiency == pytest.approx(258 / 312 * SLOWEST_GPU, rel=1e-3)
    assert r.memory_per_gpu_bytes < 80e9
    assert audit(r, "TP inside a node").ok
    # The pipeline factor is the simulated bubble: exactly 16/19 for 1F1B, p = 4, m = 16.
    assert r.parts["pp"] == pytest.approx(16 / 19, abs=1e-9)
    # ≈0.90 TP (EP04's model: 4 blocking f/g collectives of s·b·h bf16 per layer on NVLink 3).
    assert r.parts["tp"] == pytest.approx(0.90, abs=0.03)
    # ≈1.0 DP: the gradient buckets hide behind the last backward; the weight all-gather
    # is longer than the first stage's first forward, so a little is exposed.
    assert 0.97 <= r.parts["dp"] < 1
    # ≈76% in the brief (tolerance 3 points); timed op by op the lab gives 72.8%, 3.2 points
    # under it: the embedding and the loss on the end stages and the optimizer step after
    # the pipeline, which the rough figure leaves out (EP08's first step says so). The new
    # figure is pinned to 0.5 point.
    assert r.efficiency == pytest.approx(0.728, abs=0.005)
    assert r.parts["stages"] < 1 and r.parts["optimizer"] < 1
    assert r.efficiency == pytest.approx(math.prod(r.parts.values()), rel=1e-12)


def test_efficiency_follows_the_compute_rate_it_is_measured_against():
    """``matmul_efficiency`` overrides the GPUs' measured full-wave GEMM rate. The faster a GPU
    computes, the more the same bytes weigh: with GEMMs at the peak the seed is 70.4% (TP
    0.890), at 60% of it 75.8%."""
    at = {e: evaluate(SEED, GPT3, A100, 8, e) for e in (1.0, 0.85, 0.6)}
    assert at[1.0].efficiency < at[0.85].efficiency < at[0.6].efficiency
    assert at[1.0].parts["tp"] == pytest.approx(0.890, abs=0.002)
    assert at[0.6].efficiency == pytest.approx(0.758, abs=0.005)
    for e, r in at.items():
        assert r.matmul_efficiency == pytest.approx(e * SLOWEST_GPU)
        # MFU: the kernels run below the full-wave GEMM rate (narrower GEMMs, attention, norms
        # and softmax bound by memory), and selective recomputation adds FLOPs MFU omits.
        ratio = model_flops_per_token(GPT3, 2048) / hardware_flops_per_token(GPT3, 2048)
        assert r.mfu < r.matmul_efficiency * r.efficiency * ratio
    with pytest.raises(LabInputError) as exc:
        evaluate(SEED, GPT3, A100, 8, 1.5)
    assert exc.value.field == "matmul_efficiency"


def test_tp_factor_is_ep04s_for_the_same_inputs():
    """One TP model: with PP = 1 and no recomputation, the recipe's TP collectives per layer
    are EP04's, on the same model, GPU, node and compute rate, and its TP factor is EP04's
    share of the step its collectives leave to compute (EP04's efficiency further counts
    what TP's narrower kernels lose against one GPU)."""
    llama = get_model("llama-3.1-405b")
    plan = Plan(tp=8, pp=1, dp=8, zero=1, recompute="none", microbatches=1, seq_len=4096)
    r = evaluate(plan, llama, H100, 8, 0.4)
    ep04 = tensor_parallel(TPInput(llama, H100.gpu, Topology("node", cluster=H100), tp=8,
                                   mfu=0.4, recompute="none")).cost
    assert ep04.step_efficiency == pytest.approx(0.901, abs=0.0005)  # EP04's pinned figure
    per_layer = r.timing.micro.tp / llama.layers
    assert per_layer == pytest.approx(ep04.comm_s, rel=1e-12)
    share = ep04.step_compute_s / (ep04.step_compute_s + ep04.step_comm_s)
    assert r.parts["tp"] == pytest.approx(share, abs=0.002)
    assert ep04.step_efficiency < r.parts["tp"]


def test_dp_exposure_is_the_worst_stage_and_its_slack_is_the_schedules():
    """1F1B: the first stage starts first and ends last (no idle to hide DP traffic in), the
    last stage idles p−1 backward slots at the end; the seed's DP part is the first stage's."""
    slack = pipeline_slack("1f1b", 4, 16, 1)
    assert slack[0] == (0.0, 0.0)
    assert [end for _, end in slack] == sorted(end for _, end in slack)
    # Each stage's end idle: (p−1−... ) backward slots of 2 units in a makespan of 3·(m+p−1).
    assert slack[3][1] == pytest.approx(3 * 2 / (3 * 19), rel=1e-9)
    # Buckets: Megatron's default of max(40M, 1M x DP) parameters.
    assert megatron_bucket_params(2) == 40_000_000
    assert megatron_bucket_params(128) == 128_000_000


def test_rank_group_pattern_finds_what_the_walk_finds():
    for lay in (ParallelLayout(tp=8, pp=4, dp=2), ParallelLayout(tp=2, cp=4, dp=8, pp=2),
                ParallelLayout(tp=4, pp=3, dp=6, cp=2), ParallelLayout(tp=1, dp=24, pp=2),
                ParallelLayout(tp=2, pp=2, dp=8, ep=4)):
        for kind in ("tp", "cp", "dp-cp", "ep", "edp"):
            for g in (1, 4, 6, 8):
                walked = []
                for group in lay.groups(kind):
                    counts = Counter(rank // g for rank in group)
                    walked.append((len(counts), min(counts.values()), len(group)))
                s = spread(lay, kind, g)
                assert s.nodes == max(w[0] for w in walked)
                assert s.per_node == min(min(w[1] for w in walked), s.size)
                assert s.size == walked[0][2]


def test_dp64_does_not_fit_and_tp16_spans_nodes():
    dp64 = evaluate(Plan(dp=64, zero=1, microbatches=16, seq_len=2048), GPT3, A100, 8)
    assert dp64.legal and not dp64.fits and not audit(dp64, "Memory per GPU").ok
    tp16 = evaluate(Plan(tp=16, pp=4, zero=1, microbatches=16, seq_len=2048), GPT3, A100, 8)
    assert tp16.legal and tp16.fits
    tp_audit = audit(tp16, "TP inside a node")
    assert not tp_audit.ok and "spans 2 nodes" in tp_audit.detail
    # Across InfiniBand, TP costs far more than inside the node.
    assert tp16.parts["tp"] < evaluate(SEED, GPT3, A100, 8).parts["tp"] - 0.1


def test_every_broken_rule_is_listed_not_only_the_first():
    r = evaluate(Plan(tp=3, pp=5, dp=2, microbatches=16, seq_len=2048), GPT3, A100, 8)
    assert not r.legal and not r.fits
    assert {a.field for a in r.audits} == {"dp", "pp"}
    assert all(not a.ok for a in r.audits)
    # Heads and layers of Llama: TP 16 breaks the KV heads, PP 3 the 80 layers.
    r = evaluate(Plan(tp=16, pp=3, dp=1, microbatches=16), LLAMA70, H100, 6)
    assert [a.field for a in r.audits] == ["tp", "pp"]


def test_step_bar_sums_to_the_step_and_mfu_follows_6nd():
    r = evaluate(SEED, GPT3, A100, 8)
    assert sum(r.segments.values()) == pytest.approx(r.step_s, rel=1e-12)
    flops = model_flops_per_token(GPT3, 2048) * SEED.global_batch * 2048
    assert r.mfu == pytest.approx(flops / (r.step_s * 64 * A100.gpu.bf16_flops), rel=1e-12)
    assert r.tokens_per_s == pytest.approx(SEED.global_batch * 2048 / r.step_s)
    # Full recomputation runs ≈ 8·N·D for 6·N·D of model FLOPs: MFU under 3/4 of rate x
    # efficiency (its kernels run below the full-wave GEMM rate), and under selective's.
    full = evaluate(Plan(**{**SEED.__dict__, "recompute": "full"}), GPT3, A100, 8)
    ratio = model_flops_per_token(GPT3, 2048) / hardware_flops_per_token(GPT3, 2048, "full")
    assert full.mfu < ratio * full.efficiency * full.matmul_efficiency
    assert full.mfu < r.mfu
    assert ratio == pytest.approx(0.75, abs=0.01)


def test_bubble_is_the_simulators_measurement():
    for schedule, p, m, v in (("1f1b", 4, 16, 1), ("interleaved-1f1b", 4, 16, 2),
                              ("zb-h1", 8, 32, 1)):
        expected = simulate(PipelineInput(schedule=schedule, stages=p, microbatches=m,
                                          virtual=v)).bubble_fraction
        # 1F1B comes from its closed-form timeline: the same figure up to float rounding.
        assert measured_bubble(schedule, p, m, v) == pytest.approx(expected, rel=1e-12)


def test_worked_plan_llama_70b_on_32_h100s():
    def run(**kw):
        return evaluate(Plan(zero=1, seq_len=8192, **kw), LLAMA70, H100, 4)

    dp_only = run(dp=32)
    assert not dp_only.fits  # 496 GB: the optimizer is sharded, the weights are not
    tp8 = run(tp=8, dp=4)
    assert audit(tp8, "TP inside a node").ok and not tp8.fits  # activations overflow
    pp2 = run(tp=8, pp=2, dp=2, microbatches=2)
    assert pp2.fits and not audit(pp2, "Pipeline bubble").ok  # 1/3 idle
    assert pp2.bubble_fraction == pytest.approx(1 / 3, abs=1e-9)
    m16 = run(tp=8, pp=2, dp=2, microbatches=16)
    assert m16.passes and m16.bubble_fraction == pytest.approx(1 / 17, abs=1e-9)


def test_dp_traffic_hidden_and_exposed_add_up():
    r = evaluate(SEED, GPT3, A100, 8)
    dp = next(p for p in r.timing.parts if p.name == "dp")
    assert dp.exposed > 0 and dp.hidden > 0
    assert dp.hidden + dp.exposed == pytest.approx(dp.seconds)
    assert dp.nodes == 2  # DP pairs are 8 ranks apart: in two nodes


def _megatron_args(text):
    parser = argparse.ArgumentParser()
    for flag in ("tensor-model-parallel-size", "pipeline-model-parallel-size",
                 "context-parallel-size", "expert-model-parallel-size", "micro-batch-size",
                 "global-batch-size"):
        parser.add_argument(f"--{flag}", type=int, required=True)
    parser.add_argument("--use-distributed-optimizer", action="store_true")
    parser.add_argument("--data-parallel-sharding-strategy", default="no_shard")
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    args, _ = parser.parse_known_args(shlex.split(body.replace("\\\n", " "))[2:])
    return args


PLANS = [SEED, Plan(tp=4, pp=2, dp=8, zero=3, microbatches=4, seq_len=2048),
         Plan(tp=8, pp=1, dp=8, zero=0, microbatches=2, seq_len=2048),
         Plan(tp=2, pp=4, dp=8, zero=2, microbatches=8, seq_len=2048,
              schedule="interleaved-1f1b", virtual=2)]


@pytest.mark.parametrize("plan", PLANS)
def test_exports_round_trip(plan):
    args = _megatron_args(export(plan, GPT3, "megatron").text)
    assert (args.tensor_model_parallel_size, args.pipeline_model_parallel_size,
            args.context_parallel_size) == (plan.tp, plan.pp, plan.cp)
    dp = plan.world_size // (args.tensor_model_parallel_size
                             * args.pipeline_model_parallel_size * args.context_parallel_size)
    assert dp == plan.dp
    assert args.global_batch_size == args.micro_batch_size * plan.microbatches * dp
    zero = {"no_shard": 1 if args.use_distributed_optimizer else 0, "optim_grads": 2,
            "optim_grads_params": 3}[args.data_parallel_sharding_strategy]
    assert zero == plan.zero

    ds = json.loads(export(plan, GPT3, "deepspeed").text)
    assert ds["zero_optimization"]["stage"] == plan.zero
    # AutoTP only without the pipeline engine (round-26 reading A, finding 1).
    assert ds.get("tensor_parallel", {}).get("autotp_size") == (plan.tp if plan.pp == 1
                                                                else None)
    # The pipeline degree is the model's PipelineModule, written in the notes (fix E).
    assert "stages" not in ds["pipeline"]
    if plan.pp > 1:
        grid = (f"PipeModelDataParallelTopology(num_pp={plan.pp}, num_mp={plan.tp}, "
                f"num_dp={plan.dp})" if plan.tp > 1 else f"num_stages={plan.pp},")
        assert any("PipelineModule(layers=..., " in n and grid in n
                   for n in export(plan, GPT3, "deepspeed").notes)
    assert ds["train_micro_batch_size_per_gpu"] == plan.micro_batch
    assert ds["gradient_accumulation_steps"] == plan.microbatches
    assert ds["train_batch_size"] // (plan.micro_batch * plan.microbatches) == plan.dp

    tree = ast.parse(export(plan, GPT3, "fsdp").text)
    consts = {t.id: ast.literal_eval(n.value) for n in ast.walk(tree)
              if isinstance(n, ast.Assign) for t in n.targets
              if isinstance(t, ast.Name) and t.id.isupper() and isinstance(n.value, ast.Constant)}
    # The stage FSDP2 runs, which RESHARD_AFTER_FORWARD reads (round-27 reading A, finding 9:
    # FSDP2 has no ZeRO-1, so the plan's 1 runs as 2).
    assert consts["ZERO_STAGE"] == {0: 0, 1: 2, 2: 2, 3: 3}[plan.zero]
    assert (consts["MICRO_BATCH"], consts["MICROBATCHES"]) == (plan.micro_batch,
                                                               plan.microbatches)
    mesh = next(n for n in ast.walk(tree) if isinstance(n, ast.Call)
                and getattr(n.func, "id", "") == "init_device_mesh")
    shape = ast.literal_eval(mesh.args[1])
    names = ast.literal_eval(mesh.keywords[0].value)
    assert dict(zip(names, shape, strict=True)) == {"pp": plan.pp, "dp": plan.dp,
                                                    "cp": plan.cp, "tp": plan.tp}
    assert consts["GLOBAL_BATCH"] == plan.micro_batch * plan.microbatches * plan.dp


def test_export_names_unknown_format():
    with pytest.raises(LabInputError) as exc:
        export(SEED, GPT3, "jax")
    assert exc.value.field == "format"


def test_replan_when_two_nodes_are_lost():
    r = nearest(SEED, GPT3, A100, 6)
    assert not r.before.passes  # 48 GPUs do not divide by TP8 x PP4 into a whole DP of 2
    assert r.after is not None and r.after.passes and r.after.plan.world_size == 48
    assert r.changed and "tp" not in r.changed  # TP stays at the node
    # Nothing fits Llama 3.1 405B on 64 A100s (6.49 TB of state against 5.12 TB).
    assert nearest(SEED, get_model("llama-3.1-405b"), A100, 8).after is None


def test_plan_fields_are_validated_by_name():
    for kw, field in (({"tp": 0}, "tp"), ({"zero": 4}, "zero"), ({"schedule": "x"}, "schedule"),
                      ({"pp": 65}, "pp"), ({"recompute": "some"}, "recompute")):
        with pytest.raises(LabInputError) as exc:
            Plan(**kw)
        assert exc.value.field == field


def test_a_plan_timed_in_closed_form_is_not_held_to_the_simulators_bound():
    """Interleaved 1F1B in whole rounds is timed by its closed form (labs.schedules.catalogue
    flush), never simulated: 16 stages x 512 micro-batches x 8 chunks (131,072 actions, twice
    the simulator's bound) is a plan the recipe times, its bubble Narayanan's (p−1)/(v·m+p−1).
    A schedule that must be simulated keeps the bound, and says so on the micro-batches."""
    model, cluster = get_model("llama-3.1-405b"), get_cluster("dgx-h100")
    big = dict(tp=8, pp=14, dp=8, seq_len=8192, microbatches=504, recompute="full")
    res = evaluate(Plan(schedule="interleaved-1f1b", virtual=9, **big), model, cluster, 112)
    assert res.legal and res.step_s > 0
    assert 2 * 14 * 504 * 9 > 65536
    assert res.bubble_fraction == pytest.approx(13 / (9 * 504 + 13))
    refused = evaluate(Plan(schedule="interleaved-zb", virtual=9, **big), model, cluster, 112)
    assert not refused.legal
    assert any(e.field == "microbatches" and "too much work to simulate" in e.message
               for e in refused.problems)


@pytest.mark.parametrize("plan", PLANS + [dataclasses.replace(p, sequence_parallel=False)
                                           for p in PLANS if p.tp > 1])
def test_each_export_says_whether_it_runs_the_plans_sequence_parallelism(plan):
    """Megatron's export turns on --sequence-parallel exactly when the plan runs it (TP > 1 and
    the plan's sequence_parallel, on by default); the FSDP2 snippet's TP_PLAN has no
    SequenceParallel, so it says so (cold reading, issue 36): its activations are not the
    plan's."""
    megatron_sp = "--sequence-parallel" in export(plan, GPT3, "megatron").text
    fsdp = export(plan, GPT3, "fsdp")
    noted = any(n.startswith("sequence parallelism") for n in fsdp.notes)
    assert megatron_sp == (plan.tp > 1 and plan.sequence_parallel)
    assert "SequenceParallel" not in fsdp.text.split("TP_PLAN")[1]
    assert noted == (plan.tp > 1 and plan.sequence_parallel)


@pytest.mark.parametrize("recipe", ["adam16", "adam18", "adam12", "fp8-delayed", "fp8-blockwise"])
def test_megatron_export_reduces_gradients_in_the_recipes_dtype(recipe):
    """Round-6 cold reading of EP08, item 8: the export for the 16 B recipe, which keeps and
    reduces gradients in bf16, left out --grad-reduce-in-bf16, so the exported run reduced in
    fp32 (Megatron-LM's default, a store_true flag in megatron/training/arguments.py). The
    flag follows the bytes the lab's DP sync moves: 2-byte gradients set it, 4-byte do not."""
    from labs.core.catalogue import RECIPES

    parser = argparse.ArgumentParser()
    parser.add_argument("--grad-reduce-in-bf16", action="store_true")
    text = export(dataclasses.replace(SEED, recipe=recipe), GPT3, "megatron").text
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    args, _ = parser.parse_known_args(shlex.split(body.replace("\\\n", " "))[2:])
    assert args.grad_reduce_in_bf16 == (RECIPES[recipe].gradients == 2)
