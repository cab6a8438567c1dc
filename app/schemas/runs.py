"""Bring your own run (POST /api/runs/parse): the request and the answer."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.schemas.recipe import RecipeAnswer
from labs.core.limits import MAX_LOG_BYTES


class RunParseRequest(BaseModel):
    """A pasted run, and the cluster controls a log cannot state."""

    model_config = ConfigDict(extra="forbid")

    log: str = Field("", max_length=MAX_LOG_BYTES, description=(
        "The log text: Megatron-LM's arguments block with its iteration, memory-report and "
        "theoretical-memory lines, or a torchtitan job config (TOML) with its step lines. "
        f"At most {MAX_LOG_BYTES:,} bytes; read as text only."))
    memory_stats: str | dict[str, Any] = Field("", description=(
        "torch.cuda.memory_stats() from the run (peak allocated and reserved bytes), as a "
        "JSON object or its json.dumps text (at most "
        f"{MAX_LOG_BYTES:,} bytes), beside the log or the plan. JSON only, never a pickle."))
    plan: str = Field("", max_length=4096, description=(
        "An EP08 URL (/episodes/recipe-3d?...) for the run's plan, when no log is given."))
    gpu: str = Field("", max_length=40, description="GPU preset id (GET /api/gpus); empty: "
                     "the one the log names, else h100-sxm (said in `defaulted`).")
    gpus_per_node: int | None = Field(None, ge=1, le=72, description="GPUs per node; empty: "
                                      "8 (said in `defaulted`).")
    intra_link: str = Field("", max_length=40, description="Link inside a node (GET "
                            "/api/links); empty: the GPU's usual NVLink.")
    inter_link: str = Field("", max_length=40, description="Link between nodes; empty: the "
                            "GPU's usual InfiniBand.")
    model: str = Field("", max_length=160, description="A model preset id or model code, "
                       "when the log's model is not a preset (torchtitan flavors other than "
                       "Llama 3's).")
    gpus: int | None = Field(None, ge=1, le=65536, description="GPUs in the job, when a "
                             "torchtitan config leaves it to the launcher "
                             "(data_parallel_shard_degree = -1).")


class RunDefaulted(BaseModel):
    control: str = Field(description="The EP08 control the log does not give.")
    value: str = Field(description="The value used.")
    reason: str


class RunMeasured(BaseModel):
    step_s: float | None = Field(description="Seconds per step: the median of the iteration "
                                 "lines after the first (None: no iteration lines).")
    steps: int = Field(description="Iteration lines the median is over.")
    tflops_per_gpu: float | None = Field(description="TFLOP/s per GPU, as the framework "
                                         "counts FLOPs.")
    tflops_counts: str = Field(description="How the framework counts its TFLOP/s: hardware "
                               "(Megatron-DeepSpeed: full recomputation's extra forward "
                               "counted) or model (Megatron-LM, torchtitan: 6N + attention).")
    tokens_per_s_per_gpu: float | None
    mfu: float | None = Field(description="torchtitan's MFU, a fraction.")
    peak_allocated_bytes: float | None = Field(description="Max allocated over the ranks "
                                               "reported (bytes).")
    peak_reserved_bytes: float | None = Field(description="Max reserved (bytes): the "
                                              "caching allocator's peak.")
    theory_state_bytes: float | None = Field(description="Megatron's theoretical weight and "
                                             "optimizer memory (bytes).")
    theory_activation_bytes: float | None
    gpu_capacity_bytes: float | None = Field(description="The GPU's memory, where the log "
                                             "states it (torchtitan).")
    global_batch: int | None


class RunFigure(BaseModel):
    name: str = Field(description="step_time, tokens_per_s_per_gpu, tflops_per_gpu, mfu (on "
                      "the lab's FLOPs count), mfu_log (on the log's, where the two differ), "
                      "peak_allocated_bytes or peak_reserved_bytes.")
    unit: str = Field(description="s, tokens/s, TFLOP/s, B (bytes), or empty (a fraction).")
    measured: float | None
    predicted: float | None = Field(description="The lab's figure, from the same answer as "
                                    "GET /api/recipe with `recipe_query`; TFLOP/s counted as "
                                    "the run's framework counts them (`measured."
                                    "tflops_counts`).")
    ratio: float | None = Field(description="Above 1, the lab is fast (or, for memory, "
                                "counts more than the run held): `ratio_of`.")
    ratio_of: str = Field(description="lab / measured (rates and memory) or measured / lab "
                          "(the step time).")
    derived: str = Field(description="How the measured figure was worked out when the log "
                         "prints none (empty: printed).")
    unlike: str = Field("", description="Where the two are not like for like (peak reserved "
                        "against the lab's ledger): what the run's figure holds that the "
                        "lab's does not count, and which way they differ; `ratio` is then "
                        "None.")
    withheld: str = Field("", description="Where the log names no GPU and the lab timed a "
                          "default (`defaulted` lists `gpu`): why `ratio` is None, and, for an "
                          "MFU worked out from that GPU's peak (`derived`), why `measured` is "
                          "None too. Empty: nothing withheld.")


class RunFlops(BaseModel):
    log: float | None = Field(description="The FLOPs a token the log counts: its TFLOP/s ÷ "
                              "its tokens/s per GPU (None: it gives only one).")
    lab: float | None = Field(description="The lab's, counted as the framework counts "
                              "(model or hardware FLOPs).")
    differ: bool = Field(description="The two more than 3% apart: the TFLOP/s ratio is then "
                         "not the tokens/s ratio, and `mfu_log` gives the MFU on the log's "
                         "count.")


class RunResidual(BaseModel):
    name: str = Field(description="beyond_ledger, caching_allocator or outside_pytorch.")
    bytes: float | None = Field(description="None: the log does not say.")
    detail: str


class RunParseAnswer(BaseModel):
    framework: str = Field(description="megatron, torchtitan or memory_stats.")
    found: list[str] = Field(description="Which kinds of lines were read.")
    gpus: int = Field(description="The job's GPUs (world size).")
    model_name: str = Field(description="The model as pages name it (a preset's name, or "
                            "'Your model (size)' for a shape given as a model code).")
    recipe_query: dict[str, str] = Field(description="The plan as EP08's controls: GET "
                                         "/api/recipe with these answers `recipe`.")
    recipe_url: str = Field(description="The plan opened in EP08.")
    defaulted: list[RunDefaulted]
    notes: list[str] = Field(description="What was assumed in reading the log.")
    measured: RunMeasured
    figures: list[RunFigure]
    residuals: list[RunResidual] = Field(description="The memory gap between the lab's "
                                         "ledger and the run, by part.")
    comparison_notes: list[str]
    capacity_note: str = Field("", description="Where the log states the GPU's CUDA capacity "
                               "(torchtitan): it beside the GB the lab budgets (memory_bytes, "
                               "10⁹ B) and the card's GiB, and which way the lab's fit "
                               "verdicts err. Empty: the log states none.")
    flops_per_token: RunFlops
    recipe: RecipeAnswer = Field(description="GET /api/recipe's answer for the plan.")
