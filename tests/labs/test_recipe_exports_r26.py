"""Round-26 cold reading A, findings 1, 3 and 10: the exports' DeepSpeed grid, FSDP2's
in-place fully_shard and PyTorch's own ZeRO-1."""

import json

from labs.model.presets import get_model
from labs.recipe.export import export
from labs.recipe.inputs import Plan

GPT3 = get_model("gpt-3-175b")


def _seed() -> Plan:
    return Plan(tp=8, pp=4, dp=2, zero=1, microbatches=16, seq_len=2048)


def test_deepspeed_pipeline_module_names_tp_pp_and_dp_so_its_batch_check_holds():
    """1. PipelineModule(num_stages=4) alone builds PipeDataParallelTopology(num_pp=4,
    num_dp=world // 4) (deepspeed/runtime/pipe/module.py): on 64 GPUs DP 16, whose batch
    check wants 1 x 16 x 16 = 256 against the config's 32. The export passes the three axes,
    and the engine's DP (the topology's num_dp) times micro-batch and accumulation is the
    config's train_batch_size."""
    plan = _seed()
    out = export(plan, GPT3, "deepspeed")
    config = json.loads(out.text)
    module = next(n for n in out.notes if "PipelineModule(" in n)
    assert "topology=PipeModelDataParallelTopology(num_pp=4, num_mp=8, num_dp=2)" in module
    assert "num_stages" not in module
    dp = int(module.split("num_dp=")[1].split(")")[0])
    assert config["train_batch_size"] == (config["train_micro_batch_size_per_gpu"]
                                          * config["gradient_accumulation_steps"] * dp)
    # AutoTP is documented for TP x DP, not the pipeline engine: the config leaves it out and
    # the notes say what the student must supply.
    assert "tensor_parallel" not in config
    assert any("AutoTP" in n and "TP8" in n and "tensor-parallel layers" in n
               for n in out.notes)
    one = export(Plan(tp=8, pp=1, dp=8, zero=1, microbatches=4, seq_len=2048), GPT3,
                 "deepspeed")
    assert json.loads(one.text)["tensor_parallel"] == {"autotp_size": 8}
    assert not any("AutoTP" in n for n in one.notes)


def test_fsdp2_export_says_fully_shard_is_in_place_and_names_pytorchs_zero_1():
    """3 and 10. FSDP2's fully_shard changes the block in place (FSDP1's was the wrapper);
    PyTorch's ZeRO-1 is ZeroRedundancyOptimizer over replicate."""
    out = export(_seed(), GPT3, "fsdp")
    assert "one wrapper" not in out.text
    assert "# one call per transformer block (in place, no wrapper)" in out.text
    assert any("ZeroRedundancyOptimizer" in n for n in out.notes)
