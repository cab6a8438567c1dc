"""Bring your own run's engine (labs.runs_log): each fixture log (tests/fixtures/runs, written
in the frameworks' own formats; BLOOM's iteration line is BigScience's) read to its exact plan
and measurements; bad input refused with a message naming what was looked for or what
contradicts; and a fuzz: any text is a run or a LabInputError, never another exception."""

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labs.core.errors import LabInputError
from labs.core.limits import MAX_LOG_BYTES
from labs.runs_log.common import ANSI
from labs.runs_log.inputs import GIB, MIB
from labs.runs_log.lab import compare, read_run, recipe_params

FIXTURES = Path(__file__).parents[1] / "fixtures" / "runs"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


SOFTWARE_MEGATRON = {"first_stage_layers": "0", "last_stage_layers": "0", "attention": "auto",
                     "dropout": "false", "fp8": "false", "tp_overlap": "backward",
                     "grad_accum_fusion": "true"}


def test_megatron_llama_log_reads_to_its_exact_plan():
    run = read_run(text("megatron_llama3_8b.log"))
    assert run.framework == "megatron"
    assert run.query == {"model": "llama-3.1-8b", "tp": "2", "pp": "2", "dp": "2", "cp": "1",
                         "ep": "1", "zero": "1", "recompute": "selective",
                         "schedule": "interleaved-1f1b", "virtual": "2", "micro_batch": "1",
                         "microbatches": "32", "seq_len": "8192", "sequence_parallel": "true",
                         "dp_overlap": "true", **SOFTWARE_MEGATRON, "recipe": "adam18"}
    assert run.defaulted == ()  # accumulate_allreduce_grads_in_fp32 True: fp32 gradients
    assert run.world_size == 8
    m = run.measured
    # The median of the four lines after the first (13702.6 ms is warm-up).
    assert m.step_s == pytest.approx((8109.3 + 8112.4) / 2 / 1000)
    assert m.steps == 4
    assert m.tokens_per_s_per_gpu == pytest.approx(64 * 8192 / (m.step_s * 8))
    assert m.peak_allocated_bytes == 46367.1 * MIB  # max over the ranks reported
    assert m.peak_reserved_bytes == 49150.0 * MIB
    assert m.theory_state_bytes == 22974.76 * MIB  # the line as printed: MB of 2^20 B
    assert m.theory_activation_bytes == 20520.08 * MIB
    assert set(run.found) == {"arguments", "iterations", "memory", "theoretical memory"}



def test_megatron_theoretical_line_is_megatrons_formula_for_the_fixtures_arguments():
    """Round-24 fixB, item 3: the fixture printed 'weight and optimizer=20482.53 MB', a figure
    no argument of its own gives. Megatron-LM's report_theoretical_memory
    (megatron/training/theoretical_memory_usage.py) works the most loaded shard: the first
    stage's (layers ÷ PP + the embedding) ÷ TP, at 6 + 12/DP bytes a parameter under the
    distributed optimizer; its activations (SP with selective recomputation) are
    s·b·h·(18 + 4·ffn/h) a layer over all L, plus the embedding's 8·s·b + s·b·h for PP
    micro-batches in flight, times 1 + (PP − 1)/(PP·VPP), ÷ TP. Worked here by hand from the
    log's arguments (TP 2, PP 2, VPP 2, DP 2, h 4,096, ffn 14,336, 32 layers, 32 heads in 8
    query groups, untied embeddings, vocabulary 128,256, s 8,192, b 1)."""
    h, ffn, layers, vocab, s = 4096, 14336, 32, 128256, 8192
    layer = 2 * h * (ffn * 3 / 2 + 1) + 2 * h * h * (1 + 8 / 32)  # RMSNorm: 1 a norm
    block = layers * layer + h  # and the final norm
    shard = (block / 2 + h * vocab) / 2  # the first stage's, ÷ TP 2
    state = shard * (6 + 12 / 2)
    assert state == 24_090_783_744  # 24.09 GB, 22,974.76 MiB
    act = (s * h * (18 + 4 * ffn / h) * layers + 8 * s * 2 + s * h * 2) * (1 + 1 / 4) / 2
    m = read_run(text("megatron_llama3_8b.log")).measured
    assert m.theory_state_bytes == pytest.approx(state, abs=0.005 * MIB)
    assert m.theory_activation_bytes == pytest.approx(act, abs=0.005 * MIB)
    # Megatron's estimate and the lab's ledger count the same 12 B a parameter on the same
    # shard: the page sets 24.09 GB beside 24.09 GB (until now 21.48 beside 24.09).
    from labs.hardware.links import get_cluster
    from labs.model.presets import get_model
    from labs.recipe.inputs import Plan
    from labs.recipe.lab import evaluate

    result = evaluate(Plan(tp=2, pp=2, dp=2, zero=1, schedule="interleaved-1f1b", virtual=2,
                           microbatches=32, seq_len=8192, dp_overlap=True, recipe="adam18"),
                      get_model("llama-3.1-8b"), get_cluster("dgx-h100"), 1)
    note = next(n for n in compare(read_run(text("megatron_llama3_8b.log")), result).notes
                if n.startswith("Megatron's own estimate"))
    assert "weights and optimizer: 24.09 GB; the lab's ledger: 24.09 GB" in note

