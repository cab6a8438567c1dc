"""Round-31 cold reading B (EP06, EP07, EP08, EP09, EP11, the cheat sheet and the your-run
page): each finding fixed here, pinned on the behaviour it fixes."""

import html as markup
import re


def _text(part: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", markup.unescape(part)).split())


def _prose(part: str) -> str:
    """Text as read: the glossary's tips and the tags dropped."""
    part = re.sub(r'<span class="term-tip".*?</span>', "", part, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", markup.unescape(part)).split())


def _drill(view: str, drill_id: str):
    from app.lesson_drills import LESSON_DRILLS
    return next(d for d in LESSON_DRILLS[view] if d.id == drill_id)


def test_finding_1_the_layout_decides_all_gather_is_llama_3s_balanced_one(client):
    """cp-decide-layout's all-gather was slime's contiguous slices, which lose by 2x on the
    imbalance step 2 taught, so it could be ruled out without weighing the wait. It is Llama
    3's zigzag all-gather (step 4): the ring's even attention plus the whole all-gather waited
    for, both the engine's, and it still loses, by the wait."""
    from app.labkit.drills import lab_value
    from app.lesson_drills.context_parallel import LAYOUT_CP, LAYOUT_DECIDE

    drill = _drill("cp", "cp-decide-layout")
    labels = dict(drill.choices)
    assert "contiguous" not in labels["allgather"] and "zigzag" in labels["allgather"]
    state = {**LAYOUT_DECIDE, "cp": LAYOUT_CP}
    ring = lab_value("cp", {**state, "layout": "zigzag"}, lambda a: a)
    gather = lab_value("cp", {**state, "layout": "allgather"}, lambda a: a)
    options = {o.key: o for o in drill.judge()}
    want = ring["attention_s"] + gather["exposed_s"]
    assert options["allgather"].figure == f"{want * 1e3:,.2f} ms"
    assert not options["allgather"].right and options["ring"].right
    why = options["allgather"].why
    assert "2 − 1/" not in why and f"{gather['exposed_s'] * 1e3:.3f} ms" in why


def test_finding_9_the_layout_decide_states_nvlink_5s_rate_and_its_margin(client):
    """The NVLink 5 rate behind the decide's sends was on no page (the only rate was the
    H100's), and the solution never said how thin the ring's lead is or which way the lab
    errs. The question states the link's rate and busBW, the solution the margin and the
    direction of the lab's error."""
    from labs.hardware.links import get_link

    drill = _drill("cp", "cp-decide-layout")
    link = get_link("nvl72")
    assert f"{link.bandwidth / 1e9:,.0f} GB/s" in drill.question
    assert f"{link.ring_busbw / 1e9:,.0f} GB/s" in drill.question
    found = {o.key: float(o.figure.removesuffix(" ms")) for o in drill.judge()}
    gap = found["ulysses"] - found["ring"]
    text = drill.solution()
    assert f"{gap:.2f} ms" in text and "errs in the ring's favour" in text


def test_finding_2_the_network_decides_options_all_differ(client):
    """moe-decide-network's 1:1 spine tied leaves of 8 exactly (21.6 ms each): both take the
    spine out of the dispatch, so neither could be the one answer and the drill fell to
    elimination. Expert TP 2 stands in its place, a lever whose layer differs: its GEMMs halve
    and each EP group spans twice the nodes, each figure the engine's."""
    from app.labkit.drills import lab_value
    from app.lesson_drills.moe import V3_NET
    from app.lesson_drills.units import ms

    drill = _drill("moe", "moe-decide-network")
    labels = dict(drill.choices)
    assert not any("1:1" in label for label in labels.values())
    options = {o.key: o for o in drill.judge()}
    assert len({o.figure for o in options.values()}) == len(options)  # no two tie
    assert [k for k, o in options.items() if o.right] == ["ep32"]
    base = lab_value("moe", V3_NET, lambda a: a)
    etp = lab_value("moe", {**V3_NET, "etp": 2}, lambda a: a)
    assert options["etp2"].figure == ms(etp["layer_s"])
    why = options["etp2"].why
    assert f"{ms(base['compute_s'])} → {ms(etp['compute_s'])}" in why
    assert f"{ms(etp['dispatch_s'])} each way instead of {ms(base['dispatch_s'])}" in why


def test_finding_3_ep11_times_llama_3_at_one_layer_a_chunk(client):
    """EP11 step 7 took 7 model chunks a stage, "the lab's choice: the report gives none".
    Llama 3 sec 3.3.2 has the first stage's first chunk hold only the embedding and the last
    stage's last only the head: one layer a chunk, 8 a stage, 16 x 8 = 128 slots = 126 layers
    + 2. The engine now takes an uneven end stage's embedding (head) as a chunk, times that
    layout, and the page's bubble and gain are its figures at v = 8."""
    from app.routers.failures_state import LLAMA3_CHUNKS, LLAMA3_LAYOUT
    from labs.model.presets import get_model

    assert LLAMA3_CHUNKS == 8
    layers = get_model(LLAMA3_LAYOUT["model"]).layers
    assert LLAMA3_LAYOUT["pp"] * LLAMA3_CHUNKS == layers + 2
    body = client.get("/api/recipe", params={**LLAMA3_LAYOUT, "nodes": 512 * 16, "dp": 512,
                                             "microbatches": 4}).json()
    assert body["bubble_fraction"] == __import__("pytest").approx(1 - 32 / 131)
    page = client.get("/episodes/failures").text
    start = page.index('id="step-7"')
    seven = _text(page[start:page.index("</section>", start)])
    assert "the lab's choice" not in seven
    assert f"16 × 8 = {layers} layers + 2" in seven
    assert "1 − 32/131 = 75.6%" in seven


def _rl_step_2(client) -> str:
    page = client.get("/episodes/rl-placement").text
    start = page.index('id="step-2"')
    return _prose(page[start:page.index("</section>", start)])


def test_finding_4_ep09_step_2_derives_the_switchs_bytes(client):
    """EP09 step 2 quoted the 1.37 s sync whose 42.3 GB each way no page derived (R1's switch,
    step 6, keeps its Adam state in host RAM, so it does not carry over). Step 2's note now
    works a switch's bytes from the engine's parameters a GPU: bf16 weights, fp32 gradients
    and 12 B of Adam state over DP·CP; the sum is the engine's switch bytes."""
    from app.routers.rl import facts

    api = facts()["glm9"]["api"]
    stage = api["train_stage"]
    p = (stage["dense_params_per_gpu"] + stage["expert_params_per_gpu"]) / 1e9
    parts = (2 * p, 4 * p, 12 * p / stage["dense_shard"])
    assert sum(parts) * 1e9 == __import__("pytest").approx(api["sync_switch_bytes"][0])
    two = re.sub(r"\( | (?=[,)])", lambda m: m.group(0).strip(), _rl_step_2(client))
    assert (f"A switch's {api['sync_switch_bytes'][0] / 1e9:.1f} GB: {p:.2f}B parameters' "
            f"weights {parts[0]:.2f} (bf16) + ") in two
    assert (f"gradients {parts[1]:.2f} (fp32) + Adam {parts[2]:.2f} (12 B ÷ DP·CP "
            f"{stage['dense_shard']})") in two


def test_finding_10_ep09_step_2s_gain_is_the_quotient_of_its_printed_rates(client):
    """"64 ÷ 16.6 s = 3.86 a second, 1.70× for twice the GPUs" against colocated's 2.28:
    3.86 ÷ 2.28 = 1.69; the 1.70 came from the unrounded rates. The why and the predict's
    answer print the quotient of the rates they print."""
    from app.routers.rl import facts

    f = facts()
    col, sep = (round(f[k]["api"]["samples_per_second"], 2) for k in ("glm9", "glm9_sep"))
    two = _rl_step_2(client)
    assert f"{sep:.2f} a second, {sep / col:.2f}× for twice the GPUs" in two


def _cheat_terms(client, key: str, **query) -> dict:
    lines = client.get("/api/cheatsheet", params=query).json()["lines"]
    line = next(line for line in lines if line["key"] == key)
    return {t["symbol"]: t for t in line["terms"]} | {line["result"]["symbol"]: line["result"]}


def test_finding_5_the_sustained_factor_has_one_spelling(client):
    """The cheat sheet's DP line printed "× 0.85 sustained over burst" (80.3% × 0.85 = 68.3%,
    not its 68.2%), EP07 step 4 "84.9%", EP07 step 8 "84.89%", EP08's "an H200's 0.85": one
    factor, 0.8489, spelt four ways. Each prints it as EP02 does, 84.89%, and the DP line's
    product redoes its share."""
    from labs.hardware.gpus import get_gpu

    k = get_gpu("h100-sxm").kernels
    spelt = f"{k.matmul_sustain:.2%}"
    rate = _cheat_terms(client, "dp_speedup")["rate"]["meaning"]
    assert f"× {spelt} sustained over burst" in rate
    share = float(re.search(r"([\d.]+)% of its", rate)[1])
    assert f"{k.matmul_efficiency * 100:.1f}" in rate
    assert f"{round(k.matmul_efficiency, 3) * k.matmul_sustain * 100:.1f}" == f"{share:.1f}"
    moe = _prose(client.get("/episodes/experts").text)
    assert f"× {spelt} (held at the power limit)" in moe and "× 84.9% " not in moe
    recipe = _prose(client.get("/episodes/recipe-3d").text)
    assert f"an H200's {spelt} at the power limit" in recipe and "H200's 0.85" not in recipe


def test_finding_6_the_dense_dp_line_states_p(client):
    """The dense DP line's c = 6·P·T ÷ rate named no P (the MoE lines do)."""
    from labs.model.presets import get_model

    c = _cheat_terms(client, "dp_speedup")["c"]["meaning"]
    assert f"P = {get_model('llama-3.1-70b').params / 1e9:.1f}B parameters" in c


def test_finding_7_the_dense_goodput_step_says_why_it_counts_every_parameter(client):
    """The goodput line's dense step counted 70.55B parameters where the Training FLOPs line
    two rows up says N = 69.5B (less the input embedding) and the MoE lines use that N. The
    line says why it counts them all (EP11 times Llama 3's step so) and what N leaves out."""
    from labs.model.flops import matmul_params
    from labs.model.presets import get_model

    m = get_model("llama-3.1-70b")
    tau = _cheat_terms(client, "goodput")["τ"]["meaning"]
    assert "as EP11 times Llama 3's step" in tau
    assert f"input embedding's {(m.params - matmul_params(m)) / 1e9:.2f}B" in tau


def test_finding_8_the_attention_term_says_what_h_is(client):
    """"4·L·h·s" never said what h is: DeepSeek-V3's 2.52e14 needs 128 x (192 + 128)/2 =
    20,480, GLM-4.7's 96 x 128 = 12,288, neither the hidden size. The term says h, and the
    stated h redoes the attention FLOPs (12·L·h·s² for a sequence)."""
    for model in ("deepseek-v3", "glm-4.7"):
        terms = _cheat_terms(client, "flops_6nd", model=model)
        text = terms["attention"]["meaning"]
        found = re.search(r"h = heads × head dim.*? = (\d+) × ([\d.]+) = ([\d,]+), not the "
                          r"hidden size", text)
        assert found, text
        h = float(found[3].replace(",", ""))
        assert float(found[1]) * float(found[2]) == h
        from labs.model.presets import get_model
        m = get_model(model)
        s = terms["D"]["value"]
        assert 12 * m.layers * h * s * s == __import__("pytest").approx(
            terms["attention"]["value"], rel=0.02)


def test_finding_11_ep08_step_1_names_the_uneven_stage_wait(client):
    """EP08 step 1 printed compute 4,838 ms and "the slowest stage's kernels" 4,886 ms without
    saying the 48.6 ms between them is the uneven-stage wait (segments_s.stages). The why
    adds it: mean stage's compute + the wait = the slowest stage's kernels, each sum redoing
    from its printed parts."""
    from app.routers.recipe import facts

    f = facts()
    page = client.get("/episodes/recipe-3d").text
    start = page.index('id="step-1"')
    one = _prose(page[start:page.index("</section>", start)])
    assert "uneven-stage wait" in one
    for key in ("e60", "seed"):
        seg = f[key]["api"]["segments_s"]
        kernels = sum(c["exposed_s"] for c in f[key]["api"]["causes"][:3])
        part = (f"{seg['compute'] * 1e3:,.1f} + {seg['stages'] * 1e3:.1f} = "
                f"{kernels * 1e3:,.0f} ms")
        assert part in one, part
        found = re.search(r"([\d,.]+) \+ ([\d.]+) = ([\d,]+) ms", one[one.index(part):])
        redo = float(found[1].replace(",", "")) + float(found[2])
        assert f"{redo:,.0f}" == found[3]


def _fixture_log(name: str) -> str:
    from pathlib import Path
    return (Path(__file__).parents[1] / "fixtures" / "runs" / name).read_text()


def test_finding_12_your_run_withholds_only_the_timing_and_mfu_rows(client):
    """With no GPU named, every ratio cell said "choose the GPU": BLOOM's memory rows too,
    whose log holds no memory figure (choosing a GPU gave "–"), and the 8B log's memory ratio,
    which does not depend on the GPU that times the run. Now a row the log lacks says "not in
    the log", the ledger's bytes keep their ratio, and only timing and MFU are withheld."""
    bloom = client.post("/api/runs/parse", json={"log": _fixture_log("bloom_176b.log")}).json()
    assert any(d["control"] == "gpu" for d in bloom["defaulted"])
    memory = [f for f in bloom["figures"] if f["unit"] == "B"]
    assert memory and all(f["measured"] is None and not f["withheld"] for f in memory)
    page = client.post("/episodes/recipe-3d/your-run",
                       data={"log": _fixture_log("bloom_176b.log")}).text
    for f in memory:
        assert (f'data-testid="ratio-{f["name"]}"><span class="muted">not in the log</span>'
                in page)
    eight = client.post("/api/runs/parse",
                        json={"log": _fixture_log("megatron_llama3_8b.log")}).json()
    if any(d["control"] == "gpu" for d in eight["defaulted"]):
        for f in eight["figures"]:
            if f["unit"] == "B" and f["measured"] and not f["unlike"]:
                assert f["ratio"] == f["predicted"] / f["measured"] and not f["withheld"]
            elif f["name"] in ("step_time", "mfu") and not f["unlike"]:
                assert f["withheld"], f
