"""Round-26 cold reading B (EP09 steps 2-4, EP10 steps 5 and 9): each finding, pinned on the
behaviour it fixes."""

import re
from html import unescape

import pytest

from app.routers.rl_lesson import facts
from labs.model.presets import get_model
from labs.rl.serving import CHUNKED_PREFILL_TOKENS, serving_workspace


def step_places(parts, colocated: bool, step: float) -> int:
    """The fewest places (one at least) at which the printed parts add to the step rounded
    once, as a student redoes the sum."""
    for d in (1, 2, 3):
        r, t, y = (round(x, d) for x in parts)
        if f"{(r + t if colocated else max(r, t)) + y:.{d}f}" == f"{step:.{d}f}":
            return d
    return 3


def _step(client, path: str, n: int, params: dict | None = None) -> str:
    html = client.get(path, params=params or {}).text
    start = html.index(f'<section class="step" id="step-{n}"')
    body = html[start:html.index("</section>", start)]
    body = re.sub(r'<span class="term-tip".*?</span>', "", body)
    text = unescape(re.sub(r"<[^>]+>", " ", body))
    return re.sub(r"\s+", " ", text)


def test_finding_1_r1s_workspace_runs_sglangs_chunk_and_scattered_mlps():
    """SGLang's server_args.py divides --chunked-prefill-size by the DP size under DP
    attention, and communicator.py's _compute_mlp_mode runs the dense MLP (moe_dense_tp_size
    1) and, with DeepEP, the shared expert SCATTERED: each GPU of a group on its 1/8 of the
    group's tokens, on whole weights. The old estimate ran every GPU on 8,192 tokens: 772 MB,
    against SGLang's (1,024 × 81,920 ÷ 8 + 128 × 36,864) × 2 B = 30.4 MB."""
    r1 = get_model("deepseek-r1")
    inp = facts()["r1_sep"]["result"].input
    ws = serving_workspace(r1, inp.engine_gpus, inp.serving)
    groups = inp.serving.attn_dp
    group = inp.engine_gpus // groups
    chunk = CHUNKED_PREFILL_TOKENS // groups
    assert ws.attention.tokens == chunk == 1024
    dense = ws.mlps[0][0]
    assert (dense.name, dense.tokens, dense.splits) == ("dense MLP", chunk / group, (1,))
    shared, routed = ws.mlps[1]
    assert (shared.tokens, shared.splits) == (chunk / group, (1,))
    assert routed.tokens == groups * chunk * r1.top_k / inp.engine_gpus
    assert ws.bytes == pytest.approx((1024 * 81920 / 8 + 128 * 36864) * 2)


def test_finding_1_the_cheat_sheets_glm_line_keeps_its_workspace():
    """GLM-4-9B on TP 2 with no DP attention: SGLang's 8,192-token chunk, the MLP ÷ 2
    ((8,192 × 8,704 ÷ 2 + 8,192 × 27,392 ÷ 2) × 2 B = 296 MB), which the reader found right."""
    ws = serving_workspace(get_model("glm-4-9b"), 2)
    assert ws.bytes == pytest.approx((8192 * 8704 / 2 + 8192 * 27392 / 2) * 2)


def test_finding_1_step_3_states_sglangs_rule_and_step_4s_drill_follows(client):
    three = _step(client, "/episodes/rl-placement", 3)
    assert ("SGLang divides its 8,192-token prefill chunk among the 8 groups, 1,024 tokens "
            "each") in three
    assert "a dense layer's MLP, 2 × its 18,432 width, whole, on 1,024 ÷ 8 = 128 tokens" in three
    assert "(1,024 × (24,576 + 24,576 + 16,384 + 16,384) ÷ 8 + 128 × 36,864) × 2 B = 30.4 MB" \
        in three
    assert "8,192 × 36,864" not in three and "772 MB" not in three
    # the drill's workspace and answer are the engine's (groups of 4 at engines of 32)
    from app.routers.rl import T, drill_answer
    four = _step(client, "/episodes/rl-placement", 4)
    assert f"each keeps {T['workspace'] / 1e9:.2f} GB of workspace" in four
    assert T["workspace"] < 0.1e9 and drill_answer() == pytest.approx(
        (max(T["train"], T["rollout"]) + T["overhead"]) / 1e9)
    assert "each keeps 0.94 GB of workspace" not in four


def test_finding_2_sglangs_base_is_what_cuda_gives_a_process(client):
    """--mem-fraction-static takes its share of the free memory CUDA reports at engine start,
    at most the process's 79.1 GiB (84.9 GB, the HBM tip), not the driver's 81,559 MiB."""
    gpu = facts()["r1_sep"]["result"].input.gpu
    process = gpu.cuda_memory_gib * 2**30
    three = _step(client, "/episodes/rl-placement", 3)
    # Round-27 reading B, finding 5: at 2 places (0.7 × 84.9 = 59.43 printed 59.5).
    assert f"0.7 × {process / 1e9:.2f} GB = {0.7 * process / 1e9:.2f} GB" in three
    assert f"at most (1 − 0.7) × {process / 1e9:.2f} GB = {0.3 * process / 1e9:.2f} GB" in three
    assert "81,559 MiB" not in three and "85.5 GB" not in three