def test_bloom_176b_public_line_reads_with_its_slurm_plan():
    run = read_run(text("bloom_176b.log"))
    assert run.query == {"model": "L70.h14336.a112.f57344.v250880.tie.lb.ln.nogate",
                         "tp": "4", "pp": "12", "dp": "8", "cp": "1", "ep": "1", "zero": "1",
                         "recompute": "full", "schedule": "1f1b", "virtual": "1",
                         "micro_batch": "2", "microbatches": "128", "seq_len": "2048",
                         "sequence_parallel": "false", "dp_overlap": "false",
                         **SOFTWARE_MEGATRON, "first_stage_layers": "5",
                         "last_stage_layers": "5", "attention": "unfused",
                         "recipe": "adam16"}
    assert run.world_size == 384
    assert run.measured.step_s == 105.22  # "elapsed time per iteration (s): 105.22"
    assert run.measured.tflops_per_gpu == 149.02  # "TFLOPs: 149.02"
    assert run.measured.steps == 1
    assert run.model.params == pytest.approx(176.2e9, rel=2e-3)  # BLOOM's 176B
    assert any("BF16_Optimizer" in n for n in run.notes)
    assert any("first and last stages hold 5 layers" in n for n in run.notes)
    # DeepSpeed's gradients are its own: the lab's 16 B recipe, said.
    assert any("BF16_Optimizer holds fp32 gradient buffers" in n for n in run.notes)


def test_torchtitan_config_and_coloured_step_lines():
    raw = text("torchtitan_llama3_70b.log")
    assert "\x1b[" in raw  # the step lines carry torchtitan's colour codes
    run = read_run(raw)
    assert run.framework == "torchtitan"
    assert run.query == {"model": "llama-3.1-70b", "tp": "8", "pp": "1", "dp": "8", "cp": "1",
                         "ep": "1", "zero": "3", "recompute": "full", "schedule": "1f1b",
                         "virtual": "1", "micro_batch": "4", "microbatches": "2",
                         "seq_len": "8192", "fp8": "false", "sequence_parallel": "true",
                         "dropout": "false", "tp_overlap": "none", "gpu": "h100-sxm"}
    m = run.measured
    assert m.tokens_per_s_per_gpu == 700  # median of 698 703 700 (step 1 left out)
    assert m.step_s == pytest.approx(64 * 8192 / (700 * 64))
    assert m.mfu == pytest.approx(0.3408)
    assert m.peak_reserved_bytes == pytest.approx(61.37 * GIB)
    assert m.peak_allocated_bytes is None  # torchtitan's line gives reserved only
    assert m.gpu_capacity_bytes == pytest.approx(79.11 * GIB)
    params, defaulted = recipe_params(run, {})
    assert params["nodes"] == "8" and params["gpu"] == "h100-sxm"
    assert [d[0] for d in defaulted] == ["tp_overlap", "intra_link", "inter_link",
                                         "gpus_per_node"]


