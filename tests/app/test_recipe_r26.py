"""Round-26 cold reading A on EP08 step 12: what the "EP overlap on" link shows (finding 4),
the dense ring's 192 GB/s (finding 5) and the lab's bf16 buckets against Megatron's fp32
default (finding 8)."""

from app.charts.units import fmt_ms
from app.routers.recipe import compute_end, facts
from tests.app.test_recipe_routes import _prose


def _twelve(client) -> str:
    html = client.get("/episodes/recipe-3d").text
    return html.split('id="step-12"')[1].split('id="step-13"')[0]


def test_step_12_says_ep_overlaps_saving_returns_as_dp_wait_on_the_drawn_micro_batch(client):
    """4. With EP overlap on, EP's exposed time falls 11.73 -> 1.78 ms but DP's rises
    120.34 -> 130.23 ms, so the drawn micro-batch's compute stream ends where it did; the
    step gains on the other micro-batches. The why says so, from the engine's states."""
    f = facts()
    on, base = f["ov_ep"]["api"], f["ov"]["api"]
    e_on, e0 = on["timeline"]["exposed_s"], base["timeline"]["exposed_s"]
    saved, lost = e0["ep"] - e_on["ep"], e_on["dp"] - e0["dp"]
    assert saved > 0 and lost > 0.9 * saved  # the saving comes back, nearly all of it
    assert abs(compute_end(on["timeline"]) - compute_end(base["timeline"])) < 0.01 * saved
    assert on["step_s"] < base["step_s"]
    why = _prose(_twelve(client).split('id="why-recipe-overlap"')[1].split('class="limit"')[0])
    assert (f"the saving returns as DP wait, {e0['dp'] * 1e3:.2f} → {e_on['dp'] * 1e3:.2f} ms"
            in why)
    mb = f["ov"]["params"]["microbatches"]
    assert (f"The step gains on the other {mb - 1} micro-batches: {fmt_ms(base['step_s'])} → "
            f"{fmt_ms(on['step_s'])}") in why


def test_step_12_derives_the_dense_rings_192_gb_s_from_one_nic_each(client):
    """5. "(192 GB/s)" for a 32-rank ring, 4 a node, came before any NIC's 48 GB/s: NCCL runs
    a ring a NIC, each with a quarter of the bucket, so 4 x 48 GB/s."""
    rings = facts()["lv_consts"]["moe_rings"]
    dense, experts = rings["dense"], rings["experts"]
    assert dense["busbw"] == dense["per_node"] * experts["busbw"] and experts["per_node"] == 1
    why = _prose(_twelve(client).split('id="why-recipe-overlap"')[1].split('class="limit"')[0])
    nic = f"{experts['busbw'] / 1e9:.0f}"
    assert (f"({dense['per_node']} × {nic} GB/s = {dense['busbw'] / 1e9:.0f} GB/s: a ring a "
            f"NIC, each 1/{dense['per_node']} of the bucket)") in why


def test_step_12_says_the_lab_reduces_bf16_where_megatron_defaults_to_fp32(client):
    """8. The step's state is "every overlap as Megatron runs it", but the lab's buckets carry
    bf16 gradients, which Megatron reduces only with --grad-reduce-in-bf16; its default keeps
    them in fp32, twice each bucket's bytes: the lab errs fast, and the limit says so."""
    k = facts()["lv_consts"]
    assert k["grad_bytes"] == 2
    limit = _prose(_twelve(client).split('class="limit"')[1].split("</p>")[0])
    assert "--grad-reduce-in-bf16" in limit
    assert (f"Megatron's default reduces them in fp32, twice each bucket's "
            f"{k['moe_bucket_params'] * k['grad_bytes'] / 1e6:.0f} MB, so here too the lab "
            "errs fast") in limit


def test_your_run_sets_megatrons_activation_estimate_beside_the_labs(client):
    """9. Your run printed Megatron's weight-and-optimizer estimate beside the ledger (they
    agree, 24.09 GB) but not the log's activation estimate (20,520.08 MB, 21.52 GB), which
    disagrees with the lab's 22.82 GB: both halves are set side by side now."""
    from pathlib import Path

    from app.routers.runs import PATH

    log = (Path(__file__).resolve().parents[1] / "fixtures" / "runs" /
           "megatron_llama3_8b.log").read_text()
    body = client.post("/api/runs/parse", json={"log": log, "gpu": "h100-sxm"}).json()
    act = body["measured"]["theory_activation_bytes"]
    assert act == 20520.08 * 2 ** 20
    note = next(n for n in body["comparison_notes"] if n.startswith("Megatron's own"))
    assert f"Its activation estimate: {act / 1e9:.2f} GB; the lab's: " in note
    lab = float(note.split("the lab's: ")[-1].split(" GB")[0])
    assert f"{abs(lab - act / 1e9):.2f} GB" in note and ("more" if lab > act / 1e9 else
                                                          "less") in note
    page = client.post(PATH, data={"log": log, "gpu": "h100-sxm"}).text
    assert f"Its activation estimate: {act / 1e9:.2f} GB" in page.replace("&#39;", "'")
