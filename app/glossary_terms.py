"""The glossary's table: every term of art the lessons use (``GLOSSARY``), each a ``Term``:
its entry's anchor, its name as the glossary lists it, how lessons write it (a regular
expression) and its definition. ``app.glossary`` marks each term's first use in a lesson
(``define_terms``); GET /glossary lists them (app/routers/home.py)."""

import re
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class Term:
    slug: str  # the entry's anchor: /glossary#<slug>
    term: str  # as the glossary lists it
    pattern: str  # how lessons write it (a regular expression)
    definition: str

    @cached_property  # built once per term (issue 31: a page's define_terms asked ~18,000 times)
    def regex(self) -> re.Pattern:
        # An apostrophe as written, or as Jinja escapes it in a macro's text (&#39;); a word
        # that starts lower case also matches at a sentence's or heading's start ("Strong
        # scaling", round-5 reading: such first uses went unmarked); a space between words
        # also matches a line break and the template's indent ("mean time between /
        # interruptions" across two lines of EP11's source went unmarked).
        pattern = re.sub(r"\\b([a-z])", lambda m: rf"\b[{m[1]}{m[1].upper()}]", self.pattern)
        pattern = re.sub(r" (?![?*+{])", r"\\s+", pattern)
        return re.compile(pattern.replace("'", "(?:'|&#39;)"))


