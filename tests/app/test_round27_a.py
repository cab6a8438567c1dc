"""Round-27 cold reading A (EP06's layout decide, EP08 steps 8/12/13, Your run, /api/gpus):
each finding, pinned on the behaviour it fixes."""

import re


def test_finding_1_the_layout_decides_bytes_a_token_redo_its_mb(client):
    """cp-decide-layout's message printed Ulysses' per-token bytes without the (c − 1)/c a rank
    keeps (2,560 B × 131,072 = 336 MB beside the 294 MB it printed). Its Ulysses option (round
    29 B #10: at CP 16, by time) works its bytes as the sum a token × (c − 1)/c × the shard's
    tokens, and that product gives the MB it prints."""
    body = client.get("/api/drills/cp-decide-layout", params={"answer": "ulysses"}).json()
    text = body["message"]
    m = re.search(r"= ([\d,]+) B a token × (\d+)/(\d+) × ([\d,]+) tokens = ([\d.,]+) MB", text)
    assert m, text
    total, kept, c, tokens, _ = (float(g.replace(",", "")) for g in m.groups())
    assert f"{total * kept / c * tokens / 1e6:,.0f}" == m[5]


def test_finding_2_a_hidden_all_to_all_is_drawn_at_its_own_seconds(client):
    """With EP overlap on, the comm lane drew each pass's all-to-all at 4.978 ms, its 5.867 ms
    less the 20/132 SM charge; overlapping a collective does not make it faster. Each pass's EP
    bars now add to the collective's own seconds (the same as without overlap), and the SM
    charge stays on the compute lane; the step time is unchanged by the drawing."""
    from app.routers.recipe import facts
    f = facts()
    on, base = f["ov_ep"]["api"]["timeline"], f["ov"]["api"]["timeline"]

    def lane(line, lane_, phase, states):
        return sum(e["seconds"] for e in line["events"] if e["kind"] == "ep"
                   and e["lane"] == lane_ and e["phase"] == phase and e["state"] in states)

    for phase in ("forward", "backward"):
        own = lane(base, "comm", phase, ("hidden", "exposed"))
        assert own > 0
        assert abs(lane(on, "comm", phase, ("hidden", "exposed")) - own) < 1e-9 * own + 1e-12
        sm = lane(on, "compute", phase, ("sm",))
        assert sm > 0.1 * own  # the SMs lent stay charged on the compute lane
    assert f["ov_ep"]["api"]["step_s"] < f["ov"]["api"]["step_s"]


def _step(client, path: str, n: int) -> str:
    from html import unescape
    html = client.get(path).text
    start = html.index(f'<section class="step" id="step-{n}"')
    body = html[start:html.index("</section>", start)]
    body = re.sub(r'<span class="term-tip".*?</span>', "", body)
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", body)))


def test_finding_3_step_12_states_the_network_and_the_fraction_nccl_reaches(client):
    """Step 12 used a NIC's 48 GB/s without saying the cluster is on InfiniBand NDR or that
    48 GB/s is what NCCL's ring reaches on a 400 Gb/s (50 GB/s) port. Its setup now says so,
    before the first 48 GB/s, from the link preset; step 13's 2 × 48 GB/s names the factor."""
    from labs.hardware.links import UNMEASURED_SCALE_OUT, get_link
    link = get_link("ib-ndr")
    assert link.ring_busbw / link.bandwidth == UNMEASURED_SCALE_OUT  # the same 48 of 50
    twelve = _step(client, "/episodes/recipe-3d", 12)
    said = ("InfiniBand NDR: one 400 Gb/s (50 GB/s) port a GPU, of which NCCL's ring reaches "
            "48 GB/s (0.96, as NVIDIA's nccl-tests measure it)")
    assert said in twelve
    assert twelve.index("InfiniBand NDR") < min(m.start() for m in re.finditer(r"\b48 GB/s",
                                                                              twelve))
    thirteen = _step(client, "/episodes/recipe-3d", 13)
    assert "each with its own NIC (48 GB/s: NDR's 0.96):" in thirteen