@pytest.mark.parametrize("n", [2, 6])
def test_finding_3_each_step_total_is_the_engines_rounded_once(client, n):
    """Step 2 printed 16.20 + 10.56 + 0.93 = 27.69 s where the engine's step is 27.685 s
    (27.68), step 6 69.66 against 69.669: the parts now print at the places at which they add
    to the engine's step rounded once (16.2 + 10.6 + 0.9 = 27.7 s), and the table with them."""
    text = re.sub(r"\( | (?=[,)])", lambda m: m.group(0).strip(),
                  _step(client, "/episodes/rl-placement", n))
    states = {2: ("glm9", "glm9_sep"), 6: ("r1", "r1_sep")}[n]
    for key in states:
        a = facts()[key]["api"]
        colocated = a["placement"] == "colocated"
        parts = [a[f"{k}_seconds"] for k in ("rollout", "train", "sync")]
        d = step_places(parts, colocated, a["step_seconds"])
        r, t, y = (f"{v:.{d}f}" for v in parts)
        head = f"{r} + {t} + {y}" if colocated else f"max({r}, {t}) + {y}"
        assert re.search(re.escape(head) + r"(?: \([^)]*\))? = " +
                         re.escape(f"{a['step_seconds']:.{d}f}") + " s", text), (head, text)
    glm = facts()["glm9"]["api"]
    bench = client.get("/episodes/rl-placement", params=facts()["glm9"]["params"]).text
    table = bench[bench.index("<caption>Phases of one step</caption>"):]
    table = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", table[:table.index("</table>")])))
    # Round 29 C #1 (the switch moves GLM-4-9B's Adam shard too): 27.7 s -> 28.13 s, whose
    # parts add at 2 places (16.20 + 10.56 + 1.37); the table prints the step at the same.
    gd = step_places([glm[f"{k}_seconds"] for k in ("rollout", "train", "sync")], True,
                     glm["step_seconds"])
    assert f"Step (in turn) {glm['step_seconds']:.{gd}f} s" in table
    assert "27.69" not in table


def test_finding_4_the_long_cache_is_the_labs_requests_at_slimes_length(client):
    three = _step(client, "/episodes/rl-placement", 3)
    long = facts()["r1_sep_long"]["api"]["pools"][1]["breakdown"]
    assert f"(the lab's 4 at that length: {long['kv_cache'] / 1e9:.2f} GB )" in three
    assert f"{100 * long['kv_cache'] / long['weights']:.1f}% of the weights" not in three


def test_finding_5_step_2s_swap_says_its_bytes_are_one_gpus_share(client):
    assert "2 × 9.40 GB (9.4B × 2 B ÷ TP 2) ÷ 64 GB/s" in _step(client, "/episodes/rl-placement", 2)


def test_finding_6_ep10_step_5_names_the_e5m6_exception(client):
    five = _step(client, "/episodes/low-precision", 5)
    assert "E4M3 everywhere" not in five
    # Round-27 reading B, finding 1: the linear layers' GEMMs only (DeepSeek-V3 sec 3.3.1).
    assert ("in E4M3 for the linear layers' GEMM inputs (embedding, output head, gating and "
            "attention stay BF16; one cached activation in E5M6: EP01 step 6)") in five


def test_finding_7_the_weight_update_bucket_is_said(client):
    four = _step(client, "/episodes/rl-placement", 4)
    assert ("one weight-update bucket (the buffer the trainer fills with gathered weights "
            "before each transfer to the engine, slime's --update-weight-buffer-size )") in four


def test_finding_8_ep10_step_9_names_r_and_c(client):
    nine = _step(client, "/episodes/low-precision", 9)
    got = re.search(r"g = ([\d.]+)% , r = ([\d.]+)\).*? \(c = ([\d.]+)\).*? \(e = "
                    r"([\d.]+)\): 1 / \(([\d.]+) \+ ([\d.]+) \+ ([\d.]+) \+ ([\d.]+)\)", nine)
    assert got, nine
    g, r, c, e = (float(got[i]) for i in (1, 2, 3, 4))
    assert f"{g / 100 / r:.3f}" == got[6] and got[7] == got[3] and got[8] == got[4]


def test_finding_1_the_cheat_sheets_r1_line_states_sglangs_rule(client):
    """The cheat sheet's serving line for R1 (its recipe's DP attention) prints the same
    function's sum, and says the group's share of the chunk and the scattered MLPs."""
    lines = client.get("/api/cheatsheet", params={"model": "deepseek-r1"}).json()["lines"]
    line = next(x for x in lines if x["key"] == "serving")
    term = next(t for t in line["terms"] if t["symbol"] == "workspace")
    assert ("for its group's 1,024 tokens (SGLang's 8,192-token prefill chunk ÷ 8 attention "
            "groups)") in term["meaning"]
    assert "+ 128 × 36,864) × 2 B" in term["meaning"]
    assert term["value"] == pytest.approx((1024 * 81920 / 8 + 128 * 36864) * 2)
