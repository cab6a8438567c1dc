"""NCCL's own constants, each as its source sets it: the tuning model's latencies, bandwidth
shares, caps and correction factors (NVIDIA/nccl ``src/graph/tuning.cc``, the 2.8-era copy of
the 2021-22 Megatron runs, with current NCCL's cap on LL's bandwidth), NVLS's threshold
(``src/transport/nvls.cc``), the channels NCCL opens, and what current NCCL has instead where
the lab keeps 2.8's. Latencies in µs, bandwidths in bytes/s. ``labs.hardware.nccl`` prices a
collective with them; its docstring says how.
"""

# tuning.cc baseLat [algorithm][protocol], µs.
BASE_LATENCY = {"ring": {"LL": 3.6, "LL128": 10.0, "Simple": 8.4},
                "tree": {"LL": 4.4, "LL128": 4.4, "Simple": 0.0}}
# tuning.cc hwLat [hardware][algorithm][protocol], µs ("Tree/Simple is the latency a 256kB
# chunk").
HOP_LATENCY = {
    "nvlink": {"ring": {"LL": 0.47, "LL128": 1.9, "Simple": 3.4},
               "tree": {"LL": 0.52, "LL128": 1.2, "Simple": 28.0}},
    "pcie": {"ring": {"LL": 1.0, "LL128": 2.5, "Simple": 5.7},
             "tree": {"LL": 1.0, "LL128": 1.9, "Simple": 28.0}},
    "net": {"ring": {"LL": 2.7, "LL128": 4.0, "Simple": 9.6},
            "tree": {"LL": 5.0, "LL128": 8.5, "Simple": 50.0}},
}
# Ring channels (one CTA each) NCCL opens on 8-GPU NVSwitch nodes with a NIC per GPU:
# "Channel 00/16" in NCCL's INFO log of a ring over 3 nodes x 8 H100 (NVIDIA/nccl#1453);
# taken for every such node (no DGX A100 log was found to differ).
RING_CTAS = 16
MULTI_NODE_LL_INTRA = 1.8  # tuning.cc: intraLat x 1.8 for LL with several nodes
RING_PLATEAU = 1.9  # tuning.cc: ring Simple all-reduce latency x 1.9 across nodes
# NCCL 2.8's 1.9 is what the lab charges; later tuning.cc takes 1.4 from compute capability
# 8.0 on (A100, H100, H800: ``minCompCap < 80 ? 1.9 : 1.4``), so on them the lab errs slow.
RING_PLATEAU_CURRENT = 1.4
LL128_SHARE = 0.92  # tuning.cc: LL128 busBw x 0.92 ("120.0/128.0")
TREE_SHARE = 0.9  # tuning.cc: tree busBw x 0.9, capped below
TREE_CAP = (110e9, 80e9)  # tuning.cc maxTreeBw, GB/s: up to two nodes, more
TREE_LL = 1 / 3.8  # tuning.cc: tree LL busBw / 3.8
NVLS_MIN_RANKS = 3  # nvls.cc ncclNvlsInit: NVLS off for 2 GPUs or fewer
# NVLS's latency in current NCCL's own model, µs (round-19 cold reading X, finding 1). NCCL
# 2.8 had no NVLS (it came in 2.17), and the lab charges an NVLS all-reduce a ring's latency,
# baseLat + 2(n−1) NVLink hops (56 µs at 8 GPUs). Current NCCL's tuning.cc (NVIDIA/nccl
# b6475625) charges NVLS less: baseLat 0, hwLat[NVLINK][NVLS][Simple] 23, and "} else if (a ==
# NCCL_ALGO_NVLS) { comm->latencies[coll][a][p] = intraLat; if (nNodes > 1)
# comm->latencies[coll][a][p] += interLat; }": one step through the switch, no hop count (the
# lab runs NVLS inside one node, so interLat never applies). Not used: tuning.cc's figures
# choose an algorithm, and with 23 µs the lab's 8-GPU all-reduce would reach 349 GB/s at
# 16 MiB, where nccl-tests on 8 H200s measures 242 (tests/labs/test_nccl.py); the ring's 56 µs
# gives 251. EP04 steps 3 and 4 say which the lab charges, and by how much NCCL's own model
# differs.
NVLS_TUNING_LATENCY = 23.0
# The measurement that keeps the ring's charge: nccl-tests all_reduce_perf on 8 x H200 (NVLink
# 4, NVLS), busBW at 16 MiB (stas00/ml-engineering, network/benchmarks).
NVLS_MEASURED = (16 * 2 ** 20, 242.45e9)
# What current NCCL has instead of 2.8's network hop (tuning.cc at NVIDIA/nccl b6475625: hwLat
# NET ring Simple 14.0 plus the graph's latencyInter, nInterSteps 2·nNodes). Not used: the lab
# keeps 2.8's latencies (of current NCCL it takes LL's cap alone, below), and EP02 step 4
# names the difference, with the plateau (``RING_PLATEAU_CURRENT``).
NET_HOP_CURRENT = 14.0
# LL's bandwidth cap (round-18 cold reading E, finding 1; issue 36, error 7). NCCL 2.8's
# tuning.cc (NVIDIA/nccl 01afd20a, the file whose maxTreeBw, 1/3.8 and 22-entry
# treeCorrectionFactor the lab copies) prices LL at busBw / 4 (or / 3) with no cap, which ran
# EP02's 25 MiB buckets over 8 InfiniBand servers on LL at 90 GB/s. Current NCCL (b6475625,
# as above) caps it, ring ("busBw = std::min(llMaxBw, busBw * ... 1.0/4.0 ...)") and tree
# ("std::min(busBw*1.0/3.8, llMaxBw)"), at llMaxBws[index1][index2], GB/s: index2 is
# nNodes <= 2 ? nNodes-1 : 2, index1 "for single node, we look at GPU type; for multi-node,
# we look at CPU type" (AMD 1, else 0). The table:
#   Volta-N1/Intel-N2/Intel-N4  {39.0, 39.0, 20.4}
#   Ampere-N1/AMD-N2/AMD-N4     {87.7, 22.5, 19.0}
#   Hopper-N1/AMD-N2/AMD-N4     {87.7, 22.5, 19.0}
# Every lab GPU is Ampere or later (its one-node entry 87.7, the Ampere and Hopper rows
# alike); across nodes the host CPU's vendor (``GPUSpec.host_cpu``) picks the row.
LL_MAX_ONE_NODE = 87.7e9
LL_MAX_ACROSS = {"intel": (39.0e9, 20.4e9), "amd": (22.5e9, 19.0e9)}  # two nodes, more
# tuning.cc treeCorrectionFactor[protocol][log2(bytes / 64)], for 64 B .. 128 MB.
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
           1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8,
              .9, .9, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7,
               .8, .9),
}
# The link between a host's two CPU sockets, as current NCCL's topology model prices it, GB/s
# (NVIDIA/nccl master, src/graph/topo.h: SKL_QPI_BW 10.0, SRP_QPI_BW 22.0 for Sapphire Rapids,
# the DGX H100's host, AMD_ZEN34_BW 24.0). Not used in any time: an 8-card PCIe server puts
# four cards under each socket, so its ring crosses this link, and EP02 step 1 says by it which
# way the lab's PCIe busBW (one fabric for all 8) errs (round-22 cold reading P, finding 11), on
# a Zen 3 host: PCIe 4.0, so the card runs at Gen4 as timed (Sapphire Rapids is PCIe 5.0).
SOCKET_LINK = {"skylake": 10.0e9, "sapphire-rapids": 22.0e9, "zen3-4": 24.0e9}
