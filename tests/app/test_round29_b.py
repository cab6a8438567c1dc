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
