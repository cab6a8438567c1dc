"""The failures lab's JSON answer (GET /api/failures). Times are seconds, sizes bytes."""

from pydantic import BaseModel, Field


class FailuresGoodput(BaseModel):
    interval_s: float = Field(description="Seconds of training between checkpoints.")
    goodput: float = Field(description="Share of wall time on steps that count (0-1).")
    blocking: float = Field(description="Share of wall time stopped for saves.")
    rework: float = Field(description="Share of wall time redoing steps lost to failures.")
    restart: float = Field(description="Share of wall time restarting after failures.")
    finish_days: float | None = Field(description="Wall-clock days to run the job's steps "
                                                  "(null when no step ever counts).")


class FailuresCheckpoint(BaseModel):
    weights_bytes: float = Field(description="16-bit weights (EP01's ledger).")
    master_bytes: float = Field(description="FP32 master weights.")
    moments_bytes: float = Field(description="FP32 Adam moments.")
    total_bytes: float = Field(description="The whole checkpoint (gradients are not saved).")
    bytes_per_gpu: float = Field(description="Each rank's shard: total / GPUs.")
    write_s: float = Field(description="total / storage bandwidth.")
    copy_s: float = Field(description="A shard over the host link (an async save's stop).")
    send_s: float = Field(description="A shard over the GPU's network port (a peer save's "
                                      "background send).")
    cost_s: float = Field(description="δ of Young and Daly: write_s (sync) or copy_s (async, "
                                      "peer).")
    block_s: float = Field(description="Seconds training stops per save at the interval.")
    lag_s: float = Field(description="How much older the newest durable checkpoint is.")


class FailuresScalePoint(BaseModel):
    gpus: int
    mtbi_s: float
    per_day: float
    step_s: float = Field(description="The step on these GPUs: EP08's engine's where "
                                      "step_timed, else ideal strong scaling (1/GPUs).")
    step_timed: bool = Field(description="Whether EP08's engine timed the step here (Llama 3's "
                                         "job, at a size the engine can time).")
    sync: FailuresGoodput = Field(description="Sync saves at Daly's interval (floored).")
    async_: FailuresGoodput = Field(alias="async", description="Async saves, likewise.")
    peer: FailuresGoodput = Field(description="Saves to peer memory (Gemini), likewise.")
    held: dict[str, FailuresGoodput] | None = Field(
        None, description="Where the step is ideal (not step_timed): each save (sync, async, "
        "peer) with the step no faster than on the size it is scaled from, the other edge "
        "of the days' range; null where the step was timed.")


class FailuresAnswer(BaseModel):
    model: str
    gpus: int
    gpu_mtbi: float
    save: str
    storage_bw: float
    interval: float
    restart: float
    host_link: str
    host_bw: float = Field(description="The host link's bytes per second per direction.")
    step_s: float
    step_gpus: int
    steps: int
    step_here_s: float = Field(description="The step on the job's GPUs.")
    step_timed: bool = Field(description="Whether EP08's engine timed step_here_s (else ideal "
                                         "strong scaling from the nearest timed size, or from "
                                         "step_s on step_gpus).")
    mtbi_s: float = Field(description="The job's mean time between interruptions, seconds.")
    per_day: float = Field(description="Interruptions per day.")
    checkpoint: FailuresCheckpoint
    young_s: float = Field(description="Young 1974: sqrt(2 x cost_s x mtbi_s).")
    daly_s: float = Field(description="Daly 2006's higher-order optimum.")
    floor_s: float = Field(description="The shortest interval: a step (async: the write too; "
                                       "peer: the send).")
    best_s: float = Field(description="max(daly_s, floor_s), rounded up to whole steps: a "
                          "save starts only between steps.")
    chosen: FailuresGoodput
    best: FailuresGoodput
    scale: list[FailuresScalePoint]
