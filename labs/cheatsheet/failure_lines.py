"""EP12's cheat sheet, its lines of EP11 (Young 1974; Daly 2006; Llama 3's report): the
checkpoint interval and goodput of the example's plan at Llama 3's interruption rate. Split
from run_lines.py (EP08-EP09; EP10 in precision_lines.py) by what they do."""

from labs.cheatsheet.inputs import Term
from labs.failures.inputs import FailuresInput
from labs.failures.lab import (
    LLAMA3_BATCH_TOKENS,
    LLAMA3_TFLOPS,
    gpu_mtbi_llama3,
    llama3_step_s,
    llama3_steps,
    simulate_failures,
)
from labs.hardware.links import get_link
from labs.model.flops import matmul_params


def failures_step_s(model) -> float:
    """The example's step on Llama 3's 16,384 GPUs (``llama3_step_s``) to 4 significant
    figures: what the lines time with and their links to EP11 carry, so the linked state's
    best interval, whole steps of it (round 21), is the line's."""
    return float(f"{llama3_step_s(step_params(model)):.4g}")


def step_params(model) -> float:
    """The parameters a token's 6 FLOPs each count in ``failures_step_s``: a dense model's all
    (Llama 3's rate, EP11), a MoE's active matmul parameters, the Training FLOPs line's N
    (round-29 reading C, finding 2: its total made DeepSeek-V3's step 18x too long)."""
    return matmul_params(model) if model.is_moe else model.params


def _failures(inp):
    """EP11's lab for the example's plan: its GPUs at Llama 3's interruption rate, sync saves
    to 2 TB/s (Llama 3's Tectonic), a 10-minute restart."""
    gpus = inp.tp * inp.pp * inp.dp * inp.cp
    return simulate_failures(FailuresInput(
        model=inp.model, gpus=gpus, gpu_mtbi=gpu_mtbi_llama3(),
        step_s=failures_step_s(inp.model), step_gpus=16_384, steps=llama3_steps(),
        save="sync", storage_bw=2e12, host_link=get_link(inp.gpu.host_link), interval=3600,
        restart=600))


def young_interval(inp):
    r = _failures(inp)
    return ((Term("δ", r.checkpoint.cost_s, "duration", "sync save: 14·P B at 2 TB/s"),
             Term("M", r.mtbi_s, "duration", f"Llama 3's rate on {r.input.gpus:,} GPUs")),
            Term("τ", r.young_s, "duration", "training between saves"))


def goodput_line(inp):
    r = _failures(inp)
    g = r.best
    # Round-20 cold reading R, finding 12: the line above's τ is Young's, this one Daly's;
    # it says which, and how far apart the two are here. Round-22 cold reading R, finding 2:
    # the best interval is Daly's rounded up to whole steps (round 21), so the line says so,
    # with the step, and compares Daly's own optimum with Young's, not the rounded one.
    # Round-23 cold reading R, finding 7: the step's own source (Llama 3's rate) is said;
    # round 24 (B, finding 12): as the lab takes it, 4 figures on 16,384 GPUs, then scaled.
    apart = r.daly_s / r.young_s - 1
    steps = round(g.interval / r.step_s)
    return ((Term("τ", g.interval, "duration", "Daly's best interval, "
                  + (f"{r.daly_s / 60:.1f} min (the same as Young's above to 0.1%)"
                     if abs(apart) < 0.001 else
                     f"{r.daly_s / 60:.1f} min ({abs(apart):.1%} "
                     f"{'longer' if apart > 0 else 'shorter'} than Young's above)")
                  + f", rounded up to whole steps of {r.step_s:,.1f} s ({steps}): a save "
                    "starts between steps. The step is Llama 3's rate: 6 × "
                    f"{step_params(inp.model) / 1e9:.2f}B "
                    + ("active matmul parameters (N above)" if inp.model.is_moe
                       else "parameters, all of them, as EP11 times Llama 3's step from its "
                            "400 TFLOP/s (N above leaves out the input embedding's "
                            f"{(inp.model.params - matmul_params(inp.model)) / 1e9:.2f}B)")
                    + f" × {LLAMA3_BATCH_TOKENS:,} "
                    f"tokens ÷ ({r.input.step_gpus:,} × {LLAMA3_TFLOPS / 1e12:.0f} TFLOP/s) = "
                    f"{r.input.step_s:.4g} s on its {r.input.step_gpus:,} GPUs, × "
                    f"{r.input.step_gpus:,} / {r.input.gpus:,} here"),
             Term("δ", r.checkpoint.block_s, "duration", "stop per save"),
             Term("R", r.input.restart, "duration", "restart (assumed; a sync save loses no "
                                                    "work behind it)"),
             Term("M", r.mtbi_s, "duration", "between interruptions")),
            Term("goodput", g.goodput, "fraction", "wall time on steps that count"))
