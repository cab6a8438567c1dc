"""Fix X: round-29 cold reading B's findings on EP05 (pipeline) and EP10 (low precision)."""

import re

import pytest

from app.charts.units import fmt_bytes, fmt_ms, fmt_pct
from tests.app.test_round22_coldP import _step

EP05, EP10 = "/episodes/pipeline", "/episodes/low-precision"


def test_ep10_step_12_sets_the_copy_against_the_layer_ep05_quotes(client):
    """1. EP10 step 12 set a 70B layer's 2.23 ms copy against a 1.42 ms forward, the layer's
    GEMM FLOPs alone, where EP05 steps 4-5 quote the same layer from EP08's step model as
    1.582 ms of kernels + 0.768 ms of TP collectives; the copy engine runs beside both, so
    that forward hides the whole copy. The page now quotes the step model's window for the
    H100 (hidden, with 5% to spare) and asks the B200, whose faster forward over the same
    PCIe 5 hides only part of it."""
    from app.routers.pipeline_lesson import facts as pipeline_facts
    from app.routers.precision_lesson import facts

    f = facts()
    h100, b200 = f["offload70"]["api"]["offload"], f["offload_b200"]["api"]["offload"]
    ((_, kernels, comms),) = pipeline_facts()["v5_forward"].layers
    assert (h100["forward_kernels_s"], h100["forward_comms_s"]) == pytest.approx(
        (kernels, comms), rel=1e-12)
    assert h100["forward_s"] == pytest.approx(kernels + comms, rel=1e-12)
    assert h100["hidden"] and not b200["hidden"]
    assert b200["layer_bytes"] == h100["layer_bytes"]
    html = client.get(EP10).text
    section = html.split('id="step-12"')[1].split("</section>")[0]
    assert re.search(r'data-predict="precision-12" data-right="part"', section)
    twelve = _step(html, 12)
    ask = twelve.split("Predict")[1].split("?")[0]
    assert "on B200s" in ask and "the same PCIe 5" in ask
    assert (f"On the B200: {fmt_ms(b200['forward_kernels_s'])} of kernels + "
            f"{fmt_ms(b200['forward_comms_s'])} of TP collectives = "
            f"{fmt_ms(b200['forward_s'])}, against a {fmt_ms(b200['copy_s'])} copy") in twelve
    assert f"The forward hides {fmt_pct(b200['hidden_share'])}" in twelve
    spare = round(100 * (1 - h100["copy_s"] / h100["forward_s"]))
    assert (f"An H100's forward, {fmt_ms(kernels)} + {fmt_ms(comms)} = "
            f"{fmt_ms(h100['forward_s'])}, hides the whole {fmt_ms(h100['copy_s'])} copy, but "
            f"with only {spare}% to spare") in twelve
    # 21: the share offloaded below the break-even is said to be the largest tenth under it.
    half = f["offload70_half"]["api"]["offload"]
    assert half["share"] == pytest.approx(int(10 * b200["hidden_share"]) / 10)
    assert half["hidden"]
    assert (f"Offload {half['share']:.0%}, the largest tenth under it, and the copy fits: "
            f"{fmt_bytes(half['freed_bytes'])} freed") in twelve
    assert "1.42 ms" not in twelve


