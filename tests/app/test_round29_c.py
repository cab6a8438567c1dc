"""Round-29 cold reading C (r29C): EP08, EP09, EP11, EP12's cheat sheet and Your run."""



import re
from html import unescape

import pytest

from tests.app.test_rl_routes import _steps
from tests.app.test_round28 import _step


def test_finding_1_colocated_switch_moves_the_optimizer_state_on_the_gpu(client):
    """GLM-4-9B's colocated training phase holds its ZeRO-1 Adam shard on the GPU, and step 2
    says the optimizer waits in host memory while the pool serves; the switch moved only the
    weights and gradients. It now moves all the trainer holds that the engine does not: the
    optimizer state too, but none under CPU Adam (DeepSeek-R1)."""
    from app.routers.rl_lesson import facts

    f = facts()
    for key, on_gpu in (("glm9", True), ("r1", False)):
        bill = f[key]["result"].train_breakdown
        state = bill["master_weights"] + bill["optimizer_moments"]
        assert (state > 0) is on_gpu, key
        api = client.get("/api/placement", params=f[key]["params"]).json()
        moved = bill["weights"] + bill["gradients"] + state
        assert api["sync_switch_bytes"] == [pytest.approx(moved, rel=1e-6)] * 2, key
        assert api["sync_switch_seconds"] == pytest.approx(2 * moved / api["sync_switch_rate"],
                                                           rel=1e-9)
    col = client.get("/api/placement", params=f["glm9"]["params"]).json()
    two = _steps(client)[2]
    assert f"{col['samples']} samples ÷ {col['step_seconds']:.2f} s = " \
        f"{col['samples_per_second']:.2f} a second" in two
    assert "the trainer's weights, gradients and optimizer wait in host memory" in two


def _line(client, key: str, **query) -> dict:
    lines = client.get("/api/cheatsheet", params=query).json()["lines"]
    return next(line for line in lines if line["key"] == key)


def _term(line: dict, symbol: str) -> dict:
    return next(t for t in line["terms"] if t["symbol"] == symbol)


@pytest.mark.parametrize("model", ["deepseek-v3", "mixtral-8x7b"])
def test_finding_2_goodputs_moe_step_counts_the_active_matmul_parameters(client, model):
    """The Goodput line timed DeepSeek-V3's step on 6 x 671.03B parameters (10.31 s on
    16,384 GPUs), where the Training FLOPs line's N is 36.6B: a MoE token runs its active
    parameters only. The step now counts the FLOPs line's N."""
    from labs.failures.lab import llama3_step_s

    n = _term(_line(client, "flops_6nd", model=model), "N")["value"]
    tau = _term(_line(client, "goodput", model=model), "τ")["meaning"]
    assert f"6 × {n / 1e9:.2f}B active matmul parameters (N above)" in tau, tau
    assert f"= {llama3_step_s(n):.4g} s on its 16,384 GPUs" in tau, tau


@pytest.mark.parametrize("model", ["deepseek-v3", "mixtral-8x7b"])
def test_finding_5_the_moe_flops_label_says_active_and_the_dp_line_names_its_two_ps(client,
                                                                                   model):
    """"N = 36.6B matmul parameters (671.0B less the input embedding)": 671.0B less the
    embedding is about 670B. And the DP line's c took the active P, its t the total P."""
    from labs.model.presets import get_model

    m = get_model(model)
    label = _term(_line(client, "flops_6nd", model=model), "N")["meaning"]
    assert label.startswith(f"active matmul parameters of {m.params / 1e9:.1f}B"), label
    assert "less the input embedding" not in label
    dp = _line(client, "dp_speedup", model=model)
    assert f"P here the {m.active_params / 1e9:.1f}B active parameters" in _term(dp, "c")["meaning"]
    assert f"P here all {m.params / 1e9:.1f}B" in _term(dp, "t")["meaning"]


def test_finding_12_cheat_sheet_small_items(client):
    """The MFU and HFU lines both printed 33.2% beside "never quote an HFU as an MFU"; the TP
    line counted collectives "per layer per step"; the DP line's 68% of the peak was never
    tied to the FP8 line's 80.30% (68.2% = 80.3% x the 0.85 sustained share)."""
    from labs.hardware.gpus import get_gpu

    mfu = _line(client, "mfu")["result"]["value"]
    hfu = _line(client, "hfu")["result"]
    assert f"{mfu:.1%}" == f"{hfu['value']:.1%}"  # the default's coincidence, said
    assert ("The MFU line's run recomputes no whole forward (selective)" in hfu["meaning"]
            and f"its {mfu:.1%} matches this HFU only by chance." in hfu["meaning"])
    assert "per layer per micro-batch" in _term(_line(client, "tp"), "n")["meaning"]
    rate = _term(_line(client, "dp_speedup"), "rate")["meaning"]
    k = get_gpu("h100-sxm").kernels
    assert (f"{k.matmul_efficiency * k.matmul_sustain:.1%} of its 989 TFLOP/s dense peak, "
            f"achieved: its MAMF share, {k.matmul_efficiency:.1%}, × {k.matmul_sustain:.2%}"
            in rate), rate


