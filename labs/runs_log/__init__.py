"""Bring your own run: `megatron.py` reads Megatron-LM's arguments block, iteration, memory-report
and theoretical-memory lines, `theory.py` works Megatron's activation estimate term by term
(`theory_activations`) and why the ledger's first stage differs from it
(`why_activations_differ`), `torchtitan.py` a torchtitan job config (TOML, `tomllib`) and its
step lines, `memory_stats.py` `torch.cuda.memory_stats()` JSON, `common.py` what they share,
`lab.py` the entry: the plan as EP08's controls, the cluster controls a log leaves out defaulted
and named, and `compare` (the lab's answer beside the run's, the memory gap by part)"""

FLOOR = 6  # imports only labs packages of floors <= 6 (tests/test_project.py)
