"""Fix E: four small errors an expert reading found.

1. EP02 step 1 bounded the PCIe busBW's error with a Sapphire Rapids host's socket link, but
   that host is PCIe 5.0, where the H100 PCIe runs at Gen5, not at the Gen4 the preset times.
   The bound is now a PCIe 4.0 host's (AMD Zen 3: NCCL's AMD_ZEN34_BW)."""

import pytest

from app.routers.data_parallel import facts as dp_facts
from app.routers.data_parallel import socket_bound
from labs.hardware.links import get_link
from labs.hardware.nccl_constants import SOCKET_LINK
from tests.app.test_round22_coldP import _step
from tests.app.test_zero_routes import visible_text


def test_ep02_pcie_bound_is_a_pcie_4_hosts_socket_link(client):
    one = visible_text(_step(client.get("/episodes/data-parallel").text, 1))
    busbw, zen = get_link("pcie-4").ring_busbw / 1e9, SOCKET_LINK["zen3-4"] / 1e9
    assert f"prices that link at {zen:g} GB/s on an AMD Zen 3 host, a PCIe 4.0 host" in one, one
    assert f"by at least {busbw:.2f} ÷ {zen:g} = {busbw / zen:.2f}×" in one
    # Sapphire Rapids no longer bounds it: the page says the card runs at Gen5 there.
    srp = SOCKET_LINK["sapphire-rapids"] / 1e9
    assert f"÷ {srp:g} =" not in one
    assert "is PCIe 5.0: the card runs at Gen5 there" in one
    # Step 2's note nets the same host's link.
    assert socket_bound(dp_facts()["pcie8"]["api"])["rate"] == SOCKET_LINK["zen3-4"]
    two = visible_text(_step(client.get("/episodes/data-parallel").text, 2))
    assert f"with a Zen 3 host's socket link, {zen:g} GB/s, alone" in two


def test_ep01_step_6_names_deepseeks_e5m6_output_projection_input_and_bounds_it(client):
    """2. EP01 step 6's note kept all 14 bytes of saved matmul inputs in FP8; DeepSeek-V3
    sec 3.3.3 keeps the output projection's in E5M6 (1.5 B + its 1x128 scale). The note names
    the exception and computes the figure it gives from the same terms."""
    from app.charts.units import fmt_bytes
    from app.routers.memory import facts

    f = facts()
    fa, acts = f["fp8_acts"], f["deepseek_fp8"]["api"]["breakdown"]["activations"]
    assert (fa["out_proj"], fa["e5m6"]) == (2, 1.5 + 4 / 128)
    shape = fa["tokens"] * fa["hidden"] * fa["layers"]
    by_hand = 34 - 12 * (1 - (1 + 4 / 128) / 2) - 2 * (1 - (1.5 + 4 / 128) / 2)
    assert fa["finer"] == pytest.approx(by_hand)
    assert fa["finer_bytes"] == pytest.approx(by_hand * shape)
    assert fmt_bytes(fa["finer_bytes"]) == "49.6 GB" and fmt_bytes(acts) == "48.7 GB"
    note = " ".join(visible_text(_step(client.get("/episodes/memory").text, 6)).split())
    assert ("DeepSeek-V3 keeps the output projection's input finer, in "
            "E5M6 (§3.3.3), 1.5 + 4/128 = 1.53 B") in note, note
    assert (f"B: {fa['coefficient']:.1f} + 2× (1.53 − 1.03) ÷ 2 = {by_hand:.1f} bytes, "
            f"{fmt_bytes(by_hand * shape)}: the lab errs low") in note, note


def test_cheat_sheets_fp8_line_works_ep10_step_9s_70b_state_and_links_to_it(client):
    """3. The cheat sheet's FP8 line timed the 70B on one GPU (a plan that cannot hold its
    state: e = 0, 1.52×) and linked to EP10 step 8, whose why works the 8B. It now times EP10's
    70B layout (TP 8, ZeRO-1 over DP 8) with the function EP10's why uses, and links to step 9
    at that state, whose why prints the same g, c, e and speed-up."""
    from urllib.parse import parse_qsl, urlsplit

    from app.routers.cheatsheet import PATH
    from app.routers.precision import facts
    from labs.precision.speed import amdahl_terms

    line = next(ln for ln in client.get("/api/cheatsheet").json()["lines"]
                if ln["key"] == "fp8_speedup")
    t = {x["symbol"]: x["value"] for x in line["terms"]}
    te70 = facts()["te70"]
    want = amdahl_terms(te70["result"].speed)
    assert {k: t[k] for k in "grce"} == {k: want[k] for k in "grce"}
    assert line["result"]["value"] == want["speedup"] and t["e"] > 0
    url = urlsplit(line["link"])
    assert url.fragment == "step-9"
    query = dict(parse_qsl(url.query))
    assert {k: query[k] for k in te70["params"]} == {k: str(v) for k, v in te70["params"].items()}
    # The linked step's why prints the same terms and speed-up.
    html = client.get(f"{url.path}?{url.query}").text
    nine = " ".join(visible_text(_step(html, 9)).split())
    assert (f"1 / ({1 - t['g']:.3f} + {t['g'] / t['r']:.3f} + {t['c']:.3f} + {t['e']:.3f}) = "
            f"{want['speedup']:.2f}×") in nine, nine
    # The cheat sheet's page prints the line's terms at the figures its API gives.
    sheet = " ".join(visible_text(client.get(PATH).text).split())
    assert f"{want['speedup']:.2f}" in sheet
    assert "one GPU here, no DP" not in sheet


def test_ep08_step_8_quotes_deepspeeds_pipeline_module_closed_config_and_fsdp2s_zero_1(client):
    """4. EP08 step 8 quoted DeepSpeed's pipeline degree as a config key, "pipeline":
    {"stages": 4, which its pipeline engine does not read (the model's PipelineModule(layers,
    num_stages=...) sets it: deepspeed/runtime/pipe/module.py); its quote opened
    "zero_optimization": { and "tensor_parallel": { and never closed them; and the FSDP2
    quote's ZERO_STAGE = 1 went unremarked in the limit."""
    import html as html_lib
    import json
    import re

    from tests.app.test_recipe_routes import _step

    step = _step(client.get("/episodes/recipe-3d").text, 8)
    quote = step.split('data-testid="exports-quoted"')[1].split("</div>")[0]
    blocks = [html_lib.unescape(b) for b in re.findall(r"<pre><code>(.*?)</code></pre>",
                                                       quote, re.S)]
    config = blocks[1]
    assert config.count("{") == config.count("}") and config.startswith("{")
    assert config.rstrip().endswith("}")
    # With its elisions taken out (and the commas they leave fixed) it is JSON.
    trimmed = re.sub(r",(\s*[}\]])", r"\1", "\n".join(
        ln for ln in config.splitlines() if ln.strip() != "…"))
    parsed = json.loads(trimmed)
    assert parsed["zero_optimization"] == {"stage": 1}
    assert "tensor_parallel" not in parsed  # round 26 A #1: AutoTP is not the pipeline's
    assert '"stages"' not in config
    assert blocks[2].startswith("model = PipelineModule(layers=..., topology=")
    text = " ".join(visible_text(step).split())
    assert "which the pipeline engine takes from the model, not the config" in text
    assert "FSDP2 has no ZeRO-1: the nearest is ZeRO-2" in text.split("Limit.")[1]
    assert "ZERO_STAGE = 2  # FSDP2's nearest to the plan's ZeRO-1" in blocks[3]  # r27 A #9
