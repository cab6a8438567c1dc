"""EP07: experts placed on GPUs, routing and its dispatch (NCCL's all-to-all or DeepEP's, as
`labs/parallel/dispatch.py` counts them for EP08), with `crossover.py` (the expert width f
above which the experts' GEMMs outlast the all-to-alls; EP07 step 11)"""

FLOOR = 4  # imports only labs packages of floors <= 4 (tests/test_project.py)