def test_finding_3_ep08_step_1_efficiency_redoes_from_its_printed_parts(client):
    """"75.8% efficient against 72.8%. All kernels take 6,647 ms a step against 4,886 ms":
    4,886 / 6,646 is 73.5%, 6,647 / 8,678 76.6%. The why now quotes the bar's compute over
    the step for each, and names the other figure the slowest stage's kernels."""
    from tests.app.test_round28 import _step

    one = _step(client, "/episodes/recipe-3d", 1)
    found = re.findall(r"([\d,]+) ÷ ([\d,]+) ms = ([\d.]+)%", one.split("It rises")[1])
    assert len(found) >= 2, one
    for compute, step, pct in found[:2]:
        redo = 100 * float(compute.replace(",", "")) / float(step.replace(",", ""))
        assert f"{redo:.1f}" == pct, (compute, step, pct)
    # Round-31 reading B, finding 11: the kernels now say they add the uneven-stage wait
    # (tests/app/test_round31_b.py; old "The slowest stage's kernels: ").
    assert "All kernels take" not in one
    assert "The slowest stage's kernels add its uneven-stage wait" in one


def test_finding_4_ep11_says_the_chunk_count_is_the_labs(client):
    """"EP08's engine times Llama 3's interleaved 1F1B schedule (7 model chunks a stage)" and
    the decide's "7 model chunks a stage" read as the report's; it gives none. Round-31
    reading B, finding 3: the report implies one layer a chunk (its first chunk holds only
    the embedding), 8 a stage: the page and the decide say that reading now
    (tests/app/test_round31_b.py; old "the lab's choice: the report gives none")."""
    from app.routers.failures import VIEW
    from app.routers.failures_state import LLAMA3_CHUNKS

    seven = _step(client, "/episodes/failures", 7)
    assert f"({LLAMA3_CHUNKS} chunks a stage, a layer each: the report's first" in seven, seven
    drill = next(d for d in VIEW.drills if d.id == "failures-decide-more-or-faster")
    assert (f"{LLAMA3_CHUNKS} model chunks a stage, one layer a chunk as the report implies"
            in drill.question)


def test_finding_13_ep11_bench_points_to_the_step_that_says_tens_of_minutes(client):
    """The good case's why and the bench's "Best interval (step 4)" row cited step 5 for
    "real runs save every tens of minutes": step 4's why says it."""
    page = unescape(client.get("/episodes/failures").text)
    assert "tens of minutes (step 5)" not in page
    assert "real runs save every tens of minutes (step 4)" in page
    assert "Real runs save every tens of minutes" in _step(client, "/episodes/failures", 4)


def test_finding_8_the_268_mb_beside_the_logits_is_said_one_way(client):
    """EP08 step 4 said "the final norm's output and the embedding's" where step 2 and EP12
    step 2 say the final norm's bf16 input and output (labs.model.activations'
    output_activation_bytes: 2 x 2·s·b·h; the embedding's output is the first layer's input,
    which the 34·s·h counts)."""
    four = _step(client, "/episodes/recipe-3d", 4)
    assert "the final norm's output and the embedding's" not in four
    assert "with the final norm's bf16 input and output, add" in four
    assert "the final norm's bf16 input and output" in _step(client, "/episodes/recipe-3d", 2)
    twelve = _step(client, "/episodes/playground", 2)  # bf16 carries a glossary tip
    assert "The final norm's bf16" in twelve and " input and output take 2 × 2 B" in twelve


def test_finding_10_ep09_numbers_the_stages_from_0_as_ep08_does(client):
    """EP09 step 4's note put R1's heaviest GPU "on stage 4" (the API's rank 3) and slime's on
    "stage 2", where EP08 says "Stage 0 is the heaviest" and its table counts 0-3."""
    from app.routers.rl_lesson import facts, slime_split

    st, alt = facts()["r1"]["api"]["train_stage"], slime_split()
    four = _steps(client)[4]
    assert f"heaviest GPU is on stage {st['rank']} (EP08 counts from 0), " in four
    assert f"its heaviest GPU, on stage {alt['rank']} with {alt['moe_layers']} MoE" in four


def test_finding_11_ep09_step_6_says_the_separate_step_is_slower(client):
    """"the longest part is the rollout, slower than colocated on half the GPUs": the rollout
    takes the same time in both; the separate step is the slower one."""
    six = _steps(client)[6]
    assert "the longest part is the rollout; the step is slower than colocated's on" in six
    assert "the rollout, slower than colocated" not in six


