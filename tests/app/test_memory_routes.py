"""EP01 routes through the app in-process: JSON figures, 422s, page, fragment and embed."""

import re
from html import unescape

import pytest

from app.charts.units import fmt_bytes
from tests.app.disclosure import more_controls
from tests.app.test_parser import api_messages

LLAMA_70B_PARAMS = 70_553_706_496


def test_api_default_is_llama_70b_on_one_h100(client):
    body = client.get("/api/memory").json()
    assert body["params"] == LLAMA_70B_PARAMS
    # CURRICULUM EP01: 16 B/param -> 1.13 TB of state; ~91 GB of activations; ~1.22 TB.
    assert body["state_bytes"] == pytest.approx(1.13e12, abs=0.005e12)
    assert body["breakdown"]["activations"] == pytest.approx(91e9, abs=1e9)
    assert body["total_bytes"] == pytest.approx(1.22e12, abs=0.005e12)
    assert body["fits"] is False
    assert body["gpu_memory_bytes"] == 80_000_000_000
    assert body["min_gpus"] >= 14
    assert sum(body["breakdown"].values()) == pytest.approx(body["total_bytes"], abs=8)


def test_api_zero3_over_32_gpus(client):
    body = client.get("/api/memory", params={"dp": 32, "zero": 3}).json()
    state = sum(body["breakdown"][k] for k in
                ("weights", "gradients", "master_weights", "optimizer_moments"))
    assert state == pytest.approx(35e9, abs=0.5e9)  # CURRICULUM EP03: 35 GB per GPU
    # ZeRO shards state, not activations.
    assert body["breakdown"]["activations"] == pytest.approx(91e9, abs=1e9)


def test_api_custom_7b_int8_fits_the_gaming_card(client):
    body = client.get("/api/memory", params={
        "params": "7e9", "mode": "infer", "recipe": "int8", "gpu": "rtx-4090"}).json()
    assert body["model"] == "custom"
    assert body["params"] == 7_000_000_000
    assert body["breakdown"]["weights"] == pytest.approx(7e9, rel=0.01)
    assert body["breakdown"]["gradients"] == 0
    assert body["fits"] is True


@pytest.mark.parametrize(("params", "field"), [
    ({"model": "gpt-9"}, "model"),
    ({"gpu": "tpu"}, "gpu"),
    ({"tp": 3}, "tp"),
    ({"pp": 7}, "pp"),
    ({"tp": 0}, "tp"),
    ({"dp": -4}, "dp"),
    ({"seq_len": 10**9}, "seq_len"),
    ({"micro_batch": "many"}, "micro_batch"),
    ({"zero": 4}, "zero"),
    ({"ep": 2}, "ep"),
    ({"params": "-1"}, "params"),
    ({"params": "1e20"}, "params"),
    ({"model": "custom"}, "params"),
    ({"mode": "infer", "recipe": "adam16"}, "recipe"),
    ({"mode": "fly"}, "mode"),
])
def test_api_bad_input_is_a_422_naming_the_field(client, params, field):
    messages = api_messages(client, "memory", params)
    assert set(messages) == {field} and all(messages.values())


def test_page_renders_controls_from_the_url(client):
    html = client.get("/episodes/memory", params={"model": "llama-3.1-8b", "dp": 4}).text
    assert re.search(r'<option value="llama-3.1-8b"\s+selected', html)
    assert 'id="input-dp" min="1" max="128" value="4"' in html
    assert 'class="figure" data-target="memory-chart"' in html
    assert 'hx-push-url="true"' in html and 'action="/episodes/memory"' in html


def test_page_with_bad_value_shows_message_by_control_and_keeps_a_chart(client):
    response = client.get("/episodes/memory", params={"tp": 3})
    assert response.status_code == 422
    slot = re.search(r'id="error-tp"[^>]*>([^<]+)<', response.text)
    assert slot and "64 heads" in slot.group(1)
    assert 'data-target="memory-chart"' in response.text


