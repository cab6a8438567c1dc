"""Round-27 cold reading A (EP06's layout decide, EP08 steps 8/12/13, Your run, /api/gpus):
each finding, pinned on the behaviour it fixes."""

import re


def test_finding_1_the_layout_decides_bytes_a_token_redo_its_mb(client):
    """cp-decide-layout's message printed Ulysses' per-token bytes without the (c − 1)/c a rank
    keeps (2,560 B × 131,072 = 336 MB beside the 294 MB it printed); each per-token figure
    times the sequence now gives the MB the same message prints, on the ring's basis."""
    body = client.get("/api/drills/cp-decide-layout", params={"answer": "ulysses16"}).json()
    text = body["message"]
    mb = dict(re.findall(r"(ring over CP 2|Ulysses over CP 8|over CP 16) ([\d.,]+) MB", text))
    per = [int(b.replace(",", "")) for b in re.findall(r"= ([\d,]+) B at CP", text)]
    assert abs(per[0] * 131072 / 1e6 - float(mb["Ulysses over CP 8"])) < 1
    assert abs(per[1] * 131072 / 1e6 - float(mb["over CP 16"])) < 1
    assert "(c − 1)/c of its shard's bytes" in text
    assert "2,400 B at CP 16" in text


def test_finding_2_a_hidden_all_to_all_is_drawn_at_its_own_seconds(client):
    """With EP overlap on, the comm lane drew each pass's all-to-all at 4.978 ms, its 5.867 ms
    less the 20/132 SM charge; overlapping a collective does not make it faster. Each pass's EP
    bars now add to the collective's own seconds (the same as without overlap), and the SM
    charge stays on the compute lane; the step time is unchanged by the drawing."""
    from app.routers.recipe import facts
    f = facts()
    on, base = f["ov_ep"]["api"]["timeline"], f["ov"]["api"]["timeline"]

    def lane(line, lane_, phase, states):
        return sum(e["seconds"] for e in line["events"] if e["kind"] == "ep"
                   and e["lane"] == lane_ and e["phase"] == phase and e["state"] in states)

    for phase in ("forward", "backward"):
        own = lane(base, "comm", phase, ("hidden", "exposed"))
        assert own > 0
        assert abs(lane(on, "comm", phase, ("hidden", "exposed")) - own) < 1e-9 * own + 1e-12
        sm = lane(on, "compute", phase, ("sm",))
        assert sm > 0.1 * own  # the SMs lent stay charged on the compute lane
    assert f["ov_ep"]["api"]["step_s"] < f["ov"]["api"]["step_s"]


def _step(client, path: str, n: int) -> str:
    from html import unescape
    html = client.get(path).text
    start = html.index(f'<section class="step" id="step-{n}"')
    body = html[start:html.index("</section>", start)]
    body = re.sub(r'<span class="term-tip".*?</span>', "", body)
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", body)))


def test_finding_3_step_12_states_the_network_and_the_fraction_nccl_reaches(client):
    """Step 12 used a NIC's 48 GB/s without saying the cluster is on InfiniBand NDR or that
    48 GB/s is what NCCL's ring reaches on a 400 Gb/s (50 GB/s) port. Its setup now says so,
    before the first 48 GB/s, from the link preset; step 13's 2 × 48 GB/s names the factor."""
    from labs.hardware.links import UNMEASURED_SCALE_OUT, get_link
    link = get_link("ib-ndr")
    assert link.ring_busbw / link.bandwidth == UNMEASURED_SCALE_OUT  # the same 48 of 50
    twelve = _step(client, "/episodes/recipe-3d", 12)
    said = ("InfiniBand NDR: one 400 Gb/s (50 GB/s) port a GPU, of which NCCL's ring reaches "
            "48 GB/s (0.96, as NVIDIA's nccl-tests measure it)")
    assert said in twelve
    assert twelve.index("InfiniBand NDR") < min(m.start() for m in re.finditer(r"\b48 GB/s",
                                                                              twelve))
    thirteen = _step(client, "/episodes/recipe-3d", 13)
    assert "each with its own NIC (48 GB/s: NDR's 0.96):" in thirteen
