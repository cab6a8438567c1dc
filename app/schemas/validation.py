"""/api/validation: the published runs the step model is checked against, beside the lab's."""

from pydantic import BaseModel, Field

from labs.recipe.runs import RUNS_USE


class ValidationLayout(BaseModel):
    tp: int
    pp: int
    dp: int
    cp: int = Field(description="Context-parallel degree.")
    ep: int = Field(description="Expert-parallel degree.")
    zero: int = Field(description="ZeRO stage (3: FSDP).")
    virtual: int = Field(description="Model chunks per pipeline rank (interleaved 1F1B).")
    micro_batch: int
    microbatches: int = Field(description="Micro-batches per step per data-parallel rank.")
    global_batch: int
    recompute: str
    sequence_parallel: bool
    schedule: str


class ValidationRun(BaseModel):
    id: str
    name: str
    source: str = Field(description="The paper (and table) that published the run.")
    group: str
    gpus: int
    params_b: float = Field(description="Parameters, billions, as the paper names the model.")
    layout: ValidationLayout
    published_tflops_per_gpu: float | None = Field(
        description="As published (Narayanan et al. 2021 Table 1, eq. 3), or null.")
    lab_tflops_per_gpu: float | None = Field(
        description="The lab's step through the same eq. 3 (null for a validation run: eq. 3 "
                    "counts Narayanan's GPT only).")
    published_step_s: float = Field(description="Seconds per iteration: as published "
                                    "(Korthikanti et al. 2022), Narayanan's Table 1 TFLOP/s "
                                    "turned back by eq. 3, or a validation run's tokens/s per "
                                    "GPU turned back by the step's tokens.")
    lab_step_s: float
    published_tokens_per_s_per_gpu: float
    lab_tokens_per_s_per_gpu: float
    ratio: float = Field(description="Lab throughput / published throughput (> 1: the lab is "
                                     "fast).")
    recipe_url: str = Field(description="EP08 at this run's plan, model, cluster and software.")
    note: str = Field("", description="What the lab timed where it cannot time the run's "
                      "exact setting, then, where known, why the lab errs on this row (its "
                      "figures computed from this answer).")


class ValidationSummary(BaseModel):
    runs: int
    median_deviation: float = Field(description="Median |ratio − 1|.")
    worst_deviation: float = Field(description="Largest |ratio − 1|.")
    within_10: int = Field(description="Runs within ±10%.")
    within_25: int = Field(description="Runs within ±25%.")
    median_ratio: float = Field(description="Median lab/published throughput (> 1: the lab "
                                            "is fast).")
    min_ratio: float = Field(description="Lowest lab/published throughput.")
    max_ratio: float = Field(description="Highest lab/published throughput.")
    fast: int = Field(description="Runs the lab is fast on (ratio > 1).")


class ValidationGroup(ValidationSummary):
    group: str
    title: str = Field(description="The group as the page names it (its source).")


class ValidationAnswer(BaseModel):
    runs: list[ValidationRun] = Field(
        description="The published Megatron-LM runs (Narayanan et al. 2021 Table 1, "
                    "Korthikanti et al. 2022 Table 5 and sec 6.3). " + RUNS_USE + ".")
    summary: ValidationSummary
    left_out: list[str] = Field(description="What the step model does not count.")
    validation_runs: list[ValidationRun] = Field(
        description="Published runs of other software and GPUs (torchtitan's FSDP2 runs, MoE "
                    "runs, NeMo's FP8 runs), checked the same way. " + RUNS_USE + ".")
    validation_summary: ValidationSummary
    groups: list[ValidationGroup] = Field(
        description="Each group of runs, calibration groups first, summarised alone.")
