"""EP12's cheat sheet, round-18 cold reading C (issue 36): each line's link opens its step at
the line's own example (the linked lab's API at the link's query gives the line's result), the
FP8 line never turns a missing figure into a claim about the hardware, the DP line never pairs
an H100's rate with another GPU's link, the offload line takes the GPU's own host link, and
the terms a line prints are enough to work its result out."""

from urllib.parse import parse_qsl, urlsplit

import pytest

from labs.hardware.gpus import get_gpu

API = {"memory": "/api/memory", "data-parallel": "/api/dp", "zero": "/api/zero",
       "tensor-parallel": "/api/tp", "pipeline": "/api/pipeline", "context-parallel": "/api/cp",
       "experts": "/api/moe", "recipe-3d": "/api/recipe", "rl-placement": "/api/placement",
       "low-precision": "/api/precision", "failures": "/api/failures"}


def _step_flops(share: str):
    """A recipe answer's FLOPs of one sequence, from its utilisation: share × step × GPUs ×
    the link's GPU's peak, over the step's sequences."""
    def flops(r: dict, query: dict) -> float:
        peak = get_gpu(query["gpu"]).bf16_flops
        return r[share] * r["step_s"] * r["gpus"] * peak / (
            r["tokens_per_step"] / r["plan"]["seq_len"])
    return flops


def _state(r: dict) -> float:
    """The whole model's state from EP10's ledger: its state parts per GPU (the FP8 copies on
    the linear layers alone, 6d15700), times the ways TP splits the bf16 weights."""
    parts = r["ledger"]["parts"]
    ways = 2 * r["params"] / parts["weights"]
    state = ("weights", "fp8_weights", "gradients", "master_weights", "optimizer_moments")
    return ways * sum(parts[k] for k in state if k in parts)


# What each line's result is in its linked lab's API answer (None: the line's own field).
FIELD = {
    "state16": "state_bytes", "state18": "state_bytes", "inference": "state_bytes",
    "activations": lambda r: r["breakdown"]["activations"],
    "activations_none": lambda r: r["breakdown"]["activations"],
    "activations_flash": lambda r: r["breakdown"]["activations"],
    "activations_full": lambda r: r["breakdown"]["activations"],
    "kv_cache": lambda r: r["breakdown"]["kv_cache"], "min_gpus": "min_gpus",
    "ring": "allreduce_bytes_per_gpu", "dp_speedup": "speedup",
    **{f"zero{k}": "state_bytes" for k in range(4)},
    "zero_traffic": lambda r: r["traffic"][3]["ratio_to_zero0"],
    "tp": "comm_bytes", "bubble": "bubble_fraction", "bubble_interleaved": "bubble_fraction",
    "bubble_zb": "bubble_fraction", "cp_contiguous": "busiest_pairs",
    "cp_zigzag": "busiest_pairs", "cp_kv": "comm_bytes_per_gpu",
    "moe_params": lambda r: r["params"] / r["active_params"],
    "moe_a2a": lambda r: max(r["dispatch_bytes_per_gpu"]),
    "flops_6nd": _step_flops("mfu"), "flops_8nd": _step_flops("hfu"),
    "mfu": "mfu", "hfu": "hfu", "step": "step_s",
    "serving": "rollout_memory_bytes", "colocated": "colocated_bytes",
    "state_fp8-delayed": _state, "state_fp8-blockwise": _state, "state_mxfp8": _state,
    "lora_params": lambda r: r["finetune"][1]["trainable_params"],
    "qlora_base": lambda r: r["finetune"][2]["breakdown"]["weights"]
    + r["finetune"][2]["breakdown"]["quant_constants"],
    "fp8_speedup": lambda r: r["speed"]["speedup"],
    "offload": lambda r: r["offload"]["hidden_share"],
    "young": "young_s", "goodput": lambda r: r["best"]["goodput"],
}
STEP_FLOPS = (FIELD["flops_6nd"], FIELD["flops_8nd"])
ROUNDED = {"dp_speedup": 0.005}  # EP02's API gives its speed-up to 2 decimals


@pytest.mark.parametrize("params", [{}, {"gpu": "a100-80gb"}, {"gpu": "mi300x", "tp": 4},
                                    {"model": "mixtral-8x7b", "gpu": "rtx-4090", "dp": 16}])
def test_each_lines_link_reproduces_its_result(client, params):
    """Finding 6: a line's link opens its lab at the same example, so the linked API answers
    the line's result (the TP line's 587 MB with SP, not EP04's default 470; EP02's 1.98 at
    b·m·s, not 1.93; EP09's rollout GPU of the recipe it links)."""
    lines = client.get("/api/cheatsheet", params=params).json()["lines"]
    assert {ln["key"] for ln in lines} == set(FIELD)
    for line in lines:
        if line["result"] is None:
            continue
        url = urlsplit(line["link"])
        answer = client.get(f"{API[url.path.rsplit('/', 1)[-1]]}?{url.query}")
        assert answer.status_code == 200, line["link"]
        field, query = FIELD[line["key"]], dict(parse_qsl(url.query))
        if not callable(field):
            got = answer.json()[field]
        else:
            got = field(answer.json(), query) if field in STEP_FLOPS else field(answer.json())
        want = line["result"]["value"]
        assert got == pytest.approx(want, rel=1e-6, abs=ROUNDED.get(line["key"], 0)), \
            (line["key"], line["link"], got, want)


