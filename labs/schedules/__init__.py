"""the pipeline-schedule engine: `catalogue.py` (one `Schedule` record per schedule: id, name,
option-list hint, family flags, its generator, chunks per rank and where each model piece lives,
its rules on p, m and v, its in-flight rule, textbook bubble, the recipe's closed-form timeline,
what the exports write and PyTorch's class; the simulator, ledger, recipe, planner, exports,
router and charts all read it, so a new schedule is its record, its generator and its tests),
`inputs.py` (`PipelineInput`, with the shape each schedule's record accepts, and
`PipelineResult`), `generators.py` (each rank's order, as PyTorch's), `timeline.py` (placing
actions in time), `simulate.py` (`simulate`: bubble, makespan, activations measured), `wire.py`
(bytes on the wire), `inflight.py` (peak micro-batches per rank: the record's closed form, or
measured off the simulation), `stages.py` (layers and weights per stage, even or uneven)"""

FLOOR = 3  # imports only labs packages of floors <= 3 (tests/test_project.py)
