"""Round-23 cold reading R of the cheat sheet (findings 5, 6, 7 and 14): each line's result
follows from the terms it prints, and each points at the step that shows what it says."""

import math
import re

import pytest

from tests.app.test_cheatsheet_round18 import lines_of, terms


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def test_loras_line_prints_the_widths_it_sums(client):
    """Finding 5: "r = 16, L = 80 layers, q and v each = 32.8M" left d_in + d_out to the
    reader. Each adapted matrix's widths are a term, and r × Σ (d_in + d_out) × its count
    gives the result."""
    line = lines_of(client)["lora_params"]
    t = terms(line)
    total = 0
    for key in ("d_in + d_out (q)", "d_in + d_out (v)"):
        d_in, d_out, count = (int(x.replace(",", "")) for x in re.match(
            r"([\d,]+) in, ([\d,]+) out, (\d+) matrices", t[key]["meaning"]).groups())
        assert t[key]["value"] == d_in + d_out
        total += t["r"]["value"] * (d_in + d_out) * count
    assert total == line["result"]["value"]


@pytest.mark.parametrize("model", ["llama-3.1-70b", "deepseek-r1", "qwen3-235b-a22b"])
def test_the_serving_lines_kv_works_its_bytes_a_token(client, model):
    """Finding 6: "16 requests × 5,120 tokens ÷ 2 GPUs = 1.68 GB" left its 41 kB a token to
    be divided out. The term prints a GPU's bytes a token and its parts, and requests ×
    tokens × those bytes give the KV figure (MLA's latent is whole on every GPU)."""
    kv = terms(lines_of(client, model=model)["serving"])["KV"]
    found = re.search(r"(?:⌈(\d+) / (\d+)⌉ whole requests|(\d+) requests) × ([\d,]+) tokens"
                      r".*? × ([\d.]+) kB a token on a GPU \((\d+) layers × (.*?) × (\d) B",
                      kv["meaning"])
    assert found, kv["meaning"]
    c, groups, plain, tokens, kb, layers, shape, dtype = found.groups()
    requests = math.ceil(int(c) / int(groups)) if c else int(plain)
    parts = [int(x) for x in re.findall(r"\d+", shape)]
    per_layer = (parts[0] + parts[1]) if "latent" in shape else parts[0] * parts[1] * parts[2]
    assert int(layers) * per_layer * int(dtype) == pytest.approx(float(kb) * 1e3, rel=1e-3)
    assert requests * _number(tokens) * float(kb) * 1e3 == pytest.approx(kv["value"], rel=2e-3)


def test_goodputs_step_says_where_it_comes_from(client):
    """Finding 7: the goodput line rounded Daly's interval to "whole steps of 138.8 s" and
    never said where 138.8 s comes from: Llama 3's rate on the example's GPUs, worked."""
    tau = terms(lines_of(client)["goodput"])["τ"]["meaning"]
    step = _number(re.search(r"whole steps of ([\d,.]+) s", tau).group(1))
    p, tokens, gpus, rate, big, big2, here = re.search(
        r"6 × ([\d.]+)B parameters[^×]* × ([\d,]+) tokens ÷ \(([\d,]+) × (\d+) TFLOP/s\) = "
        r"([\d.]+) s on its ([\d,]+) GPUs, × [\d,]+ / ([\d,]+) here", tau).groups()
    worked = 6 * float(p) * 1e9 * _number(tokens) / (_number(gpus) * float(rate) * 1e12)
    # Round 24 (B, finding 12): the step as the lab takes it, to 4 figures on Llama 3's
    # 16,384 GPUs, then scaled to the example's: the printed parts give the printed step.
    assert f"{worked:.4g}" == big and big2 == gpus
    assert round(float(big) * _number(gpus) / _number(here), 1) == step



def test_fp8s_e_points_at_the_step_where_the_sync_is_exposed(client):
    """Finding 14: the FP8 line's e said "EP10 step 8 shows a state where it is not" zero,
    but step 8's states hide the sync (e = 0 in its why); step 9's one micro-batch exposes it."""
    from app.routers.precision import facts

    e = terms(lines_of(client)["fp8_speedup"])["e"]["meaning"]
    # Fix E: the line now times step 9's own 70B state, so its e is the one step 9 works.
    step = int(re.search(r"micro-batches: EP10 step (\d+)\)", e).group(1))
    html = client.get("/episodes/low-precision").text
    section = html[html.index(f'id="step-{step}"'):html.index(f'id="step-{step + 1}"')]
    speed = facts()["te70_m1"]["api"]["speed"]
    sync = next(p for p in speed["parts"] if p["name"] == "zero")
    assert sync["fp8_s"] > sync["bf16_s"]  # the shorter backward exposes some of the sync
    assert "microbatches=1" in section.replace("&amp;", "&") or "1 micro-batch" in section