TITAN_TP = ("[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 2\n"
            "seq_len = 4096\n[parallelism]\ndata_parallel_shard_degree = 4\n"
            "tensor_parallel_degree = 2\n")


def test_torchtitan_tp_overlap_is_what_torchtitan_runs():
    """Round-24 cold reading B #1: a config without async TP was timed with Megatron's
    backward TP overlap ("backward"). torchtitan overlaps no TP collective unless
    enable_async_tensor_parallel (AsyncTP, the lab's "all"); a config silent on it is named
    in defaulted."""
    silent = read_run(TITAN_TP)
    assert silent.query["tp_overlap"] == "none"
    assert [d[:2] for d in silent.defaulted] == [("tp_overlap", "none")]
    assert "enable_async_tensor_parallel" in silent.defaulted[0][2]
    off = read_run(TITAN_TP + "enable_async_tensor_parallel = false\n")
    assert off.query["tp_overlap"] == "none" and off.defaulted == ()
    on = read_run(TITAN_TP + "enable_async_tensor_parallel = true\n")
    assert on.query["tp_overlap"] == "all" and on.defaulted == ()
    assert any("AsyncTP" in n for n in on.notes)
    with pytest.raises(LabInputError, match="enable_async_tensor_parallel"):
        read_run(TITAN_TP + "enable_async_tensor_parallel = 3\n")
    # Without TP there is nothing to overlap, so nothing assumed.
    no_tp = read_run(TITAN_TP.replace("tensor_parallel_degree = 2", "tensor_parallel_degree = 1"))
    assert no_tp.defaulted == ()


def _arguments(replace: dict[str, str | None]) -> str:
    """The Llama fixture with some printed argument lines changed (None: taken out)."""
    lines = []
    for line in text("megatron_llama3_8b.log").split("\n"):
        name = line.split(" .")[0].strip()
        if name in replace:
            if replace[name] is None:
                continue
            line = line.rsplit(" ", 1)[0] + " " + replace[name]
        lines.append(line)
    return "\n".join(lines)


def test_megatron_gradient_precision_picks_the_recipe():
    """Round-24 cold reading B #2: the lab billed bf16 gradients (16 B) whatever the log said.
    Megatron-LM keeps fp32 main gradients under bf16 unless --grad-reduce-in-bf16
    (validate_args sets accumulate_allreduce_grads_in_fp32); the recipe is the one whose
    gradient bytes match, and a block that prints neither is assumed and named."""
    from labs.core.catalogue import RECIPES

    fp32 = read_run(text("megatron_llama3_8b.log"))
    assert RECIPES[fp32.query["recipe"]].gradients == 4
    assert any("accumulate_allreduce_grads_in_fp32 True" in n and "18 B/param" in n
               for n in fp32.notes)  # said under "How the log was read"
    bf16 = read_run(_arguments({"accumulate_allreduce_grads_in_fp32": "False",
                                "grad_reduce_in_bf16": "True"}))
    assert RECIPES[bf16.query["recipe"]].gradients == 2 and bf16.defaulted == ()
    only_flag = read_run(_arguments({"accumulate_allreduce_grads_in_fp32": None,
                                     "grad_reduce_in_bf16": "True"}))
    assert only_flag.query["recipe"] == bf16.query["recipe"] and only_flag.defaulted == ()
    silent = read_run(_arguments({"accumulate_allreduce_grads_in_fp32": None,
                                  "grad_reduce_in_bf16": None}))
    assert silent.query["recipe"] == fp32.query["recipe"]
    assert [d[:2] for d in silent.defaulted] == [("recipe", fp32.query["recipe"])]
    assert "grad_reduce_in_bf16" in silent.defaulted[0][2]
    fp16 = read_run(_arguments({"accumulate_allreduce_grads_in_fp32": None,
                                "grad_reduce_in_bf16": None, "bf16": "False",
                                "fp16": "True"}))
    assert fp16.query["recipe"] == bf16.query["recipe"]


