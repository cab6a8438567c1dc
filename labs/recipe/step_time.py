"""EP08's step time: what one GPU spends per micro-batch and per step, by cause, op by op.

The pipeline runs at its slowest stage's pace (every micro-batch passes every stage), so the
step is timed on that stage:

    step = m·(t_mb + sends) / (1 − bubble) + DP exposed + optimizer

- t_mb, sends: the stage's micro-batch, kernels and TP/CP/EP collectives, and the pipeline
  sends on the critical path (``labs.recipe.stage_time``);
- bubble: the simulated schedule's idle fraction (``labs.recipe.lab.measured_bubble``);
- DP: the gradient (and ZeRO weight) traffic and what of it outlasts the compute and idle time
  beside it (``labs.recipe.dp_time``);
- optimizer: the stage's local parameters (divided by DP x CP under ZeRO ≥ 1) through the
  optimizer's HBM-bound kernels (``labs.model.head.optimizer_time``).
Only what does not fit behind compute (or idle time) is *exposed*, i.e. lengthens the step.
The options and answers are ``labs.recipe.timing``'s; the rank groups' placement is
``labs.recipe.groups``'. This module re-exports the names the rest of the lab imports from it.
"""

from __future__ import annotations

from dataclasses import replace

from labs.hardware.kernels import with_matmul_efficiency
from labs.hardware.links import Cluster
from labs.model.flops import hardware_flops_per_token, model_flops_per_token
from labs.model.spec import ModelSpec
from labs.parallel.layout import ParallelLayout
from labs.recipe.dp_time import dp_part, megatron_bucket_params, zero3_exposure
from labs.recipe.groups import Spread, spread
from labs.recipe.stage_time import StageTimes, bytes_of, stage_times
from labs.recipe.timing import DEFAULT_STEP, Cause, MicroBatchTime, Part, StepOptions, Timing

__all__ = ["DEFAULT_STEP", "Cause", "MicroBatchTime", "Part", "Spread", "StageTimes",
           "StepOptions", "Timing", "megatron_bucket_params", "spread", "stage_times",
           "step_parts", "with_matmul_efficiency", "zero3_exposure"]


def step_parts(model: ModelSpec, layout: ParallelLayout, cluster: Cluster, *, seq_len: int,
               micro_batch: int, microbatches: int, recompute: str, zero: int,
               schedule: str, virtual: int, recipe: str = "adam16",
               options: StepOptions = DEFAULT_STEP,
               bubble: float = 0.0, slack: tuple[tuple[float, float], ...] = (),
               first: int = 0, last: int = 0) -> Timing:
    """Per-micro-batch time on the slowest stage and every communication part of a step.

    ``bubble`` is the schedule's idle fraction and ``slack`` each stage's idle time before its
    first forward and after its last backward, as fractions of the pipeline's makespan
    (``labs.recipe.lab.pipeline_slack``; empty: none). ``first``/``last``: Megatron's uneven
    first and last stages (0: not set)."""
    m, lay = model, layout
    st = stage_times(m, lay, cluster, seq_len=seq_len, micro_batch=micro_batch,
                     accumulate=microbatches > 1, recompute=recompute, schedule=schedule,
                     virtual=virtual, options=options, first=first, last=last)
    cluster, slow, micro, mb = st.cluster, st.slow, st.micro, microbatches
    tp_s, cp_s, ep_s = st.spreads
    pipeline_s = mb * micro.total / (1 - bubble)
    parts = [
        Part("tp", "reduce_scatter + all_gather" if st.sp else "all_reduce", tp_s.size,
             tp_s.nodes, cluster.intra.id, mb * bytes_of(slow, "tp"), mb * slow.tp_total,
             mb * slow.tp),
        Part("cp", "ring send/recv", cp_s.size, cp_s.nodes,
             cluster.intra.id if cp_s.nodes == 1 else cluster.inter.id,
             mb * bytes_of(slow, "cp"), mb * slow.cp_total, mb * slow.cp),
        Part("ep", ("all_to_all" if options.ep_dispatch == "alltoall" else "DeepEP")
             + (", overlapped" if options.ep_overlap else ""), ep_s.size,
             ep_s.nodes, cluster.intra.id if ep_s.nodes == 1 else cluster.inter.id,
             mb * bytes_of(slow, "ep"), mb * slow.ep_total, mb * slow.ep),
        # The ramp's sends (2(p−1) hops before the first backward and after the last
        # forward) are in the bubble's stretch of m·sends / (1 − bubble).
        replace(st.send_part, bytes_per_step=mb * st.send_part.bytes_per_step,
                seconds=mb * st.sends, exposed=mb * st.sends),
        dp_part(m, lay, cluster, micro, list(st.stages), mb, zero, recipe, options,
                 st.chunks, tuple((a * pipeline_s, b * pipeline_s) for a, b in slack)),
    ]
    return Timing(micro, tuple(parts), model_flops_per_token(m, seq_len),
                  hardware_flops_per_token(m, seq_len, recompute,
                                           tuple(s.params.layers for s in st.stages)),
                  st.imbalance,
                  st.optimizer_s(lay, zero, options.dp_replicas if zero == 3 else 1),
                  st.attention, slow, st.stages, options)

