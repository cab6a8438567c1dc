"""`gpus.py` (GPU presets, with each GPU's measured kernel rates and its host link, `host_link`,
which EP03's and EP10's offload cross unless a student picks another, and its reference server's
host CPU vendor, `host_cpu`, which picks NCCL's LL cap across nodes), `links.py` (link and
cluster presets, with what NCCL achieves on each link: one figure a physical link, the measured
one where it was measured, else `UNMEASURED_SCALE_UP` / `_OUT` (0.82, 0.96: the measured
fractions rounded as the pages state them) times the datasheet's, and a GPU's own datasheet
node, `gpu_cluster` (EP03, EP09, EP11), takes the ring figures of the link preset its GPUs talk
over; a vendor fabric lists the GPUs it ships with, `Link.gpus`, and `check_pairing` /
`paired_cluster` refuse any other GPU on it for every lab that takes a GPU and a link: EP03,
EP04, EP05, EP06, EP08 and the planner; `peer_links` / `check_peer_link`, the scale-up links a
node's GPUs talk to each other over as they ship (a module's vendor fabric, a PCIe card's own
generation or an older one), refuse EP04's TP group and EP02's data-parallel group on any other,
PCIe between SXM GPUs included, where EP03 keeps PCIe for any GPU), `kernels.py` (one kernel's
time: GEMM roofline with wave quantisation, memory-bound ops, FlashAttention at its published
rate), `nccl.py` (a collective as NCCL's own tuning model prices it, with current NCCL's cap on
LL's bandwidth, `ll_cap`; its latency and a tree's bandwidth term by term, `Latency` and
`TreeBandwidth`, which EP02 steps 4-6 write out; `ring_time`, its ring on one protocol where it
would pick a tree, EP02 step 6's comparison; `simple_ring_latency`, the Simple ring's latencies
the lessons sum, and `current_nccl`, what current NCCL has where the lab keeps 2.8's, none of it
charged) over `nccl_constants.py` (NCCL 2.8's tuning constants, LL's cap and current NCCL's
figures, each with its source), `comm.py` (collectives on a cluster, NCCL-priced; the α–β ring
for the textbook reading)"""

FLOOR = 2  # imports only labs packages of floors <= 2 (tests/test_project.py)