def test_fixture_stamps_advance_by_the_logged_step_times():
    """Round-24 cold reading B #17: the fixtures' stamps were 10 s apart for 8.1 s and 11.7 s
    steps logged every 10. Each line's stamp is now the previous one's plus the steps between
    them at the line's own step time."""
    from datetime import datetime

    mega = text("megatron_llama3_8b.log")
    stamps = [(datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f"), int(m.group(2)),
               float(m.group(3))) for m in re.finditer(
        r"\[([\d-]+ [\d:.]+)\] iteration\s+(\d+)/.*?elapsed time per iteration \(ms\): "
        r"([\d.]+)", mega)]
    assert len(stamps) == 5
    for (t0, i0, _), (t1, i1, ms) in zip(stamps, stamps[1:], strict=False):
        assert (t1 - t0).total_seconds() == pytest.approx((i1 - i0) * ms / 1000, abs=1e-3)
    titan = read_run(text("torchtitan_llama3_70b.log"))
    lines = [(datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f"), int(m.group(2)),
              int(m.group(3))) for m in re.finditer(
        r"titan\] ([\d-]+ [\d:,]+) .*?step:\s*(\d+) .*?tps: (\d+)",
        ANSI.sub("", text("torchtitan_llama3_70b.log")))]
    assert len(lines) == 4
    for (t0, s0, _), (t1, s1, tps) in zip(lines, lines[1:], strict=False):
        step_s = titan.measured.global_batch * 8192 / (tps * titan.world_size)
        assert (t1 - t0).total_seconds() == pytest.approx((s1 - s0) * step_s, abs=1e-3)


def test_torchtitan_shard_minus_one_and_unknown_flavor_are_defaulted_and_said():
    config = ("[model]\nname = \"qwen3\"\nflavor = \"14B\"\n[training]\nlocal_batch_size = 2\n"
              "seq_len = 4096\n[parallelism]\ndata_parallel_shard_degree = -1\n"
              "tensor_parallel_degree = 2\n")
    run = read_run(config)
    assert run.world_size == 8 and run.query["dp"] == "4" and run.query["tp"] == "2"
    assert {d[0] for d in run.defaulted} == {"gpus", "model", "tp_overlap"}
    assert read_run(config, gpus=32).query["dp"] == "16"
    with pytest.raises(LabInputError, match="multiple of TP 2"):
        read_run(config, gpus=7)


def test_memory_stats_beside_a_plan():
    stats = text("memory_stats.json")
    run = read_run("", stats, plan="/episodes/recipe-3d?model=llama-3.1-8b&nodes=1&tp=2&pp=2"
                                   "&dp=2&microbatches=8")
    assert run.framework == "memory_stats" and run.world_size == 8
    assert run.measured.peak_allocated_bytes == 42171539456
    assert run.measured.peak_reserved_bytes == 45955743744
    # Pasted in the log's box, the JSON is recognised as memory_stats too.
    assert read_run(stats, plan="tp=8&nodes=1").measured.peak_reserved_bytes == 45955743744
    nested = json.dumps({"allocated_bytes": {"all": {"peak": 5}},
                         "reserved_bytes": {"all": {"peak": 7}}})
    assert read_run("", nested, plan="nodes=1").measured.peak_reserved_bytes == 7
    beside = read_run(text("megatron_llama3_8b.log"), stats)
    assert beside.measured.peak_allocated_bytes == 42171539456  # the JSON's, over the log's
    assert beside.measured.step_s is not None