def _parse(client, name: str, below: bool = False, **extra) -> dict:
    from pathlib import Path
    log = (Path(__file__).parents[1] / "fixtures" / "runs" / name).read_text()
    if below:
        log = below_the_ledger(log)
    return client.post("/api/runs/parse", json={"log": log, **extra}).json()


def below_the_ledger(log: str) -> str:
    """Megatron's fixture with the memory report it printed until fixT (max allocated 40,217.8
    MB, max reserved 43,826.0 MB: 45.96 GB, below the ledger's 46.91 GB). fixT item 2 derives
    the fixture's report from the model, above the ledger; these findings are about a run
    whose ledger is above reserved, so they keep that report."""
    log = re.sub(r"max allocated: [\d.]+", "max allocated: 40217.8", log)
    return re.sub(r"reserved: [\d.]+", "reserved: 43826.0", log)


def test_finding_4_the_kept_activations_are_said_part_by_part(client):
    """torchtitan's run said "7.6 GB: each layer's input", but each layer's input is 5.37 GB;
    the other 2.24 GB is the embedding's output and the output layer's logits. Both parts are
    said now, each the ledger's, and they add to the printed total."""
    body = _parse(client, "torchtitan_llama3_70b.log", gpu="h100-sxm")
    why = {f["name"]: f for f in body["figures"]}["peak_reserved_bytes"]["unlike"]
    b = body["recipe"]["stages"][0]["breakdown"]
    layers, ends = b["activations"] / 1e9, b["embedding_and_logits"] / 1e9
    assert (f"each layer's input, {layers:.2f} GB, under full recomputation, and the "
            f"embedding's output and the output layer's logits, {ends:.2f} GB") in why
    kept = float(re.search(r"kept for the backward \(([\d.]+) GB", why).group(1))
    assert kept == round(layers + ends, 1)


def test_finding_5_a_log_without_a_capacity_line_gets_the_presets_note(client):
    """Megatron's log prints no CUDA capacity line, so the run went without the budget and
    which way the verdicts err, though its ledger is above reserved. The note falls back to
    the preset's figures and says this run's way, the ledger above reserved, so strict."""
    note = _parse(client, "megatron_llama3_8b.log", below=True, gpu="h100-sxm")["capacity_note"]
    assert note.startswith("The lab budgets the NVIDIA H100 SXM 80GB at 80 GB")
    assert "CUDA gives the process 79.1 GiB (84.9 GB)" in note
    assert "(this run: the ledger 0.9 GB above reserved, so strict" in note


def test_finding_6_the_gap_is_the_difference_of_the_printed_figures(client):
    """The table printed reserved 46.0 and ledger 46.9 GB beside "the ledger is 1.0 GB above
    reserved" (46.909 − 45.955 unrounded). The sentence takes the printed figures' difference."""
    body = _parse(client, "megatron_llama3_8b.log", below=True, gpu="h100-sxm")
    row = {f["name"]: f for f in body["figures"]}["peak_reserved_bytes"]
    shown = round(row["predicted"] / 1e9, 1) - round(row["measured"] / 1e9, 1)
    assert f"Even so the ledger is {shown:.1f} GB above reserved" in row["unlike"]
    assert "Even so the ledger is 1.0 GB" not in row["unlike"]


def test_finding_7_strict_is_said_before_what_lies_outside_reserved():
    """The note compared reserved above the ledger with the gap alone, but the gap must also
    hold the CUDA context and NCCL's buffers, outside reserved: a run 4.5 GB above the ledger
    read "strict" outright. Strict now says how much of the gap those may take."""
    from labs.hardware.gpus import capacity_note, get_gpu
    h100 = get_gpu("h100-sxm")
    note = capacity_note(h100, above=4.5e9)
    assert ("(this run: 4.5 GB of reserved above the ledger, so strict unless the CUDA context "
            "and NCCL's buffers, outside reserved, take more than the 0.4 GB left)") in note
    assert note.endswith("so lenient)") is False
    assert capacity_note(h100, above=40.7e9).endswith("(this run: 40.7 GB of reserved above "
                                                      "the ledger, so lenient)")


