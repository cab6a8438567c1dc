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