@pytest.mark.parametrize("log, stats, plan, field, words", [
    ("", "", "", "log", "paste a Megatron-LM or torchtitan log"),
    ("hello\nworld", "", "", "log", "no recognisable lines: looked for Megatron-LM's arguments"),
    ("", '{"a": 1}', "", "plan", "needs the plan beside it"),
    ("", "[1, 2]", "nodes=1", "memory_stats", "expected a JSON object"),
    ("", "{not json", "nodes=1", "memory_stats", "not JSON"),
    ("", '{"allocated_bytes.all.peak": 1}', "nodes=1", "memory_stats",
     "no reserved_bytes.all.peak"),
    ("x" * (MAX_LOG_BYTES + 1), "", "", "log", "65,536-byte limit"),
    ("", "{" + " " * MAX_LOG_BYTES + "}", "nodes=1", "memory_stats", "65,536-byte limit"),
    (" iteration 10/ 100 | elapsed time per iteration (ms): 5.0 |", "", "", "log",
     "no arguments block"),
    ("[parallelism]\ntensor_parallel_degree = \"two\"\n", "", "", "log",
     "expected a whole number"),
    ("[parallelism]\ntensor_parallel_degree = 2\nbad = [\n", "", "", "log", "not valid TOML"),
])
def test_bad_input_names_what_was_looked_for(log, stats, plan, field, words):
    with pytest.raises(LabInputError) as err:
        read_run(log, stats, plan)
    assert err.value.field == field
    assert words in err.value.message


def test_a_figure_that_is_not_finite_is_read_as_nothing():
    log = text("megatron_llama3_8b.log").replace("8105.9", "1e400")
    log = log.replace("max reserved: 49150.0", "max reserved: 1e999")
    m = read_run(log).measured
    assert m.step_s == pytest.approx(8.1124)  # the median of the 3 finite lines after the first
    assert m.peak_reserved_bytes == 43178.0 * MIB  # rank 0's and 1's lines dropped
    titan = text("torchtitan_llama3_70b.log").replace("tps: 698", "tps: " + "9" * 400)
    assert read_run(titan).measured.tokens_per_s_per_gpu == (703 + 700) / 2


def test_contradictory_arguments_name_the_degrees_and_the_world_size():
    with pytest.raises(LabInputError) as err:
        read_run(text("megatron_contradictory.log"))
    assert err.value.message == ("contradictory arguments in the arguments block: TP 2 × PP 2 "
                                 "× CP 1 × DP 2 = 8, but the world size is 16")
    toml = ("[training]\nlocal_batch_size = 2\n[parallelism]\ndata_parallel_shard_degree = 4\n"
            "tensor_parallel_degree = 2\n")
    with pytest.raises(LabInputError, match="TP 2 × PP 1 × CP 1 × DP 4 = 8, but the world "
                                            "size is 16"):
        read_run(toml, gpus=16)


def test_compare_puts_each_figure_beside_the_lab():
    from labs.hardware.links import get_cluster
    from labs.model.presets import get_model
    from labs.recipe.inputs import Plan
    from labs.recipe.lab import evaluate

    run = read_run(text("megatron_llama3_8b.log"))
    result = evaluate(Plan(tp=2, pp=2, dp=2, zero=1, schedule="interleaved-1f1b", virtual=2,
                           microbatches=32, seq_len=8192, dp_overlap=True),
                      get_model("llama-3.1-8b"), get_cluster("dgx-h100"), 1)
    done = compare(run, result)
    figures = {f.name: f for f in done.figures}
    assert figures["step_time"].ratio == pytest.approx(run.measured.step_s / result.step_s)
    assert figures["peak_allocated_bytes"].predicted == result.memory_per_gpu_bytes
    parts = {r.name: r.bytes for r in done.residuals}
    assert parts["caching_allocator"] == pytest.approx((49150.0 - 46367.1) * MIB)
    assert parts["beyond_ledger"] == pytest.approx(46367.1 * MIB - result.memory_per_gpu_bytes)
    assert parts["outside_pytorch"] is None  # the log cannot say
    # Megatron prints no MFU: the run's is worked out from its tokens/s, and says so.
    assert figures["mfu"].derived
    assert figures["mfu"].ratio == pytest.approx(figures["tokens_per_s_per_gpu"].ratio)


ARG_NAMES = ["tensor_model_parallel_size", "pipeline_model_parallel_size", "world_size",
             "data_parallel_size", "num_layers", "hidden_size", "num_attention_heads",
             "global_batch_size", "micro_batch_size", "seq_length", "padded_vocab_size",
             "num_query_groups", "group_query_attention", "recompute_granularity",
             "virtual_pipeline_model_parallel_size", "num_experts", "ffn_hidden_size"]