def test_finding_8_an_amd_gpu_says_hip_and_rccl(client):
    """The MI300X's note said "CUDA gives the process" and "NCCL's buffers"; on ROCm these are
    HIP's and RCCL's (PyTorch only keeps the torch.cuda name). NVIDIA's notes keep CUDA/NCCL."""
    body = client.get("/api/gpus").json()
    rows = body if isinstance(body, list) else body.get("gpus", body)
    notes = {g["id"]: g["capacity_note"] for g in rows}
    mi = notes["mi300x"]
    assert "HIP (ROCm) gives the process 191.45 GiB" in mi and "RCCL's buffers" in mi
    assert "CUDA" not in mi and "NCCL" not in mi.replace("RCCL", "")
    assert "CUDA gives the process" in notes["h100-sxm"] and "NCCL's buffers" in notes["h100-sxm"]


def test_finding_9_the_fsdp2_script_runs_what_it_says():
    """GPT-3's FSDP2 script named "feed_forward.w3" (SwiGLU's gate) on a GELU MLP of two
    matrices, set ZERO_STAGE = 1 that nothing read while it ran ZeRO-2, and imported
    replicate unused. The TP plan now follows the MLP, ZERO_STAGE is the stage it runs and
    RESHARD_AFTER_FORWARD reads it, and each import is used."""
    import ast

    from labs.model.presets import get_model
    from labs.recipe.export import export
    from labs.recipe.inputs import Plan

    gpt3, llama = get_model("gpt-3-175b"), get_model("llama-3.1-70b")
    assert not gpt3.gated_mlp and llama.gated_mlp
    seed = Plan(tp=8, pp=4, dp=2, zero=1, microbatches=16, seq_len=2048)
    text = export(seed, gpt3, "fsdp").text
    assert '"feed_forward.w1"' in text and '"feed_forward.w2"' in text
    assert '"feed_forward.w3"' not in text
    assert '"feed_forward.w3"' in export(seed, llama, "fsdp").text
    assert "ZERO_STAGE = 2  # FSDP2's nearest to the plan's ZeRO-1" in text
    assert "RESHARD_AFTER_FORWARD = ZERO_STAGE == 3" in text
    for zero, runs, wrapper in ((0, 0, "replicate"), (1, 2, "fully_shard"),
                                (2, 2, "fully_shard"), (3, 3, "fully_shard")):
        plan = Plan(tp=8, pp=1, dp=8, zero=zero, microbatches=4, seq_len=2048)
        src = export(plan, gpt3, "fsdp").text
        assert f"ZERO_STAGE = {runs}" in src
        tree = ast.parse(src)
        imported = {a.asname or a.name for n in ast.walk(tree)
                    if isinstance(n, ast.ImportFrom) for a in n.names}
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        assert imported <= used, imported - used
        assert wrapper in used


def test_finding_10_deepspeeds_pipeline_section_holds_only_keys_the_engine_reads():
    """DeepSpeed's "pipeline": {"partition": "uniform"} is parsed but no engine code reads it
    (deepspeed/runtime/pipe/engine.py reads pipe_partitioned, grad_partitioned,
    activation_checkpoint_interval and use_reentrant); the partition is PipelineModule's
    partition_method, which the notes set. The section keeps the interval alone."""
    import json

    from labs.model.presets import get_model
    from labs.recipe.export import export
    from labs.recipe.inputs import Plan

    out = export(Plan(tp=8, pp=4, dp=2, zero=1, microbatches=16, seq_len=2048),
                 get_model("gpt-3-175b"), "deepspeed")
    assert set(json.loads(out.text)["pipeline"]) == {"activation_checkpoint_interval"}
    assert any('partition_method="uniform"' in n for n in out.notes)
