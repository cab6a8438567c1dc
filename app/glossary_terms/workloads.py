"""Glossary terms, workloads: MoE, long context, RL placement, failures at scale, and the
run reports the validation page reads; ``app.glossary_terms`` joins the topics into
``GLOSSARY``."""

from app.glossary_terms.term import Term

TERMS: tuple[Term, ...] = (
    # ---- MoE, CP, RL, failures ----
    Term("moe", "MoE (mixture of experts)", r"\bMoE\b|\bmixture[- ]of[- ]experts\b",
         "A layer whose MLP is many smaller MLPs (experts), of which a router picks a few for "
         "each token: the model holds all the experts' parameters but each token runs only "
         "its chosen ones (DeepSeek-V3: 671B parameters, 37B active).",
         "Shazeer et al. 2017, Outrageously Large Neural Networks; Lepikhin et al. 2020 "
         "(GShard)"),
    Term("capacity-factor", "Capacity factor", r"\bcapacity factor\b",
         "The most tokens an expert takes, as a multiple of its fair share; the tokens beyond "
         "it are dropped (they skip the expert)."),
    Term("zigzag", "Zigzag layout", r"\bzigzag\b",
         "A context-parallel split: cut the sequence into 2c chunks and give rank r chunks r "
         "and 2c − r − 1, so every rank gets the same share of the causal mask."),
    Term("rl", "RL (reinforcement learning)", r"\bRL\b|\breinforcement learning\b",
         "Training a model on rewards for what it generates rather than on fixed text: it "
         "writes responses (rollouts), a reward scores them, and the trainer raises the "
         "likelihood of the better ones (PPO, GRPO).",
         "Ouyang et al. 2022 (InstructGPT, PPO); Shao et al. 2024 (DeepSeekMath, GRPO)"),
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
    Term("wps", "WPS and TPS (tokens per second per GPU)", r"\bWPS\b|\bTPS\b",
         "torchtitan's throughput: the tokens one data-parallel rank trains per second, divided "
         "by the GPUs that share that rank's batch (TP × PP, and CP where used), so tokens/s "
         "per GPU. Older torchtitan logs call it wps ('words per second', by convention for "
         "tokens), newer ones tps.",
         "torchtitan train.py (\"tokens per second, abbr. as wps by convention\"); "
         "torchtitan docs/performance.md"),
    Term("tectonic", "Tectonic", r"\bTectonic\b",
         "Meta's distributed file system, where Llama 3's training wrote its checkpoints."),
    Term("mtbi", "MTBI", r"\bMTBI\b|\bmean time between interruptions\b",
         "Mean time between interruptions: how long a job runs, on average, between failures "
         "that stop it. It falls as GPUs are added."),
    Term("young", "Young's rule", r"\bYoung's (?:rule|formula|interval)\b",
         "The save interval that loses the least time: √(2δM) for a save that stops training "
         "for δ and failures every M on average (Young 1974; Daly 2006 refines it)."),
)
