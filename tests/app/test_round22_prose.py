"""Round-22 cold readings (issue 36): three sentences that said a figure or a rule wrongly.

EP02 step 5 multiplied by 25 MiB and divided by 14 GB (P, finding 12): one unit, 26.2 MB, the
bucket menu's. EP12 step 2 said the loss keeps "three more tensors" and named four (R, finding
9). EP05 step 4's limit said the micro-batches "must split into equal rounds of p" (Q, finding
3): PyTorch's Interleaved1F1B runs max(1, m // p) equal rounds (the lab refuses m that do not
split, test_parser), and only Megatron-LM long required m to be a multiple of p."""

import re

from app.routers.data_parallel import facts as dp_facts
from tests.app.test_zero_routes import visible_text


def _step(client, path: str, n: int) -> str:
    html = client.get(path).text
    step = html.split(f'id="step-{n}"')[1].split("</section>")[0]
    return visible_text(re.sub(r'<span class="term-tip".*?</span>', "", step, flags=re.S))


def test_ep02_step_5s_bucket_fill_is_in_one_unit(client):
    five = _step(client, "/episodes/data-parallel", 5)
    bo = dp_facts()["bad_overlap"]["api"]
    assert f"{26_214_400 / 1e6:.1f} MB ÷ 14 GB" in five, five
    assert "25 MiB ÷ 14 GB" not in five
    # 14 GB is the 7B's bf16 gradients, and the fill is the backward's share of them
    assert bo["first_bucket_fill_s"] * 14e9 == __import__("pytest").approx(
        bo["backward_s"] * 26_214_400, rel=0.01)


def test_ep12_step_2_counts_the_tensors_it_names(client):
    two = _step(client, "/episodes/playground", 2)
    said = two.split("The loss keeps ")[1].split(" more tensors")[0]
    assert said == "four", said
    named = ("FP32 logits", "final norm's bf16 input and output", "token ids")
    assert all(n in two for n in named)  # the logits, the norm's two, the ids: four


def test_ep05_step_4s_limit_states_the_rounds_rule_as_pytorch_runs_it(client):
    four = _step(client, "/episodes/pipeline", 4)
    limit = four.split("Limit.")[1]
    assert "equal rounds of p" not in limit
    assert "equal rounds, m ÷ p of them rounded down, at least one" in limit
    assert "Megatron-LM long required m to be a multiple of p" in limit