def _tips_before_the_guess(html: str, n: int) -> str:
    """The glossary tips step ``n`` shows before its guess: every term-tip of the step (drills
    and tips are never hidden) outside its why, which waits for the guess."""
    from html import unescape

    from tests.app.test_step_beats import why_block

    step = html.split(f'id="step-{n}"')[1].split("</section>")[0]
    step = step.replace(why_block(step), "")
    tips = re.findall(r'<span class="term-tip" role="tooltip">(.*?)</span></span>', step, re.S)
    return " ".join(re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", t))) for t in tips)


def test_ep05_steps_4_and_5_tips_do_not_answer_their_predicts(client):
    """2. Round-29 reading B, #3 and #5: the zero-bubble tip above step 5's predict ("ZB-H1
    idles… about a third of that") gave (p − 1)(F + I − W) against (p − 1)(F + I + W), "a third
    with equal passes"; the interleaved tip on step 4's derive drill, visible before "from 1
    chunk per rank to 2, the idle time… about halves", said "the warm-up is v times shorter"
    with the bubble's form. The zero-bubble entry now names ZB-H1 without its idle time, and
    step 4's why (after the guess) is the interleaved entry's first use, so the drill carries
    no tip."""
    html = client.get(EP05).text
    four, five = _tips_before_the_guess(html, 4), _tips_before_the_guess(html, 5)
    assert "Interleaved 1F1B" not in four
    for said in ("times shorter", "(p − 1)/(v·m + p − 1)", "halve"):
        assert said not in four, said
    assert "Zero bubble (ZB-H1)" in five
    for said in ("a third", "(F + I − W)", "(F + I + W)"):
        assert said not in five, said
    # The entry is whole on the glossary and in step 4's why.
    step4 = html.split('id="step-4"')[1].split("</section>")[0]
    assert 'id="term-interleaved"' in step4.split('<details class="why"')[1]
    assert "drill-pipeline-bubble" in step4.split('id="term-interleaved"')[1]


def test_ep10_steps_1_5_6_7_state_what_their_answers_need(client):
    """3. Round-29 reading B on EP10: #6, step 6's 18.1 B holds only with the bf16 working
    copy kept beside the MX copies, which its predict did not say (step 3 had just dropped it);
    #7, step 7's share needs the 7.75h a token a layer the policy saves, given only in the why;
    #16, step 1 billed the 2.63 MB of amax history and scales "as an FSDP shard", where it is
    whole on every GPU; #17, step 5's limit named "the 18-byte one", which step 1 also calls
    TransformerEngine's FP8 recipe; #19, step 5 put the headroom over 80 GB at the driver's
    5.52 GB where the HBM tip says CUDA's 4.9 GB."""
    from html import unescape

    from app.glossary import GLOSSARY
    from app.routers.precision_lesson import facts, titan_kept

    html = client.get(EP10).text
    asked = {n: unescape(re.search(rf'data-predict="precision-{n}".*?<p class="predict">(.*?)'
                                   r"</p>", html, re.S)[1]) for n in (6, 7)}
    assert "beside the bf16 weights TransformerEngine's MXFP8 recipe keeps" in asked[6]
    k = titan_kept()
    assert f"{k['widths']:g}h bf16 values a token a layer" in asked[7]
    assert "FlashAttention's one fp32 a head a token" in asked[7]
    one = _step(html, 1)
    l1 = facts()["titan"]["api"]["ledger"]["parts"]
    assert (f"{fmt_bytes(l1['fp8_weights'])} of FP8 copies (the ledger's row), billed as an "
            "FSDP shard") in one
    assert f"{fmt_bytes(l1['scaling_state'])} of amax history and scales, whole on every GPU" \
        in one
    five = unescape(html.split('id="step-5"')[1].split("</section>")[0])
    limit = re.sub(r"<[^>]+>", "", five.split('<p class="limit">')[1].split("</p>")[0])
    assert "2 + 4 + 4 + 8 = 18 B a parameter" in limit and "18-byte one" not in limit
    gpu = facts()["deepseek70"]["result"].input.gpu
    cuda = gpu.cuda_memory_gib * 2**30
    headroom = f"{(cuda - gpu.memory_bytes) / 1e9:.1f} GB"
    hbm = next(t for t in GLOSSARY if t.slug == "hbm").definition
    assert f"leaving {headroom} for the CUDA context" in hbm
    assert (f"CUDA gives a process {gpu.cuda_memory_gib:g} GiB ({fmt_bytes(cuda)}), {headroom} "
            "more") in _step(html, 5)
    assert "81,559 MiB" not in _step(html, 5)


def test_ep05_and_ep10_name_what_they_quote_and_lead_on(client):
    """4. Round-29 reading B: #11, EP05 steps 4-5 quoted the step model's figures (a layer's
    kernels and collectives, I, W, F) with no word of how they are timed: the glossary's "step
    model" entry, tipped at its first use in step 4's note, says how, and step 5's note says its
    I, W and F are EP08's; #15, the GPipe entry called it "the first pipeline schedule"
    (PipeDream is older); #22, EP10 named torchtitan, torchao, FSDP2 and bitsandbytes with no
    line; #23, EP05 step 2's limit pointed at the bubble where step 3 asks about memory."""
    from html import unescape

    from app.glossary import GLOSSARY

    term = {t.slug: t.definition for t in GLOSSARY}
    assert "measured matmul rate" in term["step-model"] and "NCCL's rates" in term["step-model"]
    assert "taken as given" in term["step-model"]
    assert "first" not in term["gpipe"] and "Huang et al. 2019" in term["gpipe"]
    assert "FSDP2 (fully_shard)" in term["fsdp"]
    html = client.get(EP05).text
    four = html.split('id="step-4"')[1].split("</section>")[0]
    assert 'id="term-step-model"' in four.split('<details class="why"')[1]
    assert "In EP08's step model, I takes" in _step(html, 5)
    two = html.split('id="step-2"')[1].split("</section>")[0]
    limit = unescape(two.split('<p class="limit">')[1].split("</p>")[0])
    assert "until its backward pass, step 3's question" in limit
    ten = client.get(EP10).text
    for slug in ("torchtitan", "torchao", "bitsandbytes", "fsdp"):
        assert f'id="term-{slug}"' in ten, slug