def lines_of(client, **params) -> dict:
    return {ln["key"]: ln for ln in client.get("/api/cheatsheet", params=params).json()["lines"]}


def terms(line) -> dict:
    return {t["symbol"]: t for t in line["terms"]}


@pytest.mark.parametrize(("gpu", "model"), [("mi300x", "llama-3.1-70b"),
                                            ("rtx-4090", "llama-3.1-8b")])
def test_fp8_is_timed_on_gpus_with_fp8_tensor_cores(client, gpu, model):
    """Finding 1: the MI300X (2,614.9 TFLOP/s dense FP8) and the RTX 4090 (330.3 with FP32
    accumulate) were said to have no FP8 tensor cores: their presets lacked the figure. (Fix
    E: the line times EP10's TP 8 × ZeRO-1 layout, which holds a 70B on no 24 GB card, so the
    RTX 4090 times the 8B.)"""
    body = client.get("/api/cheatsheet", params={"gpu": gpu, "model": model}).text
    assert "no FP8" not in body and "FP8 tensor cores" not in body
    line = lines_of(client, gpu=gpu, model=model)["fp8_speedup"]
    assert line["result"]["value"] > 1
    k = get_gpu(gpu).kernels
    assert f"{k.fp8_flops / 1e12:,.1f} TFLOP/s" in terms(line)["r"]["meaning"]


def test_a_gpu_without_an_fp8_figure_says_the_lab_lacks_it(client):
    note = lines_of(client, gpu="a100-80gb")["fp8_speedup"]["note"]
    assert "The lab has no FP8 rate for the NVIDIA A100" in note and "tensor cores" not in note


def test_fp8_speedups_r_names_both_mamf_shares(client):
    """Finding 12: r = 1.77 against a stated 1,979 vs 989 TFLOP/s; both MAMF shares named."""
    r = terms(lines_of(client)["fp8_speedup"])["r"]
    k = get_gpu("h100-sxm").kernels
    # Round-27 reading B, finding 4: to the places at which they redo r's 3 places.
    assert f"{k.matmul_efficiency_fp8:.2%}" in r["meaning"]
    assert f"{k.matmul_efficiency:.2%}" in r["meaning"]


@pytest.mark.parametrize("gpu", ["a100-80gb", "rtx-4090", "mi300x"])
def test_the_dp_line_never_pairs_an_h100s_rate_with_another_gpus_link(client, gpu):
    """Finding 2: with an A100 the line gave 674 TFLOP/s (an H100's) on NVLink 3. EP02 times
    H100 servers: the line is pinned to them, link and rate, and says so."""
    t = terms(lines_of(client, gpu=gpu)["dp_speedup"])
    h100 = get_gpu("h100-sxm")
    assert t["rate"]["value"] <= h100.bf16_flops and "whatever GPU is chosen" in \
        t["rate"]["meaning"]
    assert "NVLink 4" in t["B_bus"]["meaning"]
    assert t["rate"]["value"] == terms(lines_of(client)["dp_speedup"])["rate"]["value"]


@pytest.mark.parametrize(("gpu", "link"), [("a100-80gb", "pcie-4"), ("rtx-4090", "pcie-4"),
                                           ("h100-sxm", "pcie-5"), ("mi300x", "pcie-5")])
def test_offload_takes_the_gpus_own_host_link(client, gpu, link):
    """Findings 3 and 14: every GPU was given PCIe 5 (the A100 SXM4 has PCIe 4.0), and the
    rate t_copy divides by was not printed."""
    assert client.get("/api/precision", params={"gpu": gpu, "offload": 100}).json()[
        "offload"]["link"] == link
    t = terms(lines_of(client, gpu=gpu)["offload"])
    assert t["t_copy"]["value"] == pytest.approx(t["A_layer"]["value"] / t["B_host"]["value"])
    assert get_gpu(gpu).host_link_source


def test_no_recomputation_says_unfused_and_has_a_flash_line(client):
    """Finding 10: the 263 GB line is the unfused attention of 2021-22; fused attention keeps
    no scores, the lab's flash mode, the selective line's bytes."""
    lines = lines_of(client)
    assert "unfused attention (2021–22 kernels)" in lines["activations_none"]["title"]
    assert lines["activations_flash"]["result"]["value"] == \
        lines["activations"]["result"]["value"] < lines["activations_none"]["result"]["value"]


def test_underivable_lines_print_what_their_result_needs(client):
    """Findings 11, 13, 15, 25, 27: ZB-H1's formula, the serving KV's GPUs and chunk, whose
    pairs 26 are, ZeRO-3's 212 GB already holding both gathers, which way 15 GPUs errs."""
    lines = lines_of(client)
    assert "(p−1)(F+I−W)" in lines["bubble_zb"]["formula"]
    kv, work = terms(lines["serving"])["KV"], terms(lines["serving"])["workspace"]
    assert "2 KV heads over 2 GPUs" in kv["meaning"]
    assert "8,192-token prefill chunk" in work["meaning"]
    pairs = lines["cp_contiguous"]["result"]
    assert "rank 1, the busiest" in pairs["meaning"] and "= 5 + 6 + 7 + 8" in pairs["meaning"]
    assert sum((5, 6, 7, 8)) == pairs["value"]
    assert "two weight all-gathers" in terms(lines["zero_traffic"])["ZeRO-3"]["meaning"]
    assert "errs high" in terms(lines["min_gpus"])["M"]["meaning"]