def test_finding_6_a_guessed_gpu_withholds_the_runs_mfu_in_the_page_and_the_api(client):
    """BLOOM's log names no GPU: the page held back the ratios but printed the run's MFU on
    the guessed H100 (11.4%), and /api/runs/parse returned the ratios (3.26). Now the API nulls
    each ratio and the MFU worked out from the guessed peak, and says why in `withheld`."""
    from pathlib import Path

    log = (Path(__file__).parents[1] / "fixtures" / "runs" / "bloom_176b.log").read_text()
    guessed = client.post("/api/runs/parse", json={"log": log}).json()
    assert any(d["control"] == "gpu" for d in guessed["defaulted"])
    for f in guessed["figures"]:
        if f["unlike"]:
            continue
        # Round-31 reading B, finding 12: only the timing and MFU rows are withheld; the
        # ledger's bytes and a row the log lacks are not (tests/app/test_round31_b.py).
        if f["unit"] == "B" or (f["measured"] is None and not f["derived"]):
            assert not f["withheld"], f
            continue
        assert f["ratio"] is None and "names no GPU" in f["withheld"], f
    mfu = next(f for f in guessed["figures"] if f["name"] == "mfu")
    assert mfu["measured"] is None and "MFU" in mfu["withheld"] and mfu["derived"]
    page = client.post("/episodes/recipe-3d/your-run", data={"log": log}).text
    assert 'data-testid="measured-mfu"><span class="muted">choose the GPU</span>' in page
    chosen = client.post("/api/runs/parse", json={"log": log, "gpu": "a100-80gb"}).json()
    assert all(f["withheld"] == "" for f in chosen["figures"])
    assert next(f for f in chosen["figures"] if f["name"] == "mfu")["measured"] > 0


def test_finding_6_the_fixture_readme_quotes_blooms_a100_ratio_as_the_lab_gives_it(client):
    """The one real log comes out 1.33x fast on the A100: the fixture README says so (the
    cause not established), and its figure is the API's."""
    from pathlib import Path

    runs = Path(__file__).parents[1] / "fixtures" / "runs"
    said = re.search(r"the lab comes out ([\d.]+)× fast on it", (runs / "README.md").read_text())
    assert said
    body = client.post("/api/runs/parse", json={"log": (runs / "bloom_176b.log").read_text(),
                                               "gpu": "a100-80gb"}).json()
    tokens = next(f for f in body["figures"] if f["name"] == "tokens_per_s_per_gpu")
    assert f"{tokens['ratio']:.2f}" == said.group(1)


@pytest.mark.parametrize("gpus", ["¹", "²3"])
def test_a_superscript_digit_for_gpus_is_refused_not_a_500(client, gpus):
    """Found by test_runs_routes' fuzz while checking finding 6: '¹'.isdigit() is True and
    int('¹') raises, so the form answered 500."""
    r = client.post("/episodes/recipe-3d/your-run", data={"log": "x", "gpus": gpus})
    assert r.status_code == 422 and "a whole number" in r.text


def test_finding_7_step_11s_decide_has_no_option_the_step_already_prices(client):
    """recipe-decide-mfu offered "Full recomputation", whose 39.6% MFU steps 10 and 11 print
    before the drill is answered. Its place is TP16 x PP2, which must be worked out: the
    bubble it saves against the TP it sends over InfiniBand (the engine's figures)."""
    from app.lesson_drills.recipe import MFU_CHOICES
    from app.routers.recipe import VIEW, facts

    drill = next(d for d in VIEW.drills if d.id == "recipe-decide-mfu")
    options = {o.key: o for o in drill.judge()}
    assert "full" not in options and "Full recomputation" not in drill.question
    seed = facts()["seed"]["params"]
    printed = {o.figure for o in options.values()}
    for n in (10, 11):
        step = _step(client, "/episodes/recipe-3d", n)
        shown = {f"{float(x):.1f}%" for x in re.findall(r"(\d+\.\d)%", step)}
        assert not (printed - {options[k].figure for k, o in options.items() if o.right}) & shown
    wide = client.get("/api/recipe", params={**seed, **MFU_CHOICES["tp16pp2"]}).json()
    assert wide["fits"] and options["tp16pp2"].figure == f"{wide['mfu']:.1%}"
    assert "crosses InfiniBand" in options["tp16pp2"].why


def test_finding_9_ep08_limits_raise_the_next_steps_question(client):
    """Step 8's limit (what a framework cannot say) did not lead to step 9 (re-plan after a
    failure), step 9's ("try a new model") to step 10 (the same plan on H100s), step 11's
    ("the planner below") to step 12 (overlap). Each now names the next step's question."""
    def limit(n: int) -> str:
        return _step(client, "/episodes/recipe-3d", n).split("Limit.")[1]

    assert "when nodes fail, the plan itself must change (step 9)" in limit(8)
    assert "Faster GPUs keep it but change what each part costs (step 10)" in limit(9)
    assert "what can hide behind what (step 12)?" in limit(11)
