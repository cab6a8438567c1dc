"""EP08: `inputs.py` (`Plan`, `RecipeResult`, `Audit`), `lab.py` (every lab's rules, heaviest
stage, simulated bubble (a split backward's at the slowest stage's own I/F and W/F: `pass_costs`
over `stage_time.Stage.split`), traffic), `step_time.py` (the one step model, what EP02-EP09, the
planner and the cheat sheet time with: the step on the slowest stage, from `stage_time.py` (each
stage's micro-batch op by op, and the pipeline sends), `dp_time.py` (DP buckets, ZeRO-1/2 gathers
and per-layer ZeRO-3 traffic, FSDP2's copy-out and copy-in with PyTorch kernels, FSDP's backward
prefetch and reshard_after_forward, HSDP's shard-group traffic and replica all-reduce, and how much
of each is exposed), `groups.py` (where each kind of rank group falls on the nodes, and HSDP's
shard and replica groups), `hsdp.py` (one HSDP plan's groups and per-layer collectives, read off
the step model: `/api/recipe`'s `hsdp`, EP08 step 14) and `timing.py` (`StepOptions`, the parts and
the step by cause)), `runs.py` (the published runs the step model is checked against, read from
`presets/runs.json` with their citations: the calibration runs and the validation runs (torchtitan,
the MoE runs, NeMo's H100 FP8 runs), which the tests and the "Checked against real runs" page
share; `utilisation`, a run's MFU and HFU from a step, which EP08's prose quotes), `audits.py`,
`replan.py`, `export.py`, `planner.py` with `bounds.py` (ranks every valid plan by the recipe's own
throughput, by branch and bound) over `plan_space.py` (the request and the bounded set of plans it
makes, `count_plans` counting them unmade; `PlanRequest.pipeline` holds it to plans with or without
stages; `PlanRequest.hsdp` offers each ZeRO-3 plan sharded inside a node too), `two_d.py` (two
dimensions before three: the planner held to FSDP + TP and to TP + PP + DP, each family's best plan
as the cluster doubles around the page's, at its global batch; EP08 step 14's diagram and
`/api/recipe`'s `two_d`), `overlap.py` and `layer_view.py` (what hides behind what, read off the
step model's answer: a micro-batch's compute and communication streams, and one layer op by op,
each collective where the step model runs it, with its bytes, its time and, under TP overlap "all",
the chunked GEMM's lost rate (`labs.parallel.layer_time.Piece`), and ZeRO-0/1/2's gradient buckets
as the step model schedules them (`timing.Buckets`, each bucket's run `Buckets.runs`); the
micro-batch's ZeRO-0/1/2 sync a lane per group, each collective its own bars (`overlap.Leg`: the
reduce-scatters beside the backward and their tails, the next forward's all-gather waits); EP08
steps 12 and 13, `/api/recipe`'s `timeline` and `layer`)"""

FLOOR = 5  # imports only labs packages of floors <= 5 (tests/test_project.py)
