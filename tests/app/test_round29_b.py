"""Round-29 cold reading B (EP06 and EP07): each finding fixed here, pinned on the behaviour it
fixes. (Its EP05 and EP10 findings are pinned elsewhere.)"""

import html as markup
import re

from tests.app.test_step_beats import drop_whys


def _text(part: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", markup.unescape(part)).split())


def _section(page: str, step: int) -> str:
    start = page.index(f'<section class="step" id="step-{step}"')
    return page[start:page.index("</section>", start)]


def _before_guess(page: str, step: int) -> str:
    """What a step shows before its guess: the section less its why (its drills and the
    glossary's tips are never hidden)."""
    return _text(drop_whys(_section(page, step)))


def _prose(part: str) -> str:
    """Text as read: the glossary's tips and the tags dropped (a tipped word keeps its "'s")."""
    part = re.sub(r'<span class="term-tip".*?</span>', "", part, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", "", markup.unescape(part)).split())


def _tips(page: str) -> list[str]:
    return [_text(t) for t in re.findall(r'<span class="term-tip".*?</span>', page, re.S)]


def test_finding_2_the_expert_dp_decide_does_not_say_dp_is_gpus_over_pp(client):
    """EP07 step 6 asks DP at 2,048 GPUs with PP 16 and EP 64; the decide in the same step,
    in sight before the guess, said "each size below divides by 16, so DP stays whole",
    DP = GPUs ÷ 16. The stem now says nothing of how DP is counted; its feedback still does,
    once answered."""
    page = client.get("/episodes/experts").text
    seen = _before_guess(page, 6)
    assert "On which of these cluster sizes can the plan run?" in seen
    assert not re.search(r"divides? by (16|PP)|DP stays whole|÷ (16|PP)", seen), seen
    body = client.get("/api/drills/moe-decide-expert-dp", params={"answer": "whole"}).json()
    assert body["status"] == "right" and "must divide by PP × EP" in body["message"]


def test_finding_4_the_moe_tip_does_not_give_step_1s_share(client):
    """EP07's lede tips MoE; the tip said "DeepSeek-V3: 671B parameters, 37B active", step 1's
    predict (the share of its parameters a token uses) one division away. It now gives
    Mixtral's experts picked a token, counted from the model's shape."""
    from labs.model.presets import get_model

    v3, mixtral = get_model("deepseek-v3"), get_model("mixtral-8x7b")
    page = client.get("/episodes/experts").text
    lede = page[:page.index('<section class="step" id="step-1"')]
    tip = next(t for t in _tips(lede) if t.startswith("MoE (mixture of experts)"))
    active = f"{v3.active_params / 1e9:.0f}B"
    for figure in (f"{v3.params / 1e9:.0f}B", active, "37B", "active"):
        assert figure not in tip, tip
    assert (f"Mixtral 8x7B: {mixtral.top_k} of each layer's {mixtral.experts} experts a "
            "token") in tip


def test_finding_9_the_network_decide_does_not_say_the_dispatch_slows(client):
    """EP07 step 7 asks what slows under leaves of 4 nodes and a 4:1 spine; its decide, in
    sight before the guess, said every EP group's "dispatch crosses the spine" and asked what
    "cuts" the layer's time, so the dispatch slows. The stem states the network only."""
    page = client.get("/episodes/experts").text
    seen = _before_guess(page, 7)
    stem = re.search(r"DeepSeek-V3 on 256 H800 nodes as PP16 × EP64.*?\?", seen)[0]
    assert "4:1 spine" in stem and "fastest MoE layer" in stem
    for word in ("dispatch", "cross", "cut", "slow"):
        assert word not in stem, stem


def _judged(drill_id: str) -> tuple[dict, dict]:
    from app.lesson_drills import LESSON_DRILLS

    drill = next(d for drills in LESSON_DRILLS.values() for d in drills if d.id == drill_id)
    return {o.key: o for o in drill.judge()}, dict(drill.choices)


def test_finding_8_the_network_decide_offers_no_spine_that_only_halves_the_penalty(client):
    """moe-decide-network offered "rebuild the spine at 2:1", which only halves the penalty
    that leaves of 8 remove, so it could not win and needed no numbers to rule out. Its 1:1
    replacement tied leaves of 8 (round-31 reading B, finding 2), and expert TP 2 stands in
    its place now (tests/app/test_round31_b.py); EP 32 still wins."""
    options, labels = _judged("moe-decide-network")
    assert "spine2" not in options and "2:1" not in " ".join(labels.values())
    assert options["ep32"].right and sum(o.right for o in options.values()) == 1


def test_finding_10_the_layout_decide_compares_the_methods_at_one_cp_by_time(client):
    """cp-decide-layout asked the fewest bytes per GPU of a ring over CP 2 and Ulysses over CP
    8 and 16: a per-GPU metric over 2 to 16 GPUs rewards the most GPUs, and Ulysses over CP 8
    lost to CP 16 by step 6's own "its bytes fall". The three methods now run at one CP degree
    and the question asks for time, the busiest rank's attention and the traffic it waits for
    (the engine's exposed_s); each why's sum redoes its figure, and the winner's is on no
    screen before the drill is answered."""
    from app.labkit.drills import lab_value
    from app.lesson_drills.context_parallel import LAYOUT_DECIDE

    options, labels = _judged("cp-decide-layout")
    from app.lesson_drills import LESSON_DRILLS
    drill = next(d for d in LESSON_DRILLS["cp"] if d.id == "cp-decide-layout")
    assert "soonest" in drill.question and "fewest bytes" not in drill.question
    cp = int(re.search(r"over CP (\d+)", drill.question)[1])
    layouts = {"ring": "zigzag", "allgather": "allgather", "ulysses": "ulysses"}
    assert set(options) == set(layouts)
    assert not any(re.search(r"CP \d", label) for label in labels.values())  # one degree
    api = {k: lab_value("cp", {**LAYOUT_DECIDE, "cp": cp, "layout": lay}, lambda a: a)
           for k, lay in layouts.items()}
    time = {k: a["attention_s"] + a["exposed_s"] for k, a in api.items()}
    # Round-31 reading B, finding 1: the all-gather is Llama 3's, zigzag-balanced
    # (tests/app/test_round31_b.py): the ring's attention and the all-gather's wait.
    time["allgather"] = api["ring"]["attention_s"] + api["allgather"]["exposed_s"]
    assert [k for k, o in options.items() if o.right] == [min(time, key=time.get)] == ["ring"]
    assert min(api, key=lambda k: api[k]["comm_bytes_per_gpu"]) == "ulysses"  # bytes ≠ time
    for key, option in options.items():
        assert option.figure == f"{time[key] * 1e3:,.2f} ms"
        parts = re.search(r"([\d.]+) ms \+ ([\d.]+) ms = ([\d.]+) ms\.$", option.why)
        assert parts and f"{float(parts[1]) + float(parts[2]):.2f}" == parts[3] == \
            option.figure.removesuffix(" ms"), option.why
    page = client.get("/episodes/context-parallel").text
    assert options["ring"].figure not in page
    assert "travels behind the block in hand" not in page


def test_finding_12_step_3_gives_the_160_gbs_to_deepseeks_report_not_nccl(client):
    """EP07 step 3's predict said "NCCL's all-to-all reaches about 160 GB/s" on the H800's
    NVLink; 160 GB/s is the NVLink bandwidth DeepSeek-V3's report gives (§3.2.2, "Efficient
    Implementation of Cross-Node All-to-All Communication"), as the why says, not an NCCL
    measurement. The figure is the link preset's."""
    from labs.hardware.links import get_link

    page = client.get("/episodes/experts").text
    seen = _before_guess(page, 3)
    rate = f"{get_link('nvlink-4-h800').busbw / 1e9:.0f}"
    assert (f"and DeepSeek-V3's report (§3.2.2) gives its NVLink about {rate} GB/s. The EP 64 "
            "dispatch is") in seen
    assert "NCCL's all-to-all reaches" not in seen


def test_finding_13_step_8s_hbm_rate_is_redone_from_its_printed_digits(client):
    """EP07 step 8 said HBM runs "at 2.61 TB/s: 78% of the datasheet's 3.35 TB/s, the share
    BabelStream's copy reaches on an H100 NVL (3,056 of its 3,900 GB/s)", but 3,056 ÷ 3,900 ×
    3.35 = 2.63: the lab rounds the share to 0.78 first. The page prints the rounded share, its
    product, and the quotient it rounds; each redoes from the printed digits."""
    from labs.hardware.gpus import get_gpu

    k = get_gpu("h800").kernels
    seen = _prose(drop_whys(_section(client.get("/episodes/experts").text, 8)))
    m = re.search(r"at ([\d.]+) TB/s: ([\d.]+) × the datasheet's ([\d.]+) TB/s\. \2 is the "
                  r"share BabelStream's copy reaches on an H100 NVL, ([\d,.]+) of its ([\d,]+) "
                  r"GB/s = ([\d.]+), rounded", seen)
    assert m, seen
    rate, share, sheet, copy, of, quotient = (float(g.replace(",", "")) for g in m.groups())
    assert share == k.hbm_efficiency and f"{share * sheet:.2f}" == m[1]
    assert f"{copy / of:.3f}" == m[6] and round(quotient, 2) == share


def test_finding_18_the_crossover_tip_states_the_gradient_bytes(client):
    """The crossover tip (EP06 step 7, EP07 step 11) gave DP's T* = ⅔ × (N−1)/N × rate ÷ busBW
    without saying ⅔ assumes 2-byte gradients, while EP07's rank-map note all-reduces them in
    fp32, which doubles T*. The tip derives T* = b/3 × … from the bytes a parameter b, gives
    EP02's b (the DP lab's) and says fp32's doubles it."""
    from labs.data_parallel.lab import GRAD_BYTES_PER_PARAM

    assert GRAD_BYTES_PER_PARAM / 3 == 2 / 3  # the ⅔ the tip and EP02 print
    for path in ("/episodes/context-parallel", "/episodes/experts"):
        page = client.get(path).text
        tip = next(t for t in _tips(page) if t.startswith("Compute-to-communication"))
        assert "T* = b/3 × (N−1)/N × achieved FLOP/s ÷ busBW" in tip, tip
        assert (f"EP02's bf16 gradients (b = {GRAD_BYTES_PER_PARAM} B) give ⅔; fp32 gradients "
                "(b = 4 B, as EP07 all-reduces them) double T*") in tip
    assert "Gradients are all-reduced in fp32" in _text(client.get("/episodes/experts").text)


def test_finding_22_ep07s_named_tools_and_papers_are_tipped_at_first_use(client):
    """cuBLAS (step 4's note), BabelStream (step 8), GShard and the Switch Transformer (step
    5's question) appeared on EP07 with no line or glossary entry. Each is a glossary term
    now, tipped where EP07 first uses it, with its source on /glossary."""
    from app.glossary_terms import GLOSSARY

    page = client.get("/episodes/experts").text
    glossary = client.get("/glossary").text
    terms = {t.slug: t for t in GLOSSARY}
    for slug, word, step in (("cublas", "cuBLAS", 4), ("babelstream", "BabelStream", 8),
                             ("gshard", "GShard", 5),
                             ("switch-transformer", "Switch Transformer", 5)):
        at = page.index(f'id="term-{slug}"')
        assert page.index(word) > page.rfind(f'id="step-{step - 1}"') and \
            page.rfind('<section class="step" id="step-', 0, at) == \
            page.index(f'<section class="step" id="step-{step}"'), slug
        assert page.index(word) >= at  # the first use is the tipped one
        assert terms[slug].source and f'id="{slug}"' in glossary


def test_finding_23_ep07_step_4s_limit_leads_to_step_5(client):
    """EP07 step 4's limit (a balance loss, DeepSeek-V3's bias) led to step 10, not to step 5's
    capacity. It now names what step 4 leaves open, the hot GPU takes all it is sent, and step
    5's cap as the next fix, leaving the router's training to step 10."""
    page = client.get("/episodes/experts").text
    four = _section(page, 4)
    limit = _text(re.search(r'<p class="limit">(.*?)</p>', four, re.S)[1])
    five = _text(re.search(r"<h2>(.*?)</h2>", _section(page, 5), re.S)[1])
    assert five.startswith("5. Capacity: cap the hot expert")
    assert "Capping what an expert takes is step 5's fix" in limit
    assert limit.index("step 5") < limit.index("step 10")