VALUES = st.one_of(st.integers(-3, 5000).map(str), st.sampled_from(
    ["None", "True", "False", "selective", "full", "1e400", "nan", "-1", "0", "8"]),
    st.text(max_size=8))


@st.composite
def megatron_like(draw):
    lines = ["------------------------ arguments ------------------------"]
    for name, val in draw(st.lists(st.tuples(st.sampled_from(ARG_NAMES), VALUES), max_size=14)):
        lines.append(f"  {name} {'.' * (48 - len(name))} {val}")
    if draw(st.booleans()):
        lines.append("-------------------- end of arguments ---------------------")
    for _ in range(draw(st.integers(0, 3))):
        ms = draw(st.sampled_from(["5402.7", "0.0", "nan", "-1", "1e400", "x"]))
        lines.append(f" iteration 10/ 100 | elapsed time per iteration (ms): {ms} | global "
                     f"batch size: {draw(st.integers(0, 999))} |")
    lines += draw(st.lists(st.text(max_size=40), max_size=3))
    return "\n".join(lines)


@st.composite
def torchtitan_like(draw):
    keys = ["tensor_parallel_degree", "pipeline_parallel_degree", "data_parallel_shard_degree",
            "data_parallel_replicate_degree", "context_parallel_degree", "local_batch_size",
            "global_batch_size", "seq_len", "pipeline_parallel_microbatch_size", "mode",
            "pipeline_parallel_schedule", "flavor", "name"]
    tables = ["model", "training", "parallelism", "activation_checkpoint", "float8"]
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        lines.append(f"[{draw(st.sampled_from(tables))}]")
        for key in draw(st.lists(st.sampled_from(keys), max_size=4, unique=True)):
            val = draw(st.one_of(st.integers(-2, 70000).map(str),
                                 st.sampled_from(['"8B"', '"llama3"', '"full"', '"op"', "true",
                                                  '"Interleaved1F1B"', "[1]", "1.5"])))
            lines.append(f"{key} = {val}")
    lines.append(f"step: 1  loss: 2.0  memory: {draw(st.sampled_from(['1.0', '0', '1e9']))}"
                 f"GiB(5.0%)  tps: {draw(st.sampled_from(['0', '1,000', '12']))}")
    return "\n".join(lines)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200), megatron_like(), torchtitan_like()),
       st.one_of(st.just(""), st.text(max_size=30),
                 st.sampled_from(['{"allocated_bytes.all.peak": 1e300}', "{}", "[]", "1"])),
       st.one_of(st.just(""), st.text(max_size=30), st.just("nodes=1&tp=8")),
       st.one_of(st.none(), st.integers(-5, 70000)))
def test_fuzz_reads_a_run_or_says_why(log, stats, plan, gpus):
    try:
        run = read_run(log, stats, plan, gpus)
    except LabInputError as exc:
        assert exc.message
        return
    numbers = [v for v in vars(run.measured).values() if isinstance(v, float)]
    assert all(math.isfinite(v) for v in numbers)  # every figure can be sent as JSON
    try:
        recipe_params(run, {})
    except LabInputError as exc:
        assert exc.message


def test_a_torchtitan_hsdp_config_loads_its_shard_degree():
    """data_parallel_replicate_degree x data_parallel_shard_degree is HSDP: the recipe takes
    the shard degree as dp_shard (DP = shard x replicas), and the page's answer is HSDP's."""
    config = ("[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 1\n"
              "seq_len = 8192\n[parallelism]\ndata_parallel_replicate_degree = 8\n"
              "data_parallel_shard_degree = 4\ntensor_parallel_degree = 2\n")
    run = read_run(config)
    assert run.world_size == 64
    assert (run.query["dp"], run.query["dp_shard"], run.query["zero"]) == ("32", "4", "3")
    assert any("HSDP: 8 replicas of 4-way FSDP" in n for n in run.notes)
