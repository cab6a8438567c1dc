"""The assumptions behind EP04's figures, written out for the page (labs.tensor_parallel.lab)."""

from __future__ import annotations

from labs.tensor_parallel.inputs import TPResult


def assumptions(result: TPResult) -> tuple[str, ...]:
    """The compute and bandwidth assumptions behind the figures, in the page's words."""
    inp, cost = result.input, result.cost
    gpu, topo = inp.gpu, inp.topology
    one = next((c for c in result.sweep if c.tp == 1), None)
    rate_note = (f" (on one GPU, {one.gemm_rate / 1e12:,.0f}: the narrower shards run slower)"
                 if one is not None and cost.tp > 1 else "")
    override = ("" if inp.mfu is None else
                f" A full-wave GEMM is set to {100 * inp.mfu:.0f}% of the peak (the MFU "
                "control overrides the measured rate).")
    notes = [
        f"Compute: each kernel of the layer on one GPU of the group, timed at the "
        f"{gpu.name}'s measured rates: its GEMMs reach {cost.gemm_rate / 1e12:,.0f} TFLOP/s "
        f"of the {gpu.bf16_flops / 1e12:,.0f} TFLOP/s dense BF16 peak at t = {cost.tp}"
        f"{rate_note}; attention at its fused kernel's published rate; norms, activations "
        f"and residual adds at the achieved HBM bandwidth, repeated on every GPU of the group "
        f"unless sequence parallelism splits them (K and V stop shrinking past "
        f"{inp.model.kv_heads} KV heads).{override}",
    ]
    if topo.cluster is not None:
        c = topo.cluster
        notes.append(
            f"Links: {c.gpus_per_node} GPUs per node on {c.intra.name} "
            f"({c.intra.bandwidth / 1e9:,.0f} GB/s per direction per GPU, "
            f"{c.intra.ring_busbw / 1e9:g} GB/s of ring busBW, EP02's); a group larger "
            f"than a node crosses {c.inter.name} ({c.inter.bandwidth / 1e9:,.3g} GB/s per "
            f"port, {c.inter.ring_busbw / 1e9:g} GB/s of busBW, one port per GPU), its "
            "slowest link.")
    else:
        link = topo.link
        where = "inside one node" if link.kind == "scale-up" else \
            "each GPU in its own node, one port each"
        notes.append(f"Link: {link.name}, {link.bandwidth / 1e9:,.3g} GB/s per direction "
                     f"({link.ring_busbw / 1e9:g} GB/s of ring busBW), {where}.")
    notes += [
        f"Collectives: as NCCL runs them (its tuning model, NCCL 2.8's latencies as EP02 "
        f"step 4 states them, on the links' measured bus bandwidths); each moves the s·b·h bf16 "
        f"activations ({result.collective_bytes / 1e6:,.1f} MB); "
        f"{result.collectives_per_layer} per layer per step "
        + ("(sequence parallelism): forward an all-gather and a reduce-scatter around each "
           "half, backward 6, the 4 mirror images and 2 all-gathers of each column-split "
           "matrix's input again; " if inp.sp else "as all-reduces, ")
        + "the forward ones block the next matmul; in backward each column-split layer's "
        "run beside its other GEMM (Megatron's default), and only what outlasts it counts.",
        f"Per step: {inp.model.layers} layers plus the vocabulary-parallel embedding and "
        f"output layer (2 more collectives), one micro-batch (the sequences a GPU runs "
        f"through one forward and backward pass) of {inp.micro_batch} x {inp.seq_len:,} "
        "tokens; the cross-entropy's small all-reduces are left out.",
        f"Efficiency = one GPU's time ÷ (t x the group's time): {cost.step_speedup:.2f}x on "
        f"{cost.tp} GPUs = {100 * cost.step_efficiency:.1f}%.",
        "Memory: the EP01 ledger, training with mixed-precision Adam (16 B/param), "
        f"{inp.recompute} recomputation, sequence parallelism {'on' if inp.sp else 'off'}.",
    ]
    return tuple(notes)