def test_fragment_is_the_diagram_with_error_slots_cleared(client):
    response = client.get("/episodes/memory", params={"dp": 2}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "HX-Request" in response.headers["vary"]
    # The diagram section comes first: nothing of the page frame before it.
    assert response.text.lstrip().startswith('<section id="memory-ledger"')
    assert "<html" not in response.text
    assert 'id="error-tp" hx-swap-oob="true"' in response.text


def test_fragment_with_bad_value_swaps_only_the_errors(client):
    response = client.get("/episodes/memory", params={"pp": 7}, headers={"HX-Request": "true"})
    assert response.status_code == 422
    assert response.headers["hx-reswap"] == "none"
    assert response.headers["hx-push-url"] == "false"
    assert "memory-ledger" not in response.text
    assert re.search(r'id="error-pp" hx-swap-oob="true"[^>]*>[^<]*80 layers', response.text)


def test_history_restore_gets_the_full_page(client):
    response = client.get("/episodes/memory", headers={
        "HX-Request": "true", "HX-History-Restore-Request": "true"})
    assert "<html" in response.text


def test_case_buttons_swap_the_whole_bench(client):
    response = client.get("/episodes/memory", params={"mode": "infer"},
                          headers={"HX-Request": "true", "HX-Target": "bench"})
    assert response.text.lstrip().startswith('<div id="bench"')
    assert 'id="memory-form"' in response.text


def test_embed_is_the_diagram_alone(client):
    html = client.get("/embed/memory", params={"model": "mixtral-8x7b"}).text
    assert 'data-target="memory-chart"' in html
    assert 'id="memory-form"' not in html
    assert "data-copy-target" not in html  # no embed code inside an embed
    assert "Mixtral" in html


def test_embed_code_points_at_the_current_state(client):
    html = client.get("/episodes/memory", params={"dp": 8}).text
    assert 'src="http://testserver/embed/memory?dp=8"' in html
    assert 'src="http://testserver/embed/memory/ledger?dp=8"' in html


def test_presets_list_ids_and_computed_counts(client):
    models = {m["id"]: m for m in client.get("/api/models").json()}
    assert models["llama-3.1-70b"]["params"] == LLAMA_70B_PARAMS
    assert models["mixtral-8x7b"]["active_params"] < models["mixtral-8x7b"]["params"]
    gpus = {g["id"]: g for g in client.get("/api/gpus").json()}
    assert gpus["h100-sxm"]["memory_bytes"] == 80e9
    assert {"a100-80gb", "h100-sxm", "h200", "b200", "mi300x", "rtx-4090"} <= set(gpus)


def test_drill_grades_hint_and_reveal(client):
    state = client.get("/api/memory", params={"model": "llama-3.1-8b", "recipe": "adam18",
                                              "dp": 4, "zero": 3}).json()["breakdown"]
    state = sum(state[k] for k in ("weights", "gradients", "master_weights", "optimizer_moments"))
    right = client.get("/api/drills/memory-state-8b", params={"answer": state / 1e9}).json()
    assert right["status"] == "right"
    wrong = client.get("/api/drills/memory-state-8b", params={"answer": "16", "attempt": 1}).json()
    assert wrong["status"] == "hint" and wrong["answer"] is None
    second = client.get("/api/drills/memory-state-8b", params={"answer": "16", "attempt": 2}).json()
    assert second["status"] == "revealed"
    assert second["answer"] == pytest.approx(state / 1e9)


def test_fragment_refreshes_the_degree_options_of_the_new_model(client):
    """Llama 3.1 405B has 126 layers: the PP select must offer its divisors, not 80's."""
    html = client.get("/episodes/memory", params={"model": "llama-3.1-405b"},
                      headers={"HX-Request": "true"}).text
    select = re.search(r'<label id="control-pp" hx-swap-oob="true">.*?</select>', html, re.S)
    assert select, "PP control is not swapped out of band"
    offered = [int(v) for v in re.findall(r'option value="(\d+)"', select.group(0))]
    assert offered == [d for d in range(1, 127) if 126 % d == 0]


def test_api_takes_microbatches_and_schedule_for_what_is_in_flight(client):
    # Llama 3.1 70B at TP8 PP4 with Megatron's estimate: m = 2 < p holds min(m, p) = 2 on the
    # first stage, as Megatron's theoretical memory does (5.38 GB of activations there,
    # tests/labs/test_ledger_fidelity.py), not p = 4 (the pipeline filled, the default).
    base = {"tp": 8, "pp": 4, "dp": 4, "activation_model": "megatron"}
    filled = client.get("/api/memory", params=base).json()
    two = client.get("/api/memory", params={**base, "microbatches": 2}).json()
    assert filled["microbatches"] == 4 and two["microbatches"] == 2
    assert filled["stage_in_flight"] == [4, 3, 2, 1]
    assert two["stage_in_flight"] == [2, 2, 2, 1]
    assert two["breakdown"]["activations"] * 2 == filled["breakdown"]["activations"]
    assert two["breakdown"]["activations"] + two["breakdown"]["embedding_and_logits"] == \
        pytest.approx(5_377_105_920, abs=1)
    # Interleaved 1F1B holds Megatron's 1 + (p-1)/(p·v) factor of p micro-batches on rank 0.
    inter = client.get("/api/memory", params={**base, "microbatches": 8,
                                              "schedule": "interleaved-1f1b",
                                              "virtual": 2}).json()
    assert inter["stage_in_flight"][0] == pytest.approx(4 * (1 + 3 / 8))
    assert inter["schedule"] == "interleaved-1f1b" and inter["virtual"] == 2
    bad = api_messages(client, "memory", {**base, "schedule": "dualpipe-v", "microbatches": 2})
    assert set(bad) == {"microbatches"}, bad


def test_api_no_recomputation_with_flash_attention_stores_no_scores(client):
    params = {"seq_len": 16384}
    none = client.get("/api/memory", params={**params, "recompute": "none"}).json()
    flash = client.get("/api/memory", params={**params, "recompute": "flash"}).json()
    selective = client.get("/api/memory", params={**params, "recompute": "selective"}).json()
    assert flash["breakdown"]["activations"] == selective["breakdown"]["activations"]
    # The s² term, for Llama (no dropout: the softmax output alone): 2·a·s²·b = 2·64·16384² B
    # a layer, x 80 layers; GPT-3 (dropout 0.1) keeps Korthikanti's 5·a·s²·b, x 96 layers.
    assert none["breakdown"]["activations"] - flash["breakdown"]["activations"] == \
        pytest.approx(80 * 2 * 64 * 16384 ** 2, rel=1e-9)
    gpt = {"model": "gpt-3-175b", "seq_len": 2048}
    gpt_none, gpt_flash = (client.get("/api/memory", params={**gpt, "recompute": r}).json()
                           for r in ("none", "flash"))
    assert gpt_none["breakdown"]["activations"] - gpt_flash["breakdown"]["activations"] == \
        pytest.approx(96 * 5 * 96 * 2048 ** 2, rel=1e-9)
    page = client.get("/episodes/memory", params={"recompute": "flash"}).text
    assert 'value="flash" selected' in page and "none, with FlashAttention" in page
    assert 'id="input-microbatches"' in page and 'id="input-schedule"' in page


def test_step_3_teaches_fused_attention_and_quotes_16k_figures_at_16k(client):
    """Issue 36: step 3 said switching recomputation off brings the attention scores back,
    where fused attention (what current stacks run) stores no s x s scores; and its 16k
    sentence quoted the 4k full-recomputation figure (5.37 GB for 21.5 GB). The scores are
    now what the unfused kernels of 2021-22 kept, and every 16k figure is a 16k state. The
    unfused figure is Llama's softmax output alone (2·a·s²·b: no dropout, round-12 reading)."""
    from app.routers.memory import facts

    f = facts()
    for key in ("l8_flash_16k", "l8_full_16k", "l8_none_16k"):
        assert f[key]["params"] == {"model": "llama-3.1-8b", "seq_len": 16384,
                                    "recompute": key.split("_")[1]}
    act = {k: f[k]["api"]["breakdown"]["activations"]
           for k in ("l8_flash_16k", "l8_full_16k", "l8_none_16k")}
    s, h, a, layers = 16384, 4096, 32, 32
    assert act["l8_flash_16k"] == 34 * s * h * layers  # linear in s: no s x s term
    assert act["l8_none_16k"] == layers * (34 * s * h + 2 * a * s * s)
    html = re.sub(r"\s+", " ", client.get("/episodes/memory").text)
    step = html[html.index('id="step-3"'):html.index('id="step-4"')]
    assert "unfused attention kernels of 2021–22" in step and "never stores the scores" in step
    text = re.sub(r"<[^>]+>", "", step)
    assert f"brings the 8B at 16,384 tokens down to {fmt_bytes(act['l8_full_16k'])}" in text
    assert f"the 8B then saves {fmt_bytes(act['l8_none_16k'])} at 16,384 tokens" in text


def test_step_3_counts_llamas_own_layer_once_and_ep06_and_ep08_reuse_it(client):
    """Round-12 cold readings: EP01 said Llama's own layer keeps about 33.5 bytes per token per
    unit of h (1.5% under GPT's 34), EP06 and EP08 Megatron-LM's 32 (6.2%). One count now, from
    labs.model.activations, derived term by term in EP01 step 3 and quoted by the others."""
    from app.routers.memory import facts
    from labs.model.activations import own_layer_coefficient
    from labs.model.presets import get_model

    own = facts()["own_layer"]
    assert own["coefficient"] == own_layer_coefficient(get_model("llama-3.1-70b")) == 33.5
    assert own_layer_coefficient(get_model("gpt-3-175b")) == 34  # Korthikanti's GPT layer
    # QKV, MLP and SwiGLU are glossary terms (round 19): their tips are not the prose
    memory = _text(re.sub(r'<span class="term-tip".*?</span>', "",
                          client.get("/episodes/memory").text, flags=re.S))
    assert ("4 (the two norms' inputs) + 2 (the QKV input) + 2 + 0.25 + 0.25 (Q, and K and V "
            "for 8 of its 64 heads) + 2 (the output projection's input) + 2 (the MLP's input) "
            "+ 21 (SwiGLU") in memory
    assert "'s three tensors 28,672 wide) = 33.5, with no masks" in memory
    assert "about 1.5% high for the 70B" in memory
    cp = _text(client.get("/episodes/context-parallel").text)
    assert "at 33.5 bytes per token per unit of hidden size" in cp
    assert "errs 1.5% high" in cp and "Megatron-LM estimate" not in cp
    recipe = _text(client.get("/episodes/recipe-3d").text)
    assert "counted for Llama's own (EP01 step 3) it is 33.5·s·h" in recipe
    assert "34 + 2 × 64 × 8,192 ÷ 8,192 = 162·s·h" in recipe
    assert "Megatron-LM's own estimate" not in recipe


def test_later_controls_sit_behind_more_controls_and_stay_in_the_form(client):
    """Issue 36, item 5: EP01 opens with what it teaches; the parallel degrees, ZeRO and the
    schedule sit in a closed "more controls" disclosure, inside the form (so in the URL), and
    open when the state sets any of them."""
    def more(query: str) -> str:
        return more_controls(client, "/episodes/memory", "memory-form", query)

    closed = more("")
    assert closed.startswith(' id="more-controls">')
    for name in ("tp", "pp", "cp", "ep", "dp", "zero", "schedule", "virtual", "microbatches"):
        assert f'name="{name}"' in closed, name
    assert 'name="seq_len"' not in closed and 'name="model"' not in closed
    for query in ("?tp=8", "?dp=8&zero=3", "?schedule=gpipe&pp=4", "?offload=true"):
        assert more(query).startswith(' id="more-controls" open>'), query


def test_ep01_cold_reading_fixes_derive_from_the_engine(client):
    """Issue 36's cold reading of EP01: step 4's KV cache is derived from Llama 3.1 70B's own
    shape (GQA: 8 KV heads of 128 in 80 layers), step 1 names Adam's second moment as the mean
    of the squared gradient (not a variance), and step 5 says ZeRO-3 over 32 GPUs still does
    not fit, with the engine's bill."""
    from app.routers.memory import facts
    from labs.model.presets import get_model

    m = get_model("llama-3.1-70b")
    per_token = 2 * m.layers * m.kv_heads * m.head_dim * 2
    f = facts()
    serve = f["l70_serve"]
    assert serve["api"]["breakdown"]["kv_cache"] == pytest.approx(
        per_token * serve["params"]["micro_batch"] * serve["params"]["seq_len"], rel=1e-9)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", client.get("/episodes/memory").text))
    assert (f"2 × {m.layers} × {m.kv_heads} × {m.head_dim} × 2 B = {per_token:,} B" in text)
    assert "mean and variance" not in text and "of its square" in text
    zero3 = f["l70_zero3"]["api"]
    assert zero3["total_bytes"] > zero3["gpu_memory_bytes"]
    assert f"it holds {fmt_bytes(zero3['total_bytes'])} , still over" in text


def test_steps_1_2_5_ask_what_the_opening_bench_does_not_print(client):
    """Round-2 cold reading (issue 36): the page opens at 70B on one H100, so step 1 asks the
    8B's bill, step 2 the 405B's state and step 5 the 405B's 18-byte count; none of these is
    on the page outside the closed whys before the student guesses."""
    from app.routers.memory import facts
    f = facts()
    l8, l405, l405_18 = f["l8"]["api"], f["l405"]["api"], f["l405_18"]["api"]
    assert l8["total_bytes"] == pytest.approx(148.9e9, rel=1e-3)  # 16.06 GB x 9.3
    assert l8["total_bytes"] / l8["breakdown"]["weights"] == pytest.approx(9.27, abs=0.01)
    assert l405["state_bytes"] == pytest.approx(16 * l405["params"], rel=1e-12)  # 6.49 TB
    assert l405_18["state_bytes"] == pytest.approx(18 * l405["params"], rel=1e-12)  # 7.31 TB
    assert l405_18["min_gpus"] == 92 == -(-l405_18["state_bytes"] // 80e9)
    html = client.get("/episodes/memory").text
    outside = re.sub(r'<details class="why".*?</details>', " ", html, flags=re.S)
    outside = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", outside))
    for answer in (fmt_bytes(l8["total_bytes"]), fmt_bytes(l405["state_bytes"]),
                   fmt_bytes(l405_18["state_bytes"]), "at least 92"):
        assert answer not in outside, answer


def test_the_h200_drill_asks_what_no_readout_prints(client):
    """EP01's step-5 drill asks what 405B holds a GPU over 64 H200s with ZeRO-3 and full
    recomputation, which the bench does not print even at the drill's own state: the fewest
    GPUs it asked before (47) was the readout's 'Fewest GPUs' one GPU select away, and the
    state's share (101.5 GB) was step 2's 6.49 TB over 64 (round-17 cold reading of EP01,
    finding 6). Its answer is that share, 2·s·h a layer and the logits, the lab's bill."""
    from app.lesson_drills import LESSON_DRILLS
    from tests.app.test_drill_kinds import number_shown

    drill = next(d for d in LESSON_DRILLS["memory"] if d.id == "memory-predict-405b-h200")
    bill = client.get("/api/memory", params=drill.see).json()
    acts = 2 * 4096 * 16384 * 126
    assert bill["breakdown"]["activations"] == pytest.approx(acts, rel=1e-9)
    assert drill.answer() == pytest.approx(
        (16 * 405.85e9 / 64 + acts + bill["breakdown"]["embedding_and_logits"]) / 1e9,
        rel=1e-3)
    html = client.get("/episodes/memory", params=drill.see).text
    assert number_shown(drill.answer(), html) is None
    assert 'data-after-guess="predict-memory-1 predict-memory-2 predict-memory-5 ' \
           'drill-memory-predict-405b-h200"' in html


def test_a_moe_models_active_count_reads_as_the_prose_writes_it(client):
    """One count, one format: the model select said '38B active' beside step 6's 37.6B."""
    html = client.get("/episodes/memory").text
    assert "DeepSeek-V3 (671B MoE, 37.6B active)" in html and "38B active" not in html
    assert ") (" not in re.sub(r"<[^>]+>", "", html.split('name="model"')[1].split("</select>")[0])
    assert re.search(r"activates\s*(<[^>]+>\s*)*37\.6B", html)
    assert "the paper rounds to 37B" in _text(html)


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", html).replace("&#39;", "'").split())


def test_step_4_states_the_workspace_sum_for_one_prefill_chunk(client):
    """Round-5 cold reading, EP01 item 1: step 4's workspace was a hidden formula, and its 70B
    link ran all 32 x 8,192 cached tokens through one forward (47.2 GB). The why now states
    tokens x (4h + 2 ffn) x 2 B with the engine's terms, and the link's bar is one 8,192-token
    prefill chunk: 8,192 x (32,768 + 57,344) x 2 B = 1.48 GB."""
    text = _text(client.get("/episodes/memory").text)
    assert "tokens × (4h + 2·ffn) × 2 B" in text
    assert "4,096 × (4 × 4,096 + 2 × 11,008) × 2 B = 315 MB" in text
    assert "8,192 × (4 × 8,192 + 2 × 28,672) × 2 B = 1.48 GB" in text
    api = client.get("/api/memory", params={"model": "llama-3.1-70b", "mode": "infer",
                                            "recipe": "bf16", "seq_len": 8192,
                                            "micro_batch": 32}).json()
    assert api["breakdown"]["workspace"] == 1_476_395_008


def test_step_3_asks_the_16k_figure_and_step_6_lists_the_fp8_bytes(client):
    """Round-5 cold reading, EP01 items 2 and 3: step 3 asked '4x?' under a formula linear in
    s; it now asks the GB. Round-12: 365 GB (the 70B at 16k) was 4 x the opening bench's
    91.3 GB; it asks the 8B at 16k (34 x 16,384 x 4,096 x 32 = 73.0 GB), which no figure on the
    page before the guess scales to.
    Step 6's FP8 state lists its 15 bytes and names the bf16 copy as the lab's assumption."""
    html = client.get("/episodes/memory").text
    step3 = html.split('id="step-3"')[1].split('id="step-4"')[0]
    assert ("Llama 3.1 8B has h = 4,096 and 32 layers. How many GB of activations does one "
            "16,384-token sequence save") in _text(step3)
    assert 'data-answer="73.0 GB"' in step3
    ask = _text(html.split('id="step-3"')[0] + step3.split("Commit my guess")[0])
    assert "73.0" not in ask and "365" not in _text(step3)
    step6 = _text(html.split('id="step-6"')[1])
    assert ("671B × 15 B = 10.1 TB: 2 B bf16 weights + 1 B FP8 weights, 128×128 blocks + 4 B "
            "fp32 gradients + 4 B fp32 master") in step6
    assert "bf16 copy of the weights beside the FP8 one, which is our assumption" in step6


def test_the_decide_drills_labels_use_no_term_the_page_leaves_undefined(client):
    """Round-5 reading, EP01 item 5: a choice read 'with sequence parallelism', a term EP01
    never defines (a label takes no inline definition). Every glossary term in EP01's choice
    labels is one the page defines."""
    from app.glossary import GLOSSARY
    from app.lesson_drills import LESSON_DRILLS

    html = client.get("/episodes/memory").text
    defined = set(re.findall(r'data-term="([a-z0-9-]+)"', html))
    labels = " ".join(label for d in LESSON_DRILLS["memory"] if d.kind == "decide"
                      for _, label in d.choices)
    used = {t.slug for t in GLOSSARY if t.regex.search(labels)}
    assert used and used <= defined, used - defined


def test_round_5_item_5_ep01s_menus_mark_what_the_lesson_does_not_teach(client):
    """EP01's round-5 cold reading, item 5: its Recipe menu offered four recipes EP01 does not
    teach, and its Recomputation menu two policies no lesson teaches, among the ones it does.
    Each menu now groups what EP01 teaches first; the other recipes are grouped under EP10,
    whose links set each of them, with torchtitan's op policy, which EP10's measured run keeps
    (its links set it, since the round-6 reading of EP10, item 7); its every-2nd-layer policy
    is marked as taught by no lesson (no lesson's link sets it). Each option EP01 does not
    teach carries its record's phrase as a title. Dropout, which step 3 uses, is defined."""
    from app.episodes import BY_LAB, EPISODES
    from app.routers.memory import (
        EP01_RECIPES,
        EP01_RECOMPUTE,
        EP10_RECOMPUTE,
        UNTAUGHT_RECOMPUTE,
    )

    page = client.get(BY_LAB["memory"].path).text
    groups: dict[str, set[str]] = {}  # both menus have a "This lesson" group
    for name, body in re.findall(r'<optgroup label="([^"]+)"[^>]*>(.*?)</optgroup>', page,
                                 re.S):
        groups.setdefault(name, set()).update(re.findall(r'<option value="([\w-]+)"', body))
    later = groups["Taught in EP10, Low precision and fine-tuning"]
    assert groups["This lesson"] == set(EP01_RECIPES) | set(EP01_RECOMPUTE)
    untaught = groups["torchtitan&#39;s policy (no lesson teaches it)"]
    assert set(later) == {"adam12", "fp8-delayed", "fp8-params", "mxfp8", *EP10_RECOMPUTE}
    assert set(untaught) == set(UNTAUGHT_RECOMPUTE) == {"every-2nd"}
    assert set(re.findall(r"recipe=([\w-]+)", page)) <= set(EP01_RECIPES)
    assert set(re.findall(r"recompute=([\w-]+)", page)) <= set(EP01_RECOMPUTE)
    ep10 = client.get(BY_LAB["precision"].path).text
    assert set(later) <= set(re.findall(r"(?:recipe|recompute)=([\w-]+)", ep10))
    for episode in EPISODES:
        links = re.findall(r"recompute=([\w-]+)", client.get(episode.path).text)
        assert not set(untaught) & set(links), episode.slug
    assert 'title="full recomputation of every 2nd layer"' in page
    assert 'data-term="dropout"' in page


def test_round_6_item_1_the_cut_decide_says_pp_divides_the_state_too():
    """Round-6 cold reading of EP01, item 1: memory-decide-cut's solution said 'only a cut of
    the weights shrinks all of the state at once' and every wrong option's hint asked which
    choice 'divides all four kinds of state and the activations', which PP over 8 GPUs does
    too. Each option now says what it divides, with the engine's own figures: PP8 divides the
    state (its first stage's layers and the embedding) but holds p micro-batches of its
    layers' activations; TP8 divides the state and, with the sequence split, the activations;
    ZeRO-1 only the 12 bytes of optimizer state; recomputation only the activations."""
    from app.labkit.drills import check_drill, lab_value
    from app.lesson_drills.memory import _rest, _state
    from app.lesson_drills.pipeline import DRILLS  # EP05's check since round 12
    from app.lesson_drills.units import gb

    drill = next(d for d in DRILLS if d.id == "memory-decide-cut")
    judged = {o.key: o for o in drill.judge()}
    assert [k for k, o in judged.items() if o.right] == ["tp8"]
    pp = lab_value("memory", {"pp": 8, "microbatches": 8}, lambda a: a)
    base = lab_value("memory", {}, lambda a: a)
    assert _state(pp) < _state(base) / 6  # PP divides the state too
    heaviest = pp["heaviest_stage"]
    assert pp["stage_in_flight"][heaviest] == 8
    why = judged["pp8"].why
    assert "PP divides the state too" in why and gb(_state(pp)) in why and gb(_rest(pp)) in why
    assert f"keeps {pp['stage_in_flight'][heaviest]:.0f} micro-batches" in why
    zero1 = lab_value("memory", {"dp": 8, "zero": 1}, lambda a: a)
    assert _state(zero1) == pytest.approx(4 * zero1["params"] + 12 * zero1["params"] / 8,
                                          rel=1e-3)
    assert gb(_state(zero1)) in judged["zero1"].why
    full = lab_value("memory", {"recompute": "full"}, lambda a: a)
    assert gb(_state(full)) in judged["full"].why and _state(full) == _state(base)
    solution = drill.solution()
    assert "only a cut of the weights" not in solution and "PP's first stage holds p" in solution
    told = check_drill(drill, "pp8", attempt=1, hide_answers=True)["message"]
    assert "divides all four kinds" not in told and told == "Not that one. " + why


def _step(page: str, n: int) -> str:
    """Step n's section of a lesson page, its tags stripped."""
    section = re.search(rf'<section class="step" id="step-{n}".*?</section>', page, re.S)[0]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", section)).replace("&#39;", "'")


def test_round_12_ep01s_decide_is_made_from_ep01_alone(client):
    """Round-12 cold reading of EP01, finding 7: EP01's decide (70B: ZeRO-1, TP8 with the
    sequence split, full recomputation or PP8?) turned on TP's sequence split and PP's
    in-flight micro-batches, which EP04-EP05 teach; the old drill is EP05's check, at its old
    URL. Issue 36: its first replacement's right answer was "serve it in int8 instead", which
    abandons training and teaches nothing of the ledger. EP01's decide now asks which of four
    training changes cuts the 8B's bill the most: every option a training state, exactly one
    right (the engine's largest saving, clear of the next by more than 1 GB), and each
    option's why quotes its own saving with the working from EP01's formulas (2 B a
    parameter, 34·s·h against 2·s·h a layer, the tokens), which agree with the engine."""
    from app.episodes import BY_LAB
    from app.labkit import VIEWS
    from app.labkit.drills import check_drill, lab_value
    from app.lesson_drills.memory import CUT_BASE, CUT_STATES
    from app.lesson_drills.units import gb
    from labs.core.limits import TRAIN_RECIPES
    from labs.model.presets import get_model

    ids = {name: [d.id for d in VIEWS[name].drills] for name in ("memory", "pipeline")}
    assert "memory-decide-fit" in ids["memory"] and "memory-decide-cut" not in ids["memory"]
    assert "memory-decide-cut" in ids["pipeline"]
    drill = next(d for d in VIEWS["memory"].drills if d.id == "memory-decide-fit")
    judged = {o.key: o for o in drill.judge()}
    assert set(judged) == set(CUT_STATES) and len(judged) == 4
    for state in CUT_STATES.values():  # a training change, not serving it instead
        assert state.get("mode", "train") == "train" and state["recipe"] in TRAIN_RECIPES
    answer = {key: lab_value("memory", s, lambda a: a) for key, s in CUT_STATES.items()}
    base = lab_value("memory", CUT_BASE, lambda a: a)
    saved = {key: base["total_bytes"] - a["total_bytes"] for key, a in answer.items()}
    ranked = sorted(saved, key=saved.__getitem__, reverse=True)
    assert [k for k, o in judged.items() if o.right] == ranked[:1] == ["full"]
    assert saved[ranked[0]] - saved[ranked[1]] > 1e9  # clear of the lab's own error
    for key, option in judged.items():  # each why quotes its own saving, from the engine
        told = (f"{gb(saved[key])} less", f"saves {gb(saved[key])}")
        assert any(t in option.why for t in told), key
    # ... and the working each why shows gives that saving: EP01's formulas, the engine's.
    model, s = get_model(CUT_BASE["model"]), CUT_BASE["seq_len"]
    h, layers = model.hidden, model.layers
    assert saved["adam16"] == pytest.approx(2 * base["params"])
    assert f"2 B × {base['params'] / 1e9:.2f}B = " in judged["adam16"].why
    assert saved["full"] == pytest.approx(32 * s * h * layers)
    assert f"32 × {s:,} × {h:,} × {layers} layers = " in judged["full"].why
    assert saved["flash"] == 0 and base["breakdown"]["activations"] == 34 * s * h * layers
    assert f"34 × {s:,} × {h:,} × {layers} layers = " in judged["flash"].why
    half = answer["half"]["breakdown"]
    assert saved["half"] == pytest.approx(base["breakdown"]["activations"] / 2
                                          + base["breakdown"]["embedding_and_logits"]
                                          - half["embedding_and_logits"])
    assert not any(a["fits"] for a in answer.values())  # no change makes it fit: it says so
    assert f"{gb(18 * base['params'])} of state is over 80 GB" in drill.solution()
    ep01, ep05 = (client.get(BY_LAB[name].path).text for name in ("memory", "pipeline"))
    assert 'id="drill-memory-decide-fit"' in ep01 and "drill-memory-decide-cut" not in ep01
    assert 'id="drill-memory-decide-cut"' in ep05
    old = client.get("/api/drills/memory-decide-cut", params={"answer": "tp8"})
    assert old.status_code == 200 and old.json()["status"] == "right"
    url = client.get("/api/drills/memory-decide-fit", params={"answer": "full"})
    assert url.status_code == 200 and url.json()["status"] == "right"
    assert check_drill(drill, "adam16", attempt=1, hide_answers=True)["status"] == "hint"


def test_round_12_step_1_asks_what_step_1_lets_a_student_reason(client):
    """Round-12 cold reading of EP01, finding 8: step 1 asked the 8B's bill as a number of
    times its weights (9.3x), which needs step 2's 16 bytes and step 3's activations, and its
    why quoted 149 GB with no working. It asks the order of magnitude now (a choice, the right
    one the engine's ratio rounded), and the why adds the bill up from steps 2 and 3."""
    from app.episodes import BY_LAB

    page = client.get(BY_LAB["memory"].path).text
    form = re.search(r'<form class="predict-form" data-predict="memory-1"[^>]*>', page)[0]
    assert 'data-right="right"' in form
    api = client.get("/api/memory", params={"model": "llama-3.1-8b"}).json()
    ratio = api["total_bytes"] / api["breakdown"]["weights"]
    step = _step(page, 1)
    assert f"About {ratio:.0f}×" in step
    bill = (fmt_bytes(api["state_bytes"]), fmt_bytes(api["breakdown"]["activations"]),
            fmt_bytes(api["breakdown"]["embedding_and_logits"]), fmt_bytes(api["total_bytes"]))
    assert all(figure in step for figure in bill), bill
    assert "128,256 vocabulary entries" in step
    assert f"{ratio:.1f} times its weights" in step


def test_round_13_step_1s_why_leans_on_no_later_step(client):
    """Round-13 cold reading of EP01-EP05, finding 5: step 1's why derived 9.3x from 34·s·h
    (step 3) and 16 bytes (step 2), and called the logits' 2.17 GB "with their neighbours".
    It gives the four state parts' bytes in one line, the activations as step 3's figure, and
    names what sits beside the logits; each figure the engine's."""
    from app.episodes import BY_LAB

    page = client.get(BY_LAB["memory"].path).text
    api = client.get("/api/memory", params={"model": "llama-3.1-8b"}).json()
    step = _step(page, 1)
    assert "2 + 2 + 4 + 8 = 16 bytes" in step
    assert f"activations (step 3 derives them): {fmt_bytes(api['breakdown']['activations'])}" \
        in step
    assert "34·s·h" not in step and "neighbours" not in step
    logits = 4 * 4096 * 128_256
    assert (f"= {fmt_bytes(logits)}; with the final norm's input and output and the token ids, "
            f"{fmt_bytes(api['breakdown']['embedding_and_logits'])}") in step


def test_round_13_step_5_says_plainly_why_it_rounds_up(client):
    """Round-13 cold reading, finding 8: "91.3, rounded up: at least 92 H100s. A GPU short of
    a whole one cannot hold the rest." could not be parsed. It now says what 91 GPUs would
    leave over; each figure the engine's."""
    from app.episodes import BY_LAB

    page = client.get(BY_LAB["memory"].path).text
    api = client.get("/api/memory", params={"model": "llama-3.1-405b",
                                            "recipe": "adam18"}).json()
    worth = api["state_bytes"] / api["gpu_memory_bytes"]
    n = api["min_gpus"]
    step = _step(page, 5)
    assert "short of a whole one" not in step
    assert (f"= {worth:.1f} GPUs' worth. {n - 1} GPUs would leave {worth - n + 1:.1f} of a "
            f"GPU's share with nowhere to go, so at least {n} H100s") in step


def test_round_12_the_driver_memory_is_compared_each_way_round(client):
    """Round-12 cold reading of EP01, finding 9: 81,559 MiB = 85.52 GB is 6.9% more than the
    lab's 80 GB, and 80 GB is 6.5% less than it; the page said 'about 6%' both times."""
    from app.episodes import BY_LAB

    page = client.get(BY_LAB["memory"].path).text
    driver = int(re.search(r"([\d,]+) MiB", _step(page, 1))[1].replace(",", "")) * 2**20
    assert f"{100 * (1 - 80e9 / driver):.1f}% less" == "6.5% less" in _step(page, 1)
    # Round 17 (EP01 finding 7): step 5 quotes step 1's figure, not the other way round.
    assert "6.5% under what the driver reports" in _step(page, 5)
    assert "about 6%" not in page


def test_round_12_step_2_states_the_logits_formula_and_the_vocabulary(client):
    """Round-12 cold reading of EP01, finding 10: step 2 quoted the 70B's 2.27 GB of logits
    with no formula, and the vocabulary (128,256) was on no step. The step works it now: fp32
    logits 4·s·v, the final norm's 4·s·h and the token ids (and any embedding mask the engine
    keeps), summing to the engine's embedding_and_logits."""
    from app.episodes import BY_LAB
    from app.routers.memory import facts
    from labs.model.presets import get_model

    page = client.get(BY_LAB["memory"].path).text
    step = _step(page, 2)
    api = client.get("/api/memory").json()
    model = get_model("llama-3.1-70b")
    logits, norm = 4 * 4096 * model.vocab, 4 * 4096 * model.hidden
    assert f"4 × 4,096 × {model.vocab:,} = {fmt_bytes(logits)}" in step
    assert f"4 × 4,096 × {model.hidden:,} = {fmt_bytes(norm)}" in step
    assert f"in all {fmt_bytes(api['breakdown']['embedding_and_logits'])}" in step
    terms = facts()["logits"]["l70"]["terms"]
    assert terms["logits"] == logits and terms["norm"] == norm
    assert sum(terms.values()) == api["breakdown"]["embedding_and_logits"]


def test_degree_selects_are_each_states_own(monkeypatch):
    """EP01's degree selects (EP10's too) are kept by every input the partial reads
    (app/routers/memory_state.py degree_selects, issue 31): a state asked after another that differs
    in one of them, its options, a value, an error slot or out of band, gets the partial as it
    draws whole for that state, and the kept HTML stays within its bound."""
    from collections import OrderedDict

    from app import templating
    from app.routers.memory_state import degree_selects

    monkeypatch.setattr(templating, "_KEPT", OrderedDict())
    whole = templating.templates.get_template("partials/_memory_degrees.html")
    options = {"tp": [1, 2, 4, 8], "pp": [1, 2, 4], "cp": [1, 2, 4, 8, 16, 32], "ep": [1]}
    query = {"tp": 2, "pp": 1, "cp": 1, "ep": 1, "dp": 8}
    states = [
        ({"degree_options": options, "query": query, "errors": {}}, False),
        ({"degree_options": {**options, "pp": [1, 2, 4, 5]}, "query": query, "errors": {}},
         False),
        ({"degree_options": options, "query": {**query, "tp": 4}, "errors": {}}, False),
        ({"degree_options": options, "query": query, "errors": {"tp": "TP must divide"}},
         False),
        ({"degree_options": options, "query": query, "errors": {}}, True),
        ({"degree_options": options, "query": query, "errors": {"dp": "DP is too large"}},
         False),
    ]
    drawn = [str(degree_selects(ctx, oob)) for ctx, oob in states]
    for (ctx, oob), html in zip(states, drawn, strict=True):
        assert html == whole.render(**ctx, oob=oob)
    assert len(set(drawn)) == len(drawn) - 1  # another control's error changes nothing
    assert 'id="control-pp"' in drawn[0] and "TP must divide" in drawn[3]
    for tp in range(templating.KEPT_PARTIALS + 10):
        degree_selects({"degree_options": options, "query": {**query, "tp": tp}, "errors": {}})
    assert len(templating._KEPT) == templating.KEPT_PARTIALS


def test_round_14_step_2s_try_link_draws_its_bill_once_step_2_is_guessed(client):
    """Step 2's try link (the 405B in the 16-byte recipe): the bill and its chart wait for
    steps 1 and 2 alone, the fewest GPUs for step 5 too (its question is the 18-byte recipe;
    round-14 cold reading of EP01-EP03, finding 5: step 5's key drew step 2's own move as one
    grey bar); at step 5's state the bill waits for step 5 as well."""
    import json

    def keys(query: str) -> tuple[set[str], set[str]]:
        html = client.get(f"/episodes/memory?{query}").text
        figure = json.loads(re.search(r'data-target="memory-chart"[^>]*>(.*?)</script>',
                                      html, re.S)[1])
        owners = {k for g in figure["layout"]["meta"]["owners"] for k in g["step"].split()}
        gpus = re.search(r'data-testid="min-gpus"><span class="answer-mask" '
                         r'data-after-guess="([^"]+)"', html)[1]
        return owners, set(gpus.split())

    owners, gpus = keys("model=llama-3.1-405b")
    assert owners == {"predict-memory-1", "predict-memory-2"}, owners
    assert gpus == owners | {"predict-memory-5"}, gpus
    owners, gpus = keys("model=llama-3.1-405b&recipe=adam18")
    assert "predict-memory-5" in owners and gpus == owners, (owners, gpus)


def test_round_14_step_6_derives_the_fp8_recipes_activations(client):
    """Round-14 cold reading of EP01, finding 8: step 6's FP8 link tabled DeepSeek-V3's
    activations at 48.7 GB where step 3's 34·s·h·L gives 60.9 GB (the 16-byte link), the 0.8
    unsaid. The why derives it: 14 of the 34 bytes are the matmuls' saved inputs, which the
    recipe keeps at 1 + 4/128 B an element, so 34 − 14 × (1 − 1.03 ÷ 2) = 27.2 bytes, the
    engine's count (labs.model.activations), which the link's bill draws."""
    from app.routers.memory import facts

    f = facts()
    fa, acts = f["fp8_acts"], f["deepseek_fp8"]["api"]["breakdown"]["activations"]
    assert (fa["bf16"], fa["gemm"], fa["saved"]) == (34, 14, 1 + 4 / 128)
    assert fa["coefficient"] == pytest.approx(34 - 14 * (1 - fa["saved"] / 2))
    shape = fa["tokens"] * fa["hidden"] * fa["layers"]
    assert fa["coefficient"] * shape == pytest.approx(acts, rel=1e-9)
    assert 34 * shape == pytest.approx(f["deepseek"]["api"]["breakdown"]["activations"])
    step = _step(client.get("/episodes/memory").text, 6)
    dims = f"{fa['tokens']:,} × {fa['hidden']:,} × {fa['layers']}"
    for said in (f"from {fmt_bytes(34 * shape)} (step 3's 34 × {dims}) to {fmt_bytes(acts)}",
                 "1 + 4/128 = 1.03 B an element, not 2",
                 f"34 − 14 × (1 − 1.03 ÷ 2) = {fa['coefficient']:.1f} bytes, × {dims} = "
                 f"{fmt_bytes(acts)}"):
        assert said in " ".join(step.split()), said


def test_round_16_step_6_says_the_fp8_count_is_gpts_layer_not_deepseeks(client):
    """Round-16 cold reading of EP01-EP02, finding 7: step 6 split DeepSeek-V3's 34 bytes into
    "8 for the 4h GeLU output" as if the model had GPT's layer; it is MLA with a SwiGLU MoE.
    The lab's count is GPT's layer for every model (the engine's terms for DeepSeek-V3 are
    34, 14 of them the matmuls' inputs), and the step now says so before it splits them."""
    from app.routers.memory import facts
    from labs.model.activations import GPT_COEFFICIENT

    terms = facts()["fp8_acts"]
    assert terms["bf16"] == pytest.approx(GPT_COEFFICIENT)  # what the engine charges it
    page = re.sub(r'<span class="term-tip".*?</span>', "", client.get("/episodes/memory").text,
                  flags=re.S)  # a glossary term's tip
    step = _text(_step(page, 6))
    said = step.index("is step 3's GPT layer, which the lab charges every model")
    step = re.sub(r"(?<=\()\s+|\s+(?=[,)])", "", step)  # a term's own tags read as spaces
    assert "DeepSeek-V3's own (MLA, a SwiGLU mixture of experts, no GeLU) differs" in step
    assert step.index("GeLU output") > said


def step_text(html: str, step: int) -> str:
    """One step's section of EP01, tags stripped and whitespace folded."""
    section = re.search(rf'<section class="step" id="step-{step}".*?</section>', html, re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", section.group(0)))


def test_step_5s_limit_names_full_recomputation_which_fits(client):
    """Round-17 cold reading of EP01, finding 1: step 5's limit said state sharding cannot fit
    the 70B and sent the student to EP04-EP06, but step 3's full recomputation fits it on the
    same 32 GPUs with ZeRO-3. The limit now says so, with the engine's bill."""
    from app.routers.memory import facts

    state = facts()["l70_zero3_full"]
    assert state["params"]["recompute"] == "full" and state["params"]["zero"] == 3
    full = state["api"]
    assert full["total_bytes"] < full["gpu_memory_bytes"]
    why, limit = step_text(client.get("/episodes/memory").text, 5).split("Limit.")
    assert "alone cannot fit" not in limit
    assert "full recomputation (step 3) fits it" in limit
    assert f"with it the same GPUs hold {fmt_bytes(full['total_bytes'])} (" in why
    assert "at the peak, while a layer is recomputed), which fits" in why
    assert facts()["l70_zero3_full_peak"] < full["gpu_memory_bytes"]  # the peak fits too


def test_the_final_norms_bytes_are_told_one_way_on_every_page(client):
    """Round-17 cold reading of EP01, finding 2: EP01 billed the 4·s·h beside the logits as
    "the final norm's fp32 output" where EP10 billed the same bytes, with Megatron-LM's count,
    as two bf16 tensors, the norm's input and its output. Every page now tells EP10's."""
    from app.lesson_drills import LESSON_DRILLS
    from app.routers.memory import facts

    lg = facts()["logits"]["l70"]
    assert lg["terms"]["norm"] == 2 * 2 * lg["tokens"] * lg["hidden"]
    step = step_text(client.get("/episodes/memory").text, 2)
    assert ("two bf16 tensors of s·h: the final norm's input, which the norm saves, and its "
            "output, which the output layer saves") in step
    norm = fmt_bytes(lg["terms"]["norm"])
    assert f"2 × 2·s·h = 4 × {lg['tokens']:,} × {lg['hidden']:,} = {norm}" in step
    for slug in ("memory", "zero", "recipe-3d", "low-precision"):
        text = client.get(f"/episodes/{slug}").text.replace("&#39;", "'")
        assert "norm's fp32 output" not in text and "final norm's output," not in text, slug
    prompts = " ".join(repr(d) for drills in LESSON_DRILLS.values() for d in drills)
    assert "final norm's bf16 input and output, 2 × 2 B" in prompts
    assert "norm's fp32 output" not in prompts


def test_step_6_asks_a_count_that_needs_the_total(client):
    """Round-17 cold reading of EP01, finding 3: step 6 offered "12.9B × 16 B: the active
    parameters" against "46.7B × 16 B: every expert" right after saying compute follows the
    active ones; the contrast gave the answer. It now asks the fewest H100s for Mixtral's
    state, a number that needs the total, and the why names what the active count gives."""
    from app.routers.memory import facts

    mx = facts()["mixtral"]["api"]
    assert mx["min_gpus"] == -(-16 * mx["params"] // mx["gpu_memory_bytes"])
    active = -(-16 * mx["active_params"] // mx["gpu_memory_bytes"])
    assert active < mx["min_gpus"]
    html = client.get("/episodes/memory").text
    form = html[html.index('data-predict="memory-6"'):]
    form = form[:form.index("</form>")]
    assert "predict-choice" not in form and "the active parameters" not in form
    assert f'data-answer="{mx["min_gpus"]} GPUs"' in form
    why = step_text(html, 6)
    assert f"so at least {mx['min_gpus']} H100s" in why
    assert f"gives {fmt_bytes(16 * mx['active_params'])} and {int(active)} GPUs" in why


def test_no_recipe_select_before_ep10_prints_the_fp8_bytes(client):
    """Round-17 cold reading of EP01, finding 5: EP01's Recipe select printed "FP8, per-tensor
    delayed scaling (TE), 18 B/param" and the other FP8 and MXFP8 bytes a parameter, which
    EP10's steps 1, 3, 5 and 6 ask. EP01's and EP03's selects now name those recipes without
    their bytes, as EP10's own select does; the recipes EP01 teaches keep theirs."""
    from labs.core.catalogue import RECIPES

    for path in ("/episodes/memory", "/episodes/zero"):
        html = client.get(path).text
        select = html[html.index('name="recipe"'):]
        select = select[:select.index("</select>")]
        for k, recipe in RECIPES.items():
            if "fp8" in k:
                assert recipe.label not in select, (path, k)
                assert recipe.label.split(",")[0] in select, (path, k)
        assert RECIPES["adam16"].label in select


def test_the_drivers_memory_is_told_as_one_number(client):
    """Round-17 cold reading of EP01, finding 7: step 1 said the lab's 80 GB is 6.5% less
    than the driver's 85.5 GB and step 5 that the real card holds 6.9% more: one fact as two
    numbers. Step 5 now quotes step 1's."""
    from app.charts.units import fmt_pct
    from app.routers.memory import facts

    d = facts()["driver"]
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", client.get("/episodes/memory").text))
    assert fmt_pct(d["more"]) not in text
    assert f"which step 1 puts {fmt_pct(d['less'])} under what the driver reports" in text


def test_the_bench_reads_each_cases_wait_once(client, monkeypatch):
    """Code review (round 18): templates/partials/_bench.html read ``case.waiting_on`` three
    times a case (the mask's test, its keys and its note), and EP01's is a callable that runs
    the lab at the case's state and its ``bench_keys``. It reads it once a case now
    (``Case.wait``), and the mask says the same as before."""
    from markupsafe import escape

    from app.labkit.view import Case
    from app.response_cache import CACHE
    from app.routers.memory import VIEW

    reads = []
    read = Case.waiting_on.fget
    monkeypatch.setattr(
        Case, "waiting_on", property(lambda case: reads.append(case.label) or read(case))
    )
    CACHE.clear()  # a page sent before comes from the cache, without a render
    html = client.get("/episodes/memory").text
    cases = [case for case in (VIEW.good, VIEW.bad) if case]
    assert sorted(reads) == sorted(case.label for case in cases)
    masks = [case.wait() for case in cases]
    assert any(note for _, note in masks)  # a case's line waits for a guess (the bad case)
    for waits, note in masks:
        mask = f'data-after-guess="{" ".join(waits)}" data-mask="{escape(note)}"'
        assert not note or mask in html


def test_step_4s_small_server_is_a_named_7b_whose_kv_cache_checks(client):
    """Round-17 cold reading of EP01, finding 4: step 4's "custom 7B drawn as 28 layers x
    4,096, every head its own K and V" was no real model's shape (5.7B before embeddings).
    It serves Llama 2 7B, a preset with its source (32 layers, 32 KV heads of 128: multi-head
    attention), and its KV cache is 2 x layers x kv_heads x head_dim x 2 B a token from the
    shape the page states, the lab's figure."""
    from app.charts.units import fmt_bytes

    html = client.get("/episodes/memory").text
    four = _text(html.split('id="step-4"')[1].split("</section>")[0])
    assert "custom 7B" not in four and "28 layers" not in four
    link = re.search(r'href="/episodes/memory\?([^"]*)"[^>]*>\s*▶ Llama 2 7B in int8', html)
    assert link and "model=llama-2-7b" in link[1]
    bill = client.get("/api/memory", params=dict(
        p.split("=") for p in link[1].replace("&amp;", "&").split("&"))).json()
    per_token = 2 * 32 * 32 * 128 * 2
    assert per_token == 524_288
    assert bill["breakdown"]["kv_cache"] == pytest.approx(per_token * 4096, rel=1e-9)
    assert ("each of its 32 layers keeps K and V for all 32 heads of 128 values, "
            "2 × 32 × 32 × 128 × 2 B = 524,288 B a token") in four
    assert f"× 4,096 tokens = {fmt_bytes(bill['breakdown']['kv_cache'])}" in four


# ---- Round-19 cold reading X (issue 36): EP01's findings 5, 13, 14, 16 ----


def test_round19_the_good_case_is_step_4s_llama_2_7b(client):
    """Finding 5: the good case was a custom 7B (28 layers x 4,096, 9.19 GB) a row from
    step 4's Llama 2 7B (32 layers, 9.20 GB), two 7Bs. The case is step 4's link state."""
    from app.routers.memory import VIEW, facts

    step_4 = facts()["small_int8"]
    assert dict(VIEW.good.query) == dict(step_4["params"])
    assert step_4["result"].input.model.id == "llama-2-7b"
    html = client.get("/episodes/memory").text
    link = re.search(r'<a class="case good"[^>]*href="([^"]+)"', html)[1]
    assert "model=llama-2-7b" in link and "params=" not in link
    assert _step(html, 4).count("Llama 2 7B") >= 1


def test_round19_the_custom_params_field_reads_as_typed(client):
    """Finding 16: the custom size field printed the parsed float, "7000000000.0"."""
    for given, shown in (("7e9", "7e9"), ("7000000000", "7e9"), ("6.72e9", "6.72e9"),
                         ("30e9", "3e10")):
        html = client.get(f"/episodes/memory?model=custom&params={given}").text
        field = re.search(r'<input type="text" name="params" id="input-params"[^>]*>', html, re.S)
        assert f'value="{shown}"' in field[0], (given, field[0])


def test_round19_the_405b_drill_is_headed_derive_and_states_the_vocabulary(client):
    """Finding 13 (round-18 D #12): memory-predict-405b-h200 is worked from the inputs its
    question states, a derive headed "Predict"; its logits needed a vocabulary it did not
    give. It is headed Derive and states Llama 3.1's 128,256; EP01's predict drill asks the
    8B's bill at eight times step 1's tokens, which no figure on the page prints."""
    from app.lesson_drills import LESSON_DRILLS
    from labs.model.presets import get_model

    html = client.get("/episodes/memory").text
    form = html.split('id="drill-memory-predict-405b-h200"')[1].split("</form>")[0]
    assert "<h3>Derive</h3>" in form
    assert f"vocabulary {get_model('llama-3.1-405b').vocab:,}" in unescape(form)
    drills = {d.id: d for d in LESSON_DRILLS["memory"]}
    assert drills["memory-predict-405b-h200"].kind == "derive"
    long = drills["memory-predict-8b-32k"]
    assert long.kind == "predict"
    form = html.split('id="drill-memory-predict-8b-32k"')[1].split("</form>")[0]
    assert "<h3>Predict</h3>" in form
    assert "step 1's bill for Llama 3.1 8B, one 4,096-token sequence" in long.question
    assert f"{long.answer():.1f}" not in re.sub(r"<[^>]+>", " ", html)


def test_round19_step_1s_limit_says_the_two_errors_roughly_cancel(client):
    """Finding 14: step 1's limit said the lab's 80 GB (6.5% under the driver's 85.5 GB)
    makes its fit verdicts "err on the safe side", beside "a few GB" of context and buffers
    the bill leaves out: the two run opposite ways. It says they roughly cancel; step 5 no
    longer calls its counts safe upper bounds."""
    html = client.get("/episodes/memory").text
    step_1 = html[html.index('id="step-1"'):html.index('id="step-2"')]
    limit = unescape(re.search(r'<p class="limit">.*?</p>', step_1, re.S)[0])
    assert "safe side" not in limit
    assert "The two errors run opposite ways and roughly cancel" in limit
    assert "safe upper bounds" not in _step(html, 5)


# ---- Round-20 cold reading P (issue 36): EP01's findings 3, 11, 19 ----


def test_round20_llama_2_7b_is_not_said_to_predate_gqa(client):
    """Finding 3: step 4 said Llama 2 7B "predates grouped-query attention"; GQA (May 2023)
    came before Llama 2 (July 2023), whose 70B uses it. The 7B does not use it (step 4's why
    stays within its word cap, test_step_beats)."""
    four = _text(_step(client.get("/episodes/memory").text, 4))
    assert "predates" not in four
    assert ("Llama 2 7B does not use grouped-query attention (of the released Llama 2 models, "
            "only the 70B does)") in four


def test_round20_step_1_bills_the_final_norms_input_and_output(client):
    """Finding 19: step 1's why put 'the final norm's output and the token ids' beside the
    logits; the bytes are the norm's input and output (step 2) and the ids."""
    one = _text(_step(client.get("/episodes/memory").text, 1))
    assert "with the final norm's input and output and the token ids," in one


def test_round20_405b_is_printed_to_four_figures_where_it_is_multiplied(client):
    """Finding 11: step 2 printed '406B parameters × 16 B = 6.49 TB' (406 × 16 = 6.50 TB; the
    preset is 405.9B) and step 5 '406B × 18 B = 7.31 TB'. Wherever EP01 multiplies 405B's P it
    prints 405.9B, and the printed P times the printed bytes rounds to the printed answer."""
    html = client.get("/episodes/memory").text
    two, five = _text(_step(html, 2)), _text(_step(html, 5))
    assert "Llama 3.1 405B has 405.9B parameters: how many TB" in two
    assert "Llama 3.1 405B (405.9B parameters) in the 18-byte recipe" in five
    for text, per in ((two, 16), (five, 18)):
        m = re.search(rf"([\d.]+)B (?:parameters )?× {per} B = ([\d.,]+ TB)", text)
        assert m and m.group(1) == "405.9", text
        assert fmt_bytes(per * float(m.group(1)) * 1e9) == m.group(2)
    assert "406B" not in two + five


# ---- Round-21 cold reading P (issue 36): EP01's findings 6, 9, 10, 13, 15, 16 ----


def test_round21_step_5_gives_full_recomputations_peak_by_ep03s_rule(client):
    """Finding 6: step 5 said the 70B on 32 GPUs with full recomputation holds 42.9 GB; EP03
    step 6 adds the recomputed layer's own 34·s·h while its backward runs (1.14 GB: 44.0 GB).
    Both pages now quote one engine figure (labs.memory.lab.recompute_peak_bytes)."""
    from labs.memory.lab import recompute_peak_bytes
    from labs.model.presets import get_model

    five = _step(client.get("/episodes/memory").text, 5)
    state = {"model": "llama-3.1-70b", "dp": 32, "zero": 3, "recompute": "full"}
    bill = client.get("/api/memory", params=state).json()["total_bytes"]
    m = get_model("llama-3.1-70b")
    peak = bill + 34 * 4096 * m.hidden  # one layer's 34·s·h beside the kept inputs
    assert fmt_bytes(peak) == "44.0 GB"
    assert f"{fmt_bytes(bill)} ({fmt_bytes(peak)} at the peak, while a layer is recomputed)" \
        in " ".join(five.split())
    # The rule is the engine's, and EP03 step 6's note prints it the same way.
    from app.routers import memory, zero
    assert memory.facts()["l70_zero3_full_peak"] == pytest.approx(peak)
    g = zero.facts()["g9_full_16k"]
    gm, gs = g["result"].input.model, g["result"].input.seq_len
    g_peak = g["api"]["total_bytes"] + 34 * gs * gm.hidden
    assert recompute_peak_bytes(g["result"].ledger) == pytest.approx(g_peak)
    six = re.search(r'<section class="step" id="step-6".*?</section>',
                    client.get("/episodes/zero").text, re.S)[0]
    assert f"{fmt_bytes(g_peak)} at the peak" in " ".join(re.sub(r"<[^>]+>", " ", six).split())
    # No peak beyond the bill without full recomputation.
    flash = memory.facts()["l70_flash"]["result"]
    assert recompute_peak_bytes(flash) == flash.total_bytes


def test_round21_the_405b_drills_printed_terms_add_to_its_answer(client):
    """Finding 9: the 405B/H200 drill's solution printed 101.5 + 16.9 + 2.4 GB (120.8) for a
    120.7 GB answer. Its terms print to two decimals and their sum is printed."""
    from app.lesson_drills import LESSON_DRILLS

    drill = next(d for d in LESSON_DRILLS["memory"] if d.id == "memory-predict-405b-h200")
    text = drill.explanation() if callable(drill.explanation) else drill.explanation
    m = re.search(r"([\d.]+) \+ ([\d.]+) \+ ([\d.]+) = ([\d.]+) GB", text)
    assert m, text
    terms = [float(x) for x in m.groups()[:3]]
    assert f"{sum(terms):.2f}" == m.group(4)
    assert f"{float(m.group(4)):.1f}" == f"{drill.answer():.1f}"
    assert "2.37 GB of fp32 logits" in text


def test_round21_step_4s_prefill_chunk_is_vllms_setting_with_its_source(client):
    """Finding 10: step 4's note said a server 'runs prompts in chunks of at most 8,192
    tokens', one engine's setting told as a rule with no source."""
    four = " ".join(_step(client.get("/episodes/memory").text, 4).split())
    assert ("vLLM's server on an H100 takes at most 8,192 tokens a forward (its "
            "max_num_batched_tokens default, a setting: vllm/engine/arg_utils.py)") in four


def test_round21_the_ledger_prints_the_menus_parameter_count(client):
    """Finding 13: step 2's 405B link drew 'Parameters (total / active) 406B / 406B' beside
    6.49 TB (406 × 16 = 6.50 TB); the menu and the prose say 405.9B."""
    html = client.get("/episodes/memory?model=llama-3.1-405b").text
    row = re.search(r"<dt>Parameters \(total / active\)</dt><dd>([^<]+)</dd>", html)[1]
    assert row == "405.9B / 405.9B"
    assert "Llama 3.1 405B (405.9B)" in html  # the menu's label
    row = re.search(r"<dt>Parameters \(total / active\)</dt><dd>([^<]+)</dd>",
                    client.get("/episodes/memory?model=mixtral-8x7b").text)[1]
    assert row == "46.7B / 12.9B"


def test_round21_step_2s_18_byte_state_names_its_model(client):
    """Finding 15: '18 bytes, and 1.27 TB' followed the 405B's figure without naming the
    70B it is for."""
    two = " ".join(_step(client.get("/episodes/memory").text, 2).split())
    assert "18 bytes, and 1.27 TB for the 70B." in two


def test_round31_the_405b_drills_solution_gives_the_peak_its_step_counts():
    """Round-31 reading A, finding 8: EP01 step 5's why gives full recomputation's total and
    its peak ("(44.0 GB at the peak, while a layer is recomputed)"); the step's 405B drill,
    under full recomputation too, gave the bill alone, 120.74 GB, though rel_tol takes the
    peak as right. Its solution adds the peak: the bill plus one layer's 34·s·h."""
    from app.lesson_drills import LESSON_DRILLS
    from labs.model.presets import get_model

    drill = next(d for d in LESSON_DRILLS["memory"] if d.id == "memory-predict-405b-h200")
    text = drill.explanation() if callable(drill.explanation) else drill.explanation
    m = get_model("llama-3.1-405b")
    peak = drill.answer() * 1e9 + 34 * drill.see["seq_len"] * m.hidden
    assert f"({peak / 1e9:.1f} GB at the peak, while a layer is recomputed)" in text, text
