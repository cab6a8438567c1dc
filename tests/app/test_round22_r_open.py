"""Round-22 cold reading R (issue 36), the findings left open by the morning's fixes.

#3: EP10 step 1 ("delayed scaling keeps fewer / as many / more than 16 bytes") was told by
what is on screen before its guess: step 2's intro ("the weight copies the recipe keeps"), its
limit ("every weight copy ... Step 3 drops one of them"), step 3's question ("kept in FP8
alone. How many bytes per parameter are left?") and the Recipe menu's "FP8 parameters, no bf16
copy". The bench's reasons ("the cast also writes the transposed copy", "this recipe keeps
them") and its notes ("FP8 weight copies shard ...") are step 1's `reveals` phrases
(test_answers_hidden)."""

import re

from tests.app.test_zero_routes import visible_text


def _unguessed(html: str) -> str:
    """The lesson's text with every step's why left out: what is on screen before the guesses
    (a limit shows once its own step is guessed, so a later step's limit is on screen while an
    earlier step waits)."""
    html = re.sub(r'<span class="term-tip".*?</span>', "", html, flags=re.S)
    html = re.sub(r'<details class="why".*?</details>', "", html, flags=re.S)
    return visible_text(html)


def test_ep10_step_1s_answer_is_not_in_step_2_and_3s_words_nor_the_recipe_menu(client):
    html = client.get("/episodes/low-precision").text
    shown = _unguessed(html)
    for telling in (
        "weight copies the recipe keeps",
        "every weight copy",
        "drops one of them",
        "in FP8 alone",
        "bytes per parameter are left",
        "no bf16 copy",
        "keep no FP8 copy",  # the bench's readout beside step 1's held bytes
    ):
        assert telling not in shown, telling
    assert "step 3 changes what they are stored in" in shown
    assert "FP8 parameters (TE fp8_model_init)" in shown  # the menu still names the recipe


def _step(html: str, n: int) -> str:
    step = html.split(f'id="step-{n}"')[1].split("</section>")[0]
    return visible_text(re.sub(r'<span class="term-tip".*?</span>', "", step, flags=re.S))


def test_ep11_step_4_gives_the_step_it_rounds_to_and_step_5_reuses_it(client):
    """#6: step 4's star is Daly's interval rounded up to whole steps, and the step (6.23 s)
    was first given in step 5's why: step 4 now derives it before the rounding uses it."""
    from app.routers.failures import facts

    sb = facts()["sync_best"]["api"]
    step, daly, best = sb["step_here_s"], sb["daly_s"], sb["best_s"]
    k = round(best / step)
    assert k == -(-daly // step)  # Daly's rounded up to whole steps
    html = client.get("/episodes/failures").text
    four, five = _step(html, 4), _step(html, 5)
    derived = f"(16,384 GPUs × 400 TFLOP/s, Llama 3's Table 4) = {step:.2f} s"
    used = (f"{daly:.1f} s ÷ {step:.2f} s = {round(daly, 1) / round(step, 2):.2f}, "
            f"so {k} × {step:.2f} s =")  # the printed parts' quotient (round 23 R #12)
    assert derived in four and used in four
    assert four.index(derived) < four.index(used)
    assert f"each {step:.2f} s (step 4)" in five
    assert "6 FLOPs a parameter a token" not in five


def test_ep11_the_half_cycle_at_the_best_interval_waits_with_it(client):
    """#6 (the bench): at the good case's state, async saves at the best interval, "half a
    cycle (6.23 s)" gave the best interval (12.46 s, every second step) that the row above
    holds for step 3 (Young backwards gives the copy)."""
    from app.routers.failures import facts

    state = facts()["async_best"]
    api = state["api"]
    half = (api["interval"] + api["checkpoint"]["block_s"]) / 2
    html = client.get("/episodes/failures", params=state["params"]).text
    row = html.split("Each failure costs (first order)")[1].split("</tr>")[0]
    held = re.search(
        r'half a cycle \(<span class="answer-mask" data-after-guess="([^"]+)"'
        r"[^>]*>([^<]*)</span>\)",
        row,
    )
    assert held and held[1] == "step-3", row
    assert held[2].startswith(f"{half:.3g}"), held[2]
    # At a chosen interval it is the control's own half: on screen at once.
    thirty = client.get("/episodes/failures").text
    assert "half a cycle (15 min)" in visible_text(thirty)


def test_ep12_step_5_derives_the_ideal_eighth(client):
    """#7: "the smaller GEMMs' 9.42 ÷ 10.62" left 9.42 ms (one GPU's layer, 75.37 ms, ÷ 8)
    bare."""
    from app.routers.playground import facts

    n = facts()["seed"]["api"]["panels"]["tp"]["answer"]
    one, tp, compute = 1e3 * n["single_gpu_s"], n["tp"], 1e3 * n["compute_s"]
    five = _step(client.get("/episodes/playground").text, 5)
    assert (
        f"{one:.2f} ÷ {tp} = {one / tp:.2f} ms ideal in {compute:.2f} ms, "
        f"{100 * one / (tp * compute):.1f}%"
    ) in five


def test_your_run_says_which_count_is_fewer(client):
    """#10: "the lab counts ...: 57.9 GFLOP, 11% fewer: the lab's count with causal attention
    halved" read as if the lab's 57.9 were the smaller; it is the log's 51.5."""
    from pathlib import Path

    log = (Path(__file__).parents[1] / "fixtures/runs/megatron_llama3_8b.log").read_text()
    body = client.post("/api/runs/parse", json={"log": log, "gpu": "h100-sxm"}).json()
    note = next(n for n in body["comparison_notes"] if n.startswith("TFLOP/s"))
    flops = body["flops_per_token"]
    apart = 1 - flops["log"] / flops["lab"]
    assert (
        f"{flops['lab'] / 1e9:,.1f} GFLOP. Your log's is {apart:.0%} fewer: the lab's count "
        "with causal attention halved" in note
    ), note
