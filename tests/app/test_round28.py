"""Round-28 cold reading (r28): EP10 step 5's 80 GB (finding 2), the printed digits of the
playground's step 5 and EP08's steps 4, 5 and 13 (findings 4, 5, 7) and the setups of EP08's
steps 12 and 13 (finding 6)."""

from tests.app.test_recipe_routes import _prose


def _step(client, path: str, step: int) -> str:
    html = client.get(path).text
    return _prose(html.split(f'id="step-{step}"')[1].split(f'id="step-{step + 1}"')[0])


def test_finding_2_low_precision_step_5_gives_the_80e9_bytes_to_the_lab(client):
    """The datasheet says 80 GB, no byte count: reading it as 80 x 10^9 B is the lab's, as
    EP01 says it."""
    step = _step(client, "/episodes/low-precision", 5)
    assert "the datasheet's 80 × 10⁹ B" not in step
    assert "the marketed 80 GB, which the lab's fit check reads as 80 × 10⁹ B" in step


def test_finding_4_playground_step_5_prints_the_sends_input_to_its_sum(client):
    """2 x 7/8 x 134 MB is 234.5 MB, not the 234.9 printed: the input is printed to 0.1 MB."""
    step = _step(client, "/episodes/playground", 5)
    told = step.split("wide × 2 B = ")[1].split(")")[0]
    assert told.endswith(" MB") and "." in told, told
    sent = float(step.split(f"wide × 2 B = {told}) = ")[1].split(" MB")[0])
    assert abs(2 * 7 / 8 * float(told[:-3]) - sent) < 0.06, (told, sent)


def test_finding_5_ep08_steps_4_and_5_print_the_activations_to_the_division(client):
    """183 GB / 8 printed 22.8 GB: the 182.5 GB is printed in both steps."""
    four, five = _step(client, "/episodes/recipe-3d", 4), _step(client, "/episodes/recipe-3d", 5)
    whole = five.split(" GB / 8 = ")[-2].split("activations ")[-1], five.split(" GB / 8 = ")[-1]
    assert "." in whole[0], whole[0]
    assert abs(float(whole[0]) / 8 - float(whole[1].split(" GB")[0])) < 0.051, whole
    assert f"layers = {whole[0]} GB" in four


def test_finding_7_ep08_step_13_prints_fc2s_loss_once_and_names_both_parts(client):
    """fc2's chunking loss was 0.21 ms then 0.213 ms, beside QKV's 0.213 ms chunk: printed
    0.213 ms both times, and the sum names QKV's whole all-gather and fc2's slower chunks."""
    step = _step(client, "/episodes/recipe-3d", 13)
    loss = step.split("cut against ")[1].split(" whole: ")[1].split(" ms")[0]
    assert len(loss.split(".")[1]) == 3, loss
    assert "So all leaves QKV's whole all-gather, " in step
    assert f"fc2's slower chunks, {loss} ms" in step


def test_finding_6_ep08_steps_12_and_13_state_sequence_and_micro_batches(client):
    """Step 12's why divides the 4,096-token sequence by TP2, step 13's multiplies by 8
    micro-batches: both were only in the try links' URLs."""
    from app.routers.recipe_lesson import facts

    for n, name in ((12, "ov"), (13, "lv")):
        p = facts()[name]["params"]
        setup = _step(client, "/episodes/recipe-3d", n)
        assert (f"{p['microbatches']} micro-batches of one {p['seq_len']:,}-token sequence a step"
                in setup), n


def test_finding_8_low_precision_step_5_says_the_fp8_copy_is_on_the_linear_layers(client):
    """Step 5's 15 B gave the FP8 copy to every parameter; the ledger (and the cheat sheet's
    14.0 + P_lin x 1) bills it on the linear layers' parameters alone: the why says so, with
    the ledger's own FP8 bytes (TP's shard times TP) as P_lin."""
    from app.routers.precision_lesson import facts

    f = facts()["deepseek70"]
    p_lin = f["api"]["ledger"]["parts"]["fp8_weights"] * f["params"]["tp"] / 1e9
    p_all = f["result"].input.model.params / 1e9
    step = _step(client, "/episodes/low-precision", 5)
    assert (f"The ledger puts the 1 B on the linear layers' {p_lin:.1f}B of {p_all:.1f}B only"
            in step)
    bpp = f["api"]["recipes"][5]["bytes_per_param"]
    assert f"{p_lin:.1f}/{p_all:.1f} = {bpp - 1 + p_lin / p_all:.2f} B" in step


def test_finding_9_current_nccls_floor_says_simple_adds_the_fabrics_latency_twice(client):
    """Current tuning.cc adds the network's latency twice on Simple (the flush): the
    playground's step 5 and EP07 step 7 said "plus the fabric's" once."""
    play = _step(client, "/episodes/playground", 5)
    assert "µs a hop plus twice the fabric's:" in play
    moe = _step(client, "/episodes/experts", 7)
    assert "+ 2 × the fabric's)) µs ≥" in moe
    assert "+ the fabric's)) µs" not in moe
