"""Task fixR (stop 58): open findings in lesson text. Each test fails on 9369e03f.

1. The cheat sheet's "What FP8 buys in time" line refused GLM-4.7 at "2,101.9 GB a GPU"
   without the layout's EP 1 and expert-TP 1 that make it: every GPU holds every expert.
"""

import re

from tests.app.test_cheatsheet_round18 import lines_of
from tests.app.test_zero_routes import visible_text


def _n(text: str) -> float:
    return float(text.replace(",", ""))


def test_glm_fp8_refusal_names_whole_experts_and_redoes_its_gb(client):
    """The refusal names EP 1 and expert-TP 1, counts the experts a GPU holds from the
    model's shape, and its parts add to the GB it quotes (each at its printed digits)."""
    from labs.model.presets import get_model

    glm = get_model("glm-4.7")
    note = lines_of(client, model="glm-4.7")["fp8_speedup"]["note"]
    total = _n(re.search(r": ([\d,.]+) GB a GPU\.", note).group(1))
    assert "EP 1, expert-TP 1" in note, note
    found = re.search(r"all (\d+) experts of each of (\d+) MoE layers whole \((\d+) × (\d+) × "
                      r"([\d,]+) = ([\d.,]+)B parameters\) beside ([\d.,]+)B of the rest.*?: "
                      r"([\d.,]+)B parameters a GPU × 4 B \(16-bit weights and gradients\) = "
                      r"([\d.,]+) GB, \+ ([\d.,]+) GB of FP8 copies.*?\+ ([\d.,]+) GB of "
                      r"optimizer state", note)
    assert found, note
    each, layers, l2, e2, size, experts, rest, params, held, fp8, other = found.groups()
    assert int(each) == int(e2) == glm.experts and int(layers) == int(l2) == glm.moe_layers
    assert _n(size) == glm.expert_size
    assert round(int(layers) * int(each) * _n(size) / 1e9, 2) == _n(experts)
    assert round(_n(experts) + _n(rest), 2) == _n(params)
    assert abs(_n(params) * 4 - _n(held)) < 0.05 + 4 * 0.005
    # Round 30 (task fixZ): the remainder is split into optimizer state, amax history and
    # activations (tests/app/test_fixZ_round30.py works them).
    rest_parts = re.search(r"\+ ([\d.,]+) GB of amax history, \+ ([\d.,]+) GB of "
                           r"activations", note)
    assert abs(_n(held) + _n(fp8) + _n(other) + sum(map(_n, rest_parts.groups())) - total) < 0.25
    # The cheat sheet's page prints it as the API does.
    page = " ".join(visible_text(client.get("/episodes/playground/cheatsheet",
                                            params={"model": "glm-4.7"}).text).split())
    assert f"every GPU holds all {glm.experts} experts" in page


def test_dualpipev_step_is_worked_from_the_last_ranks_wait_and_work(client):
    """Task fixR #2: EP05 step 5 (the brief's "EP08") quoted DualPipeV's 96 F of a 99.5 F
    step read off the chart. The note works it: a rank's work (m × 2 chunks × F + I + W of
    half a stage), the last rank's wait for micro-batch 0 ((p − 1) × ½ F, off the simulated
    timeline), after which that rank never idles; the sum is the step."""
    from app.routers.pipeline_lesson import facts

    f = facts()
    dp, wait = f["dualpipe"]["api"], f["dualpipe_wait"]
    p, m, v = dp["stages"], dp["microbatches"], dp["virtual"]
    assert m * v * 3 / v == dp["busy"][p - 1]
    assert wait == (p - 1) / v and wait + dp["busy"][p - 1] == dp["makespan"]
    text = " ".join(visible_text(client.get("/episodes/pipeline").text).split())
    said = (f"Each rank works {m} × {v} chunks × {3 / v:g} F (half-stage F + I + W) = "
            f"{dp['busy'][0]:g} F. Rank {p - 1} waits {p - 1} × {1 / v:g} = {wait:g} F for "
            f"micro-batch 0, then never idles: {wait:g} + {dp['busy'][p - 1]:g} = "
            f"{dp['makespan']:g} F")
    assert said in text, text[text.find("Each rank works") - 200:][:800]