GLOSSARY: tuple[Term, ...] = (
    # ---- the split itself ----
    # Not the "data parallelism" of attention data parallelism (EP09), an entry of its own.
    Term("data-parallelism", "Data parallelism (DP)",
         r"(?<![Aa]ttention\s)\bdata parallelism\b|\bDP\b(?!\sattention)",
         "Every GPU (a replica) runs the whole model on its own slice of the batch; after the "
         "backward pass the replicas average their gradients with an all-reduce."),
    Term("tensor-parallelism", "Tensor parallelism (TP)", r"\btensor parallelism\b|\bTP\b",
         "Each weight matrix is split across the GPUs of a group (Megatron-LM); each multiplies "
         "its slice and the partial results are combined in every layer, by an all-reduce or "
         "a reduce-scatter and an all-gather."),
    Term("pipeline-parallelism", "Pipeline parallelism (PP)",
         r"\bpipeline parallelism\b|\bPP\b",
         "The model's layers are cut into stages on different GPUs; micro-batches flow through "
         "the stages like an assembly line."),
    Term("context-parallelism", "Context parallelism (CP)", r"\bcontext parallelism\b|\bCP\b",
         "One sequence's tokens are split across GPUs; attention exchanges keys and values "
         "between them (ring attention), since a token attends to tokens other GPUs hold."),
    Term("expert-parallelism", "Expert parallelism (EP)", r"\bexpert parallelism\b|\bEP\b",
         "A mixture-of-experts layer's experts are placed on different GPUs; tokens travel to "
         "their experts and back by all-to-all."),
    Term("sequence-parallelism", "Sequence parallelism (Megatron-LM)",
         r"\bsequence parallelism\b|\bsequence-parallel\b",
         "Megatron-LM's companion to TP: the layer norms and dropout, which TP leaves whole on "
         "every GPU, are split along the sequence, and each all-reduce becomes a reduce-scatter "
         "and an all-gather of the same bytes; the backward also gathers the inputs of the "
         "column-split matrices once more, so a layer sends about a quarter more (EP04 step "
         "5). Not context parallelism, and not Ulysses, which DeepSpeed also calls sequence "
         "parallelism."),
    Term("packed-token-stream", "Packed token stream (sequence packing)",
         r"\bpacked token stream\b|\bsequence packing\b",
         "Several training sequences laid end to end as one long run of tokens, so no position "
         "is spent on padding; each token attends only within its own sequence (per-sequence "
         "offsets in the attention kernel)."),
    Term("ulysses", "Ulysses (DeepSpeed)", r"\bUlysses\b",
         "Context parallelism by attention heads: an all-to-all regroups the sequence-split Q, "
         "K and V so each GPU computes whole-sequence attention for some of the heads, and "
         "another all-to-all splits the sequence again."),
    Term("zero", "ZeRO stages", r"\bZeRO(?:-[0-3])?\b",
         "Zero Redundancy Optimizer (DeepSpeed): the data-parallel GPUs shard the training "
         "state instead of each copying it. Stage 1 shards the optimizer state, stage 2 the "
         "gradients too, stage 3 the weights too; stage 0 is plain data parallelism."),
    Term("fsdp", "FSDP", r"\bFSDP2?\b",
         "Fully Sharded Data Parallel, PyTorch's form of ZeRO-3 by default: each GPU keeps 1/N "
         "of the weights, gradients and optimizer state, and gathers a layer's weights when it "
         "needs them. Its other modes shard less (SHARD_GRAD_OP, like ZeRO-2) or shard within "
         "groups (HSDP)."),
    Term("ddp", "DDP (DistributedDataParallel)", r"\bDDP\b|\bDistributedDataParallel\b",
         "PyTorch's data parallelism: every GPU keeps a whole replica, and the gradients are "
         "all-reduced in buckets while the backward pass is still running, so much of the sync "
         "hides under compute."),
    Term("gradient-buckets", "Gradient buckets", r"\bgradient buckets?\b",
         "The groups, tens of MB each, into which data parallelism packs the gradients: each "
         "bucket is reduced by one collective, started as soon as the backward pass has "
         "produced all of its gradients, so the sync runs while the rest of the backward does "
         "(PyTorch DDP's default bucket is 25 MiB: bucket_cap_mb counts MiB)."),
    Term("hsdp", "HSDP (hybrid sharded data parallelism)", r"\bHSDP\b",
         "FSDP inside a shard group (usually a node's GPUs) and plain data parallelism across "
         "the groups: each GPU holds 1/dp_shard of the state, a layer's gathers stay inside "
         "the group, and the groups all-reduce their gradient shards. PyTorch's fully_shard "
         "on a 2-D mesh; torchtitan's data_parallel_shard_degree."),
    Term("expert-dp", "Expert-DP", r"\bexpert-DP\b",
         "The data-parallel degree of the experts: how many copies of each expert there are, "
         "a stage's GPUs divided by EP × expert-TP."),
    Term("expert-tp", "Expert-TP (expert tensor parallelism)", r"\b[Ee]xpert-TP\b",
         "Tensor parallelism inside each expert: its weight matrices are split over a group of "
         "GPUs of its own, as TP splits a dense layer's. Megatron's "
         "--expert-tensor-parallel-size, which defaults to the TP degree; MoE recipes often "
         "set it to 1, so each expert stays whole on one GPU."),
    # ---- batches and schedules ----
    Term("micro-batch", "Micro-batch", r"\bmicro-batch(?:es)?\b",
         "The slice of a step's batch that one GPU, or one pipeline stage, runs through one "
         "forward and backward pass. A step runs several."),
    Term("gradient-accumulation", "Gradient accumulation",
         r"\bgradient accumulation\b|\baccumulat(?:es?|ed|ing) (?:the )?gradients\b",
         "Running several micro-batches before one optimizer step, adding up their gradients: "
         "a larger batch without the activation memory of running it at once."),
    Term("global-batch", "Global batch", r"\bglobal batch\b",
         "Everything one optimizer step learns from: micro-batch × micro-batches per step × "
         "data-parallel GPUs, in sequences (or times the sequence length, in tokens)."),
    Term("crossover", "Compute-to-communication crossover (T*)", r"\bcrossover\b",
         "The size at which compute takes as long as moving the bytes a split needs. Above "
         "it the split is compute-bound; below it, communication-bound. For data parallelism "
         "it is tokens per GPU, T* = ⅔ × (N−1)/N × achieved FLOP/s ÷ busBW (ZeRO-3: 1.5 "
         "times that); for TP the hidden size per GPU, (h/t)* (EP04); for CP the tokens per "
         "rank, L* (EP06); for EP the expert's width, f* (EP07). The jax-ml Scaling Book "
         "derives each split's."),
    Term("critical-batch-size", "Critical batch size", r"\bcritical batch size\b",
         "The batch past which more data per step barely cuts the steps training needs "
         "(McCandlish et al. 2018): about the gradient noise scale, which grows as the loss "
         "falls."),
    Term("gradient-noise-scale", "Gradient noise scale", r"\bgradient noise scale\b",
         "The gradient's variance over its squared size (McCandlish et al. 2018): B_simple = "
         "tr(Σ) ÷ |G|², the form measured in practice, of B_noise = tr(HΣ) ÷ GᵀHG (the two agree "
         "when the Hessian H is a multiple of the identity). Steps S = S_min(1 + B_noise/B), "
         "data E = E_min(1 + B/B_noise)."),
    Term("bubble", "Pipeline bubble", r"\bbubbles?\b",
         "The time pipeline stages sit idle while work reaches them at the start of a step and "
         "drains at the end: (p − 1)/(m + p − 1) of the step for 1F1B with p stages and m "
         "micro-batches. Papers often write (p − 1)/m, the idle time over the busy time; the "
         "two agree when m is much larger than p."),
    # Plain 1F1B only: its in-flight bound is not interleaved 1F1B's, so "interleaved 1F1B"
    # takes the interleaved entry's tip, never this one (round-17 cold reading of EP05,
    # finding 4: EP11's "interleaved 1F1B" showed "at most p"). Each bound is the schedule
    # catalogue's in-flight rule (labs/schedules/catalogue.py; tests/app/test_glossary.py).
    # It gives rank 0's bound, not rank r's p − r: that is EP05 step 3's answer, and this tip
    # shows in step 2 (round-16 cold reading of EP05, finding 8).
    Term("1f1b", "1F1B", r"(?<![Ii]nterleaved\s)\b1F1B\b",
         "One forward, one backward (PipeDream-Flush): after a warm-up each pipeline stage "
         "alternates one micro-batch's forward with another's backward, and each backward "
         "frees a micro-batch's activations as the next forward takes one. The first stage "
         "has the longest warm-up, p forwards before its first backward, so no stage holds "
         "more than p micro-batches' activations (all m if m is smaller), where GPipe holds "
         "all m on every stage."),
    # "interleaved 1F1B" whole, so the plain 1F1B entry never marks its second word.
    Term("interleaved", "Interleaved 1F1B", r"\binterleav(?:ed|ing)\b(?:\s+1F1B\b)?|\bVPP\b",
         "Each GPU holds v non-adjacent chunks of layers, so a micro-batch passes it v times "
         "and the warm-up is v times shorter: bubble (p − 1)/(v·m + p − 1), for more "
         "sends. Rank 0 holds more than 1F1B's p: its warm-up runs 2(p − 1) + (v − 1)·p "
         "chunk forwards, each a v-th of a stage, so with the one in flight it holds "
         "p + (p − 1)/v micro-batches' worth of activations (m large enough). Megatron-LM "
         "calls the chunks virtual stages (VPP, virtual pipeline parallelism)."),
    Term("zero-bubble", "Zero bubble (ZB-H1)", r"\b[Zz]ero(?:-|\s+)bubble\b|\bZB-H1\b",
         "Schedules that split the backward into I (the input's gradient, the paper's B, "
         "which the previous stage waits for) and W (the weights' gradient, which nothing "
         "waits for) and run W in the idle gaps. Both run a GEMM of the forward's FLOPs per "
         "weight matrix, but only I runs attention's backward, so W is the shorter. ZB-H1, "
         "from Qi et al. 2024 (ICLR; arXiv 2023), keeps 1F1B's peak memory and leaves "
         "(p − 1)(F + I − W) idle where 1F1B leaves (p − 1)(F + I + W): a third with equal "
         "passes, more as W shrinks; ZB-H2 holds more activations to remove it."),
    Term("dualpipe", "DualPipe", r"\bDualPipe(?:-?V)?\b",
         "DeepSeek-V3's pipeline schedule: micro-batches enter from both ends of the pipeline, "
         "and each forward chunk runs beside a backward chunk so that one's computation hides "
         "the other's all-to-all. It keeps two copies of the weights; DualPipe-V folds the "
         "stages so each GPU keeps one."),
    Term("makespan", "Makespan", r"\bmakespan\b",
         "The length of a whole schedule, from the first task's start to the last one's end: "
         "for a pipeline, one step's time, idle time included. EP05 measures it in units of "
         "one stage's forward of one micro-batch (not EP07's expert width)."),
    Term("critical-path", "Critical path", r"\bcritical path\b",
         "The chain of dependent work that sets how long a step takes: shortening work on it "
         "shortens the step, while work off it (a collective hidden behind compute) can grow "
         "until it reaches the path without costing anything."),
    Term("weak-scaling", "Weak scaling", r"\bweak scaling\b",
         "Adding GPUs while each keeps the same work: the batch grows with the GPUs."),
    Term("strong-scaling", "Strong scaling", r"\bstrong scaling\b",
         "Adding GPUs to a fixed batch: each GPU gets less work."),
    Term("recomputation", "Activation recomputation (activation checkpointing, AC)",
         r"\b(?:activation )?recomputation\b|\bactivation checkpointing\b",
         "Dropping activations in the forward pass and computing them again in the backward: "
         "less memory for more compute. Selective recomputation redoes only attention's large, "
         "cheap parts; full recomputation keeps only each layer's input."),
    # ---- communication ----
    Term("all-reduce", "All-reduce", r"\ball-reduces?\b",
         "A collective after which every GPU holds the sum (or the mean) of every GPU's copy "
         "of a tensor. A ring all-reduce sends 2(N − 1)/N of the tensor from each GPU: a "
         "reduce-scatter, then an all-gather."),
    Term("reduce-scatter", "Reduce-scatter", r"\breduce-scatters?\b",
         "A collective after which each GPU holds the sum of one 1/N slice of the tensor: the "
         "first half of a ring all-reduce."),
    Term("all-gather", "All-gather", r"\ball-gathers?\b",
         "A collective after which every GPU holds every GPU's slice: the second half of a "
         "ring all-reduce."),
    Term("all-to-all", "All-to-all", r"\ball-to-alls?\b",
         "A collective in which every GPU sends a different piece to every other: expert "
         "parallelism's dispatch of tokens to their experts, and the combine that brings the "
         "results back."),
    Term("nccl", "NCCL", r"\bNCCL\b",
         "NVIDIA Collective Communications Library: it runs the collectives (all-reduce, "
         "all-gather, ...) between NVIDIA GPUs, picking for each call an algorithm (ring, "
         "tree, NVLS) and a protocol (the low-latency LL ones, or Simple)."),
    Term("cta", "CTA (thread block)", r"\bCTAs?\b",
         "Cooperative thread array: CUDA's block of threads, which runs on one SM. Each NCCL "
         "channel is one CTA, so a collective on 16 channels holds 16 SMs while it runs."),
    Term("busbw", "Bus bandwidth (busBW)", r"\bbusBW\b|\bbus bandwidth\b",
         "NCCL's measure of a collective's speed: algBW (the data's size over the "
         "collective's time) times the share of the data each GPU must move, busBW = algBW × "
         "2(N − 1)/N for an all-reduce. For ring and tree "
         "algorithms it reaches only a share of the link's datasheet bandwidth, which the lab "
         "applies and says so where it does; with in-switch reduction (NVLS) it can exceed "
         "the link's, because nccl-tests still reports it in ring units."),
    Term("algbw", "Algorithm bandwidth (algBW)", r"\balgBW\b|\balgorithm bandwidth\b",
         "A collective's data size divided by its time, as nccl-tests reports it beside "
         "busBW."),
    Term("effective-rate", "Effective rate", r"\beffective rates?\b",
         "The bytes a GPU receives in a transfer divided by the transfer's whole time, each "
         "send's start-up latency included: what a link delivers at that message size. A big "
         "message comes near NCCL's bus bandwidth; a small one falls far below it, because the "
         "start-up is a larger share of its time."),
    Term("ecmp", "ECMP (equal-cost multi-path)", r"\bECMP\b",
         "How switches spread flows over several equal uplinks: each flow goes to one uplink "
         "chosen by a hash of its addresses, so two large flows can land on the same uplink "
         "and halve each other while another sits idle."),
    Term("nvls", "NVLS (NVLink SHARP)", r"\bNVLS\b|\bNVLink SHARP\b",
         "On NVSwitch systems from H100 on, the switch adds the GPUs' contributions itself, so "
         "an all-reduce sends each byte about once instead of twice. NCCL picks it inside one "
         "NVLink domain."),
    Term("ll-protocol", "LL protocol (NCCL)", r"\bLL(?:128)?\b(?: protocols?\b)?",
         "NCCL's low-latency protocols, LL and LL128: each 8- or 128-byte word carries a flag, "
         "so a receiver needs no separate synchronisation. Faster for small messages, slower "
         "for large ones, which use the Simple protocol."),
    Term("oversubscription", "Oversubscription", r"\boversubscri(?:bed|ption)\b",
         "A network tier with less bandwidth up than down (2:1: half), so traffic that leaves "
         "a leaf switch shares fewer uplinks."),
    Term("rail-optimised", "Rail-optimised network", r"\brail-optimi[sz]ed\b",
         "A cluster network where GPU k of every node connects to the same leaf switch (rail "
         "k), so same-rank GPUs of different nodes are one switch apart."),
    Term("hbm", "HBM (high-bandwidth memory)", r"\bHBM\b",
         "The stacked memory on a GPU's package that holds its weights, activations and KV "
         "cache. A decode step reads its weights and cache from it, so its bandwidth, not the "
         "GPU's FLOP/s, bounds the step."),
    Term("ndr", "InfiniBand NDR", r"\bNDR\b",
         "InfiniBand's 400 Gb/s generation. An H100 node usually gives each of its 8 GPUs "
         "one NDR port of its own: the link between nodes."),
    Term("cuda-ipc", "CUDA IPC", r"\bCUDA IPC\b",
         "CUDA's inter-process memory sharing: one process exports a handle to a buffer in "
         "its GPU's memory, and another process on the same node opens it and reads the "
         "buffer in place, with no copy through the host or the network. slime's colocated "
         "weight update hands the trainer's weights to the engine so."),
    Term("asynctp", "AsyncTP", r"\b[Aa]sync ?TP\b",
         "Asynchronous tensor parallelism (PyTorch): TP's all-gather and reduce-scatter are "
         "cut into pieces that run under the matrix multiplies using them, hiding much of "
         "TP's communication."),
    Term("userbuffers", "Userbuffers (Transformer Engine)", r"\buserbuffers\b",
         "Transformer Engine's buffers for overlapping TP's collectives with its GEMMs: the "
         "GPUs of a node read and write each other's buffers directly, so a GEMM cut into "
         "chunks sends one chunk while it computes the next."),
    Term("deepep", "DeepEP", r"\bDeepEP\b",
         "DeepSeek's expert-parallel communication library: all-to-all kernels that dispatch "
         "tokens to their experts and combine the results."),
    # ---- compute and utilisation ----
    Term("gemm", "GEMM", r"\bGEMMs?\b",
         "General matrix multiply: the matrix products that do most of a transformer's "
         "FLOPs."),
    Term("grouped-gemm", "Grouped GEMM", r"\bgrouped GEMMs?\b",
         "One kernel that runs many matrix multiplies of different sizes at once, as a MoE "
         "layer's experts need (each gets its own number of tokens)."),
    Term("gelu", "GeLU", r"\bGeLU\b|\bGELU\b",
         "The Gaussian error linear unit, x·Φ(x) with Φ the standard normal's cumulative "
         "distribution: the smooth activation of GPT's MLP, which widens each token from h to "
         "4h, applies GeLU and projects back to h. Llama's MLP uses SwiGLU instead."),
    Term("swiglu", "SwiGLU", r"\bSwiGLU\b",
         "The MLP of Llama and most current models: two input projections, one passed through "
         "SiLU (Swish) and multiplied element by element with the other (a gated linear "
         "unit), then an output projection. Three matrices where GPT's GeLU MLP has two."),
    Term("dropout", "Dropout", r"\bdropout\b",
         "During training, a random share of a layer's values is set to zero (the rest scaled "
         "up to match), so that the model cannot lean on any one of them; the backward pass "
         "needs the mask, one byte a value in Korthikanti et al.'s count. Llama's configs set "
         "it to zero, so Llama keeps no masks: unfused attention then keeps its softmax "
         "output alone (2·a·s²·b, not GPT's 5·a·s²·b). The lab's 34·s·b·h a layer is GPT's "
         "count, two masks included, and it charges Llama the same: Llama 3.1 70B's own "
         "count is 33.5, so the lab errs about 1.5% high (EP01 step 3)."),
    Term("logits", "Logits", r"\blogits\b",
         "The output layer's scores, one for each word of the vocabulary for every token, "
         "before the softmax turns them into probabilities for the loss."),
    Term("sdpa", "SDPA", r"\bSDPA\b",
         "PyTorch's scaled_dot_product_attention, which runs a fused attention kernel "
         "(FlashAttention or a memory-efficient one) when it can."),
    Term("transformer-engine", "Transformer Engine", r"\bTransformer ?Engine\b",
         "NVIDIA's library of fused transformer layers and FP8 recipes, which Megatron-LM "
         "uses."),
    Term("mtp", "Multi-token prediction (MTP)", r"\bMTP\b|\bmulti-token prediction\b",
         "Extra output modules trained to predict the tokens after the next one too "
         "(DeepSeek-V3 predicts one more): a denser training signal, and a draft for "
         "speculative decoding."),
    Term("wave-quantisation", "Wave quantisation",
         r"\bwave quanti[sz]ation\b|\bwaves? part empty\b|\bfull-wave\b",
         "A GEMM runs as output tiles spread over the GPU's streaming multiprocessors in "
         "waves; when the tile count is not a multiple of the SM count, the last wave runs "
         "part empty and the GEMM falls short of its full-wave rate."),
    Term("mfu", "MFU (model FLOPs utilisation)", r"\bMFU\b|\bmodel FLOPs utili[sz]ation\b",
         "The FLOPs the model needs for a step (about 6 × parameters × tokens, plus attention) "
         "divided by the step time and by the GPUs' peak FLOP/s. Work done twice, such as "
         "recomputation, does not count. For an FP8 run the lab, like most reports, divides "
         "by the BF16 peak (a BF16-equivalent MFU, comparable with a BF16 run's); against "
         "the FP8 peak, twice as high on an H100, the same run reads half as much."),
    Term("hfu", "HFU (hardware FLOPs utilisation)",
         r"\bHFU\b|\bhardware FLOPs utili[sz]ation\b",
         "Like MFU, but counting every FLOP the GPUs run, recomputation included: higher than "
         "MFU whenever activations are recomputed, equal when nothing is."),
    Term("pareto-front", "Pareto front", r"\bPareto front\b",
         "The plans that no other plan beats on every count at once: in EP08's planner, those "
         "for which no other plan is both faster and lighter in memory per GPU."),
    Term("flashattention", "FlashAttention", r"\bFlashAttention\b",
         "A fused attention kernel that computes softmax(QKᵀ)V tile by tile, never storing "
         "the s × s matrix of scores."),
    Term("gqa", "Grouped-query attention (GQA)", r"\bgrouped-query attention\b|\bGQA\b",
         "Several query heads share one key/value head, which shrinks the KV cache and the "
         "keys and values TP and CP move."),
    Term("kv-cache", "KV cache", r"\bKV cache\b",
         "The keys and values of the tokens already processed, kept so that each new token "
         "attends to them without computing them again."),
    # ---- precision ----
    # Round-14 cold reading of EP01, finding 9: the formats EP01's first question names.
    Term("bf16", "bf16 (bfloat16)", r"\bbf16\b|\bBF16\b|\bbfloat16\b",
         "A 16-bit floating-point format, 2 bytes a value: 8 exponent bits, as fp32 has, so the "
         "same range, and 7 mantissa bits, about three significant decimal digits. Mixed-"
         "precision training keeps weights, activations and gradients in it; fp16, the older "
         "16-bit format, has 5 exponent bits and needs loss scaling."),
    Term("fp32", "fp32 (single precision)", r"\bfp32\b|\bFP32\b",
         "The 32-bit IEEE floating-point format, 4 bytes a value: 8 exponent and 23 mantissa "
         "bits. Mixed-precision training keeps the master weights and Adam's moments in it, "
         "since an update much smaller than its weight would round away in bf16."),
    Term("int8-int4", "int8 and int4", r"\bint[48]\b|\bINT[48]\b",
         "Integer weight formats for inference: 1 byte or half a byte a parameter, each group "
         "of weights carrying a floating-point scale that maps the integers back to the "
         "weights' values (quantisation)."),
    Term("master-weights", "Master weights", r"\bmaster (?:copy|copies|weights)\b",
         "The fp32 copy of the weights that the optimizer updates; the 16-bit weights the "
         "forward pass reads are cast from it."),
    Term("adam-moments", "Adam moments", r"\bAdam(?:'s)? (?:two )?moments\b",
         "Adam keeps two numbers per parameter, a running mean of the gradient and of its "
         "square: in the common mixed-precision recipe both fp32, 8 bytes a parameter; some "
         "recipes keep them in bf16 (DeepSeek-V3: 4 bytes)."),
    Term("paged-optimizer", "Paged optimizer", r"\bpaged optimi[sz]ers?\b",
         "bitsandbytes' optimizer whose state lives in CUDA unified memory: pages move to CPU "
         "memory when the GPU runs short and back when needed, so a memory spike does not "
         "crash the run (QLoRA)."),
    Term("fp8-formats", "E4M3 and E5M2", r"\bE4M3\b|\bE5M2\b",
         "The two FP8 formats: 4 exponent and 3 mantissa bits (more precision, for weights "
         "and activations) or 5 and 2 (more range, for gradients)."),
    Term("e8m0", "E8M0", r"\bE8M0\b",
         "An 8-bit number with only an exponent, so a power of two: the shared scale of each "
         "32-value block in the OCP MX formats such as MXFP8."),
    Term("amax", "amax", r"\bamax\b",
         "The largest absolute value in a tensor (or a block): FP8 recipes derive its scale "
         "from it, so that the largest value lands near the format's maximum."),
    Term("delayed-scaling", "Delayed scaling", r"\bdelayed(?:-|\s+)scaling\b",
         "FP8 scaling that takes each tensor's scale from the largest magnitudes (amax) seen "
         "in earlier steps, so the cast needs no extra pass over the tensor."),
    Term("rowwise", "Rowwise scaling", r"\brow-?wise\b",
         "FP8 scaling with one scale per row of a matrix (per token of an activation, per "
         "output channel of a weight) instead of one per tensor: finer than per-tensor, "
         "coarser than blocks."),
    Term("mxfp8", "MXFP8", r"\bMXFP8\b",
         "The OCP microscaling FP8 format: each block of 32 FP8 values shares one E8M0 scale. "
         "Blackwell's tensor cores read it directly."),
    Term("tn-layout", "TN layout", r"\bTN(?: layouts?| GEMMs?)\b",
         "A GEMM's operand layout: the first matrix transposed (T), the second not (N). "
         "Hopper's FP8 tensor cores take only TN, so an FP8 recipe also writes a transposed "
         "copy of each operand the backward pass multiplies."),
    Term("lora", "LoRA", r"\bLoRA\b",
         "Low-rank adaptation: the model is frozen, and each chosen matrix W gets a trained "
         "update B·A of rank r, r·(d_in + d_out) parameters."),
    Term("qlora", "QLoRA", r"\bQLoRA\b",
         "LoRA on a base model stored in 4-bit NF4 and dequantised for each multiply."),
    Term("nf4", "NF4", r"\bNF4\b",
         "4-bit NormalFloat: 16 levels at the quantiles of a normal distribution, with one "
         "scale for each block of 64 weights."),
    # ---- MoE, CP, RL, failures ----
    Term("capacity-factor", "Capacity factor", r"\bcapacity factor\b",
         "The most tokens an expert takes, as a multiple of its fair share; the tokens beyond "
         "it are dropped (they skip the expert)."),
    Term("zigzag", "Zigzag layout", r"\bzigzag\b",
         "A context-parallel split: cut the sequence into 2c chunks and give rank r chunks r "
         "and 2c − r − 1, so every rank gets the same share of the causal mask."),
    Term("rollout", "Rollout", r"\brollouts?\b",
         "In reinforcement learning, generating responses with the current model, which the "
         "trainer then scores and learns from."),
    Term("off-policy", "Off-policy (one step off-policy)", r"\boff-policy\b",
         "An RL update learned from samples that older weights generated than the ones being "
         "trained. Rollout and training pools that work at once are one step off-policy: the "
         "engines generate the next batch while the trainer learns from the last."),
    Term("importance-ratio", "Importance ratio", r"\bimportance ratios?\b",
         "The probability of a sampled token under the weights being trained over its "
         "probability under the weights that generated it: an off-policy sample's gradient is "
         "weighted by it (PPO and GRPO clip it)."),
    Term("mla", "Multi-head latent attention (MLA)",
         r"\bmulti-head latent attention\b|\bMLA\b",
         "DeepSeek-V2's attention: every head's keys and values are rebuilt from one "
         "compressed latent per token and layer (512 numbers, plus 64 for the rotary part in "
         "DeepSeek-V3 and R1), so the KV cache keeps the latent, not keys and values per head. "
         "Every head shares it, so tensor parallelism does not split it."),
    Term("attention-dp", "Attention data parallelism (DP attention)",
         r"\battention data parallelism\b|\bDP attention\b",
         "A way to serve a MoE model (SGLang's --enable-dp-attention with --dp-size D): an "
         "engine's GPUs form D attention groups, each running attention for whole requests "
         "of its own and keeping only their KV cache, with attention's weights split over "
         "the group's GPUs; the experts are split over all the engine's GPUs, and what no "
         "group splits (the embedding; with more flags the dense layers and shared experts) "
         "is whole on every GPU. The group with the most requests sets the cache's memory and "
         "each decode step's pace."),
    Term("prefill-decode", "Prefill and decode", r"\bprefill\b|\bdecode\b",
         "The two phases of generating text. Prefill reads the whole prompt in one pass, "
         "compute-bound, and fills the KV cache; decode then writes one token per step, each "
         "step reading the weights and the cache from memory, so it is bound by memory "
         "bandwidth."),
    Term("disaggregation", "Prefill/decode disaggregation",
         r"\bdisaggregat(?:ion|ed)\b",
         "Serving prefill and decode on separate engines (DistServe, Zhong et al. 2024), so a "
         "long prefill does not stall the decodes batched beside it; the prompts' KV cache "
         "moves from the prefill engines to the decode engines."),
    Term("cpu-adam", "CPU Adam", r"\bCPU Adam\b",
         "The optimizer's state (fp32 master weights and Adam's moments) kept in host RAM and "
         "updated by the CPU (ZeRO-Offload; Megatron-LM's --optimizer-cpu-offload): the GPU "
         "sends its gradients down and takes the new weights back over PCIe every step."),
    Term("goodput", "Goodput", r"\bgoodput\b",
         "The share of the wall clock that trains steps that count: time spent saving, "
         "re-doing work lost at a failure and restarting is not goodput."),
    Term("tectonic", "Tectonic", r"\bTectonic\b",
         "Meta's distributed file system, where Llama 3's training wrote its checkpoints."),
    Term("mtbi", "MTBI", r"\bMTBI\b|\bmean time between interruptions\b",
         "Mean time between interruptions: how long a job runs, on average, between failures "
         "that stop it. It falls as GPUs are added."),
    Term("young", "Young's rule", r"\bYoung's (?:rule|formula|interval)\b",
         "The save interval that loses the least time: √(2δM) for a save that stops training "
         "for δ and failures every M on average (Young 1974; Daly 2006 refines it)."),
)
