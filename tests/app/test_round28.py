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