def _step_words(client, path: str, step: int) -> str:
    html = client.get(path).text
    body = html.split(f'id="step-{step}"')[1].split("</section>")[0]
    return " ".join(visible_text(body).split())


def test_ep09_fp8_load_prints_one_way(client):
    """Task fixR #3: EP09 step 3 printed slime's FP8 load as 18.50 GB in its note and 18.5 GB
    in its limit; EP07 step 3 printed the dispatch's NIC leg as 411 MB (typed, beside a typed
    470 MB) where step 11 divides 411.04 MB. Each now prints one way, from the engine."""
    from app.routers.rl_lesson import facts as rl_facts

    fp8 = rl_facts()["r1_sep"]["api"]["serving_weights"]["fp8_bytes"]
    three = _step_words(client, "/episodes/rl-placement", 3)
    said = set(re.findall(r"(\d+\.\d+) GB", three)) & {f"{fp8 / 1e9:.1f}", f"{fp8 / 1e9:.2f}"}
    assert said == {f"{fp8 / 1e9:.2f}"}, said
    assert f"FP8 load holds {fp8 / 1e9:.2f} GB" in three


def test_ep07_dispatch_megabytes_print_one_way(client):
    """Task fixR #3, EP07: step 3's 470 and 411 MB (typed) against step 11's 411.04 MB."""
    from app.routers.moe import facts as moe_facts

    f = moe_facts()
    v3, e8 = f["v3"]["api"], f["v3_ep8"]["api"]
    copies = v3["dispatch_bytes_per_gpu"][0] * v3["ep"] / (v3["ep"] - 1)
    nic = copies * (v3["ep"] - v3["ep_per_node"]) / v3["ep"]
    assert nic == e8["dispatch_bytes_per_gpu"][0]
    step3 = _step_words(client, "/episodes/experts", 3)
    step11 = _step_words(client, "/episodes/experts", 11)
    assert f"× 2 B = {copies / 1e6:.2f} MB" in step3
    assert step3.count(f"{nic / 1e6:.2f} MB") == 3 and f" {nic / 1e6:.0f} MB" not in step3
    assert f"receives {nic / 1e6:.2f} MB in" in step11


def test_ep07_step_7_says_the_plateau_scales_a_many_node_rings_latency(client):
    """Task fixR #4: a stop-57 cut wrote "tuning.cc scales a ring's latency", as if NCCL
    2.8 scaled every ring's; its plateau factor is for a ring across nodes (``nodes > 1``
    and a large message: labs.hardware.nccl), the 16-node ring here. Held at its cap."""
    from labs.hardware.nccl import RING_PLATEAU

    seven = _step_words(client, "/episodes/experts", 7)
    assert f"tuning.cc scales a many-node ring's latency: {RING_PLATEAU:g} × (" in seven


def test_ep04_split_diagram_glosses_w_o_where_it_is_shown(client):
    """Task fixR #5: the split diagram beside EP04 step 1 labels a box "W_O" that no text on
    the page defined (step 2 says "the output projection"). The figure's key glosses every
    matrix it draws, its details list too, and step 2 names W_O."""
    html = client.get("/episodes/tensor-parallel").text
    figure = html[html.index('<figure id="tp-split"'):]
    key = " ".join(visible_text(figure[figure.index('<figcaption'):
                                       figure.index('</figcaption>')]).split())
    drawn = re.findall(r'data-matrix="([^"]+)"', figure.split("</figure>")[0])
    assert "W_O" in drawn
    for name in dict.fromkeys(drawn):
        assert re.search(rf"{name}: \w", key), (name, key)
    assert "W_O: attention's output projection" in key
    details = " ".join(visible_text(figure.split("</figure>")[1]).split())
    assert re.search(r"W_O ?, attention's output projection: \(a·d\) × h", details), details
    assert "the output projection, W_O, is split by rows" in _step_words(
        client, "/episodes/tensor-parallel", 2)
