"""Glossary terms, compute and precision: kernels, FLOPs counted and utilisation, number
formats and fine-tuning; ``app.glossary_terms`` joins the topics into ``GLOSSARY``."""

from app.glossary_terms.term import Term

TERMS: tuple[Term, ...] = (
    # ---- compute and utilisation ----
    Term("gemm", "GEMM", r"\bGEMMs?\b",
         "General matrix multiply: the matrix products that do most of a transformer's "
         "FLOPs."),
    Term("sm", "SM (streaming multiprocessor)", r"\bSMs?\b|\bstreaming multiprocessors?\b",
         "One of the GPU's compute units, each with its own tensor cores, registers and shared "
         "memory (an H100 SXM has 132). A kernel's thread blocks run on them, so the SMs a "
         "communication kernel holds are taken from the compute beside it.",
         "NVIDIA H100 Tensor Core GPU Architecture whitepaper"),
    Term("mamf", "MAMF (maximum achievable matmul FLOPs)", r"\bMAMF\b|\bmamf-finder\b",
         "The highest FLOP/s a GPU actually reaches on a matrix multiply, found by timing a "
         "sweep of large shapes, as against the datasheet's peak, which no real matmul "
         "reaches. Stas Bekman's mamf-finder is the benchmark that finds it. The lab quotes "
         "each GPU's measured rate as a share of its peak.",
         "Bekman, Machine Learning Engineering, compute/accelerator/benchmarks (mamf-finder.py)"),
    # Round-29 cold reading B, finding 22: EP07 steps 4 and 8 used both with no line.
    Term("cublas", "cuBLAS", r"\bcuBLAS\b",
         "NVIDIA's library of linear-algebra kernels for its GPUs: the matrix multiplies "
         "(GEMMs) that PyTorch and Megatron-LM call, each cut into output tiles that the SMs "
         "compute in waves.",
         "NVIDIA cuBLAS documentation; NVIDIA Matrix Multiplication Background User's Guide"),
    # Round-31 reading A, finding 11: EP10 step 12's offload rests on both, undefined there.
    Term("side-stream", "Side stream (CUDA stream)", r"\bside streams?\b|\bCUDA streams?\b",
         "A CUDA stream is a queue of GPU work run in order; work on two streams may run at "
         "once. A side stream is one beside the stream the compute runs on: activation "
         "offloading queues its copies there, so they run while the next layers compute.",
         "NVIDIA CUDA C++ Programming Guide, Streams; PyTorch torch.cuda.Stream"),
    Term("copy-engine", "Copy engine", r"\bcopy engines?\b",
         "The GPU's DMA unit: it copies between host and GPU memory over PCIe without the "
         "SMs, so a copy queued on a side stream runs while the SMs compute.",
         "NVIDIA CUDA C++ Programming Guide, Asynchronous Concurrent Execution "
         "(asyncEngineCount)"),
    Term("babelstream", "BabelStream", r"\bBabelStream\b",
         "A memory-bandwidth benchmark (a GPU port of STREAM): it times simple kernels that "
         "copy, scale, add and combine large arrays in the GPU's memory, so its copy rate is "
         "the HBM bandwidth a kernel that only streams data reaches, below the datasheet's.",
         "Deakin et al. 2016, GPU-STREAM v2.0 (BabelStream); UoB-HPC/BabelStream"),
    Term("grouped-gemm", "Grouped GEMM", r"\bgrouped GEMMs?\b",
         "One kernel that runs many matrix multiplies of different sizes at once, as a MoE "
         "layer's experts need (each gets its own number of tokens)."),
    Term("gelu", "GeLU", r"\bGeLU\b|\bGELU\b",
         "The Gaussian error linear unit, x·Φ(x) with Φ the standard normal's cumulative "
         "distribution: the smooth activation of GPT's MLP, which widens each token from h to "
         "4h, applies GeLU and projects back to h. Llama's MLP uses SwiGLU instead."),
    Term("mlp", "MLP (the feed-forward block)", r"\bMLPs?\b|\bFFN\b",
         "The second half of every transformer layer (multilayer perceptron): each token is "
         "widened by one or two matrix multiplies, passed through an activation (GeLU, "
         "SwiGLU) and projected back to the hidden size. It holds most of a dense layer's "
         "weights: two thirds of a GPT layer's, about four fifths of a Llama 3 layer's.",
         "Vaswani et al. 2017, Attention Is All You Need, sec. 3.3"),
    Term("qkv", "QKV (queries, keys, values)", r"\bQKV\b",
         "The three projections that open attention: each token's hidden vector is multiplied "
         "by W_Q, W_K and W_V (often one fused matrix, W_QKV) into its query, key and value; "
         "queries are scored against keys, and the scores weight the values.",
         "Vaswani et al. 2017, Attention Is All You Need, sec. 3.2"),
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
    Term("transformer-engine", "Transformer Engine", r"\bTransformer ?Engine\b|\bTE\b",
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
    Term("gqa", "Grouped-query attention (GQA)",
         r"\bgrouped-query attention\b|\bGQA\b|\bKV heads?\b",
         "Several query heads share one key/value head, which shrinks the KV cache and the "
         "keys and values TP and CP move."),
    Term("kv-cache", "KV cache", r"\bKV cache\b",
         "The keys and values of the tokens already processed, kept so that each new token "
         "attends to them without computing them again."),
    # ---- precision ----
    # Round-14 cold reading of EP01, finding 9: the formats EP01's first question names.
    Term("bf16", "bf16 (bfloat16)", r"\bbf16\b|\bBF16\b|\bbfloat16\b",
         "A 16-bit floating-point format, 2 bytes a value: 8 exponent bits, as fp32 has, so the "
         "same range, and 7 mantissa bits: 8 bits of precision with the implicit bit, "
         "between two and three significant decimal digits. Mixed-"
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
    # FP8 itself too (round 19: used on eight pages before any definition).
    Term("fp8-formats", "FP8 (E4M3 and E5M2)", r"\bFP8\b|\bfp8\b|\bE4M3\b|\bE5M2\b",
         "8-bit floating point, 1 byte a value, in two formats: E4M3, 4 exponent and 3 mantissa "
         "bits (more precision, for weights and activations), and E5M2, 5 and 2 (more range, "
         "for gradients). Each tensor, row or block carries a scale that brings its values "
         "into the format's narrow range.",
         "Micikevicius et al. 2022, FP8 Formats for Deep Learning, arXiv:2209.05433"),
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
    # Round-29 cold reading B, #11: EP05 quoted the step model's figures (a layer's kernels,
    # collectives, I and W) with no word of how they are timed; #22: EP10 named torchtitan,
    # torchao and bitsandbytes with no line.
    Term("step-model", "Step model (EP08)", r"\bstep model\b",
         "The lab's timing of one training step (EP08), taken as given where earlier "
         "episodes quote it: each layer's kernels one by one, a GEMM at the GPU's measured "
         "matmul rate (MAMF) less its part-empty waves, the attention core at FlashAttention's "
         "published rate, norms and activations at achieved HBM bandwidth, plus the TP, CP and "
         "EP collectives each pass waits for at NCCL's rates (EP02); then the pipeline's "
         "bubble, the gradient sync and the optimizer.",
         "labs/hardware/kernels.py and labs/parallel/layer_time.py; rates in "
         "labs/presets/gpus.json and attention.json"),
    Term("torchtitan", "torchtitan", r"\btorchtitan\b",
         "PyTorch's reference code for pre-training large models (Llama 3, DeepSeek-V3) on "
         "FSDP2, TP, PP and CP, with torch.compile, low-precision options and activation "
         "checkpointing; its published runs log throughput and peak memory, which the lab "
         "checks against.",
         "pytorch/torchtitan (GitHub); Liang et al. 2024, arXiv:2410.06511"),
    Term("torchao", "torchao", r"\btorchao\b",
         "PyTorch's library of low-precision kernels and training: its float8 module swaps a "
         "model's linear layers for FP8 ones (tensorwise or rowwise scales) and can all-gather "
         "FSDP2's weight shards in FP8.",
         "pytorch/ao (GitHub), torchao.float8"),
    Term("bitsandbytes", "bitsandbytes", r"\bbitsandbytes\b",
         "A PyTorch library of 8-bit and 4-bit quantisation: its NF4 linear layers hold "
         "QLoRA's frozen base, dequantised for each multiply, and its paged optimizers move "
         "optimizer state to host memory when the GPU runs short.",
         "bitsandbytes-foundation/bitsandbytes (GitHub); Dettmers et al. 2023, QLoRA"),
    Term("nf4", "NF4", r"\bNF4\b",
         "4-bit NormalFloat: 16 levels at the quantiles of a normal distribution, with one "
         "scale for each block of 64 weights."),
)
