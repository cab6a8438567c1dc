"""The pipeline lab's sends sized on a real link (issue: the send latency comes from the
boundary's size on the chosen link, with a typed override)."""

import pytest

from labs.hardware.gpus import get_gpu
from labs.hardware.links import get_link
from labs.model.presets import get_model
from labs.pipeline.inputs import PipelineLabInput
from labs.pipeline.lab import run_pipeline_lab, stage_forward_seconds
from labs.schedules.inputs import PipelineInput

LLAMA_70B = get_model("llama-3.1-70b")
H100 = get_gpu("h100-sxm")


def lab(link: str | None, p2p: float | None = None) -> PipelineLabInput:
    return PipelineLabInput(
        pipeline=PipelineInput(stages=8, microbatches=16, p2p=p2p), model=LLAMA_70B, gpu=H100,
        tp=8, seq_len=4096, micro_batch=1, link=None if link is None else get_link(link))


def test_a_send_is_the_boundary_tensor_on_the_link_in_units_of_a_stage_forward():
    link = get_link("eth-100g")
    result = run_pipeline_lab(lab("eth-100g")).result
    # s·b·h·2 / t bytes (Narayanan et al. 2021 sec. 4.1): 4096 x 8192 x 2 / 8 = 8,388,608 B.
    size = 4096 * 8192 * 2 / 8
    assert result.send_seconds == pytest.approx(link.latency + size / link.bandwidth, rel=1e-9)
    f = stage_forward_seconds(LLAMA_70B, H100, stages=8, tp=8, seq_len=4096, micro_batch=1,
                              mfu=0.4)
    assert result.send_time == pytest.approx(result.send_seconds / f, rel=1e-9)


def test_forward_of_one_stage_is_a_third_of_the_training_flops_at_the_mfu():
    # 2·N per token forward (Kaplan et al. 2020): 70.6B x 2 x 4096 tokens / (8 x 8 GPUs x
    # 989.4 TFLOP/s x 0.4) is about 23 ms before attention; attention adds a little.
    f = stage_forward_seconds(LLAMA_70B, H100, stages=8, tp=8, seq_len=4096, micro_batch=1,
                              mfu=0.4)
    lower = 2 * LLAMA_70B.params * 4096 / (64 * H100.bf16_flops * 0.4)
    assert lower < f < 1.2 * lower


def test_a_slow_link_grows_the_measured_bubble_and_a_typed_latency_overrides_it():
    free = run_pipeline_lab(lab(None)).result
    slow = run_pipeline_lab(lab("eth-25g")).result
    fast = run_pipeline_lab(lab("nvlink-4")).result
    assert free.send_time == 0 and free.send_seconds is None
    assert free.bubble_fraction < fast.bubble_fraction < slow.bubble_fraction
    typed = run_pipeline_lab(lab("eth-25g", p2p=0.0)).result
    assert typed.send_time == 0 and typed.bubble_fraction == pytest.approx(free.bubble_fraction)
