"""Ledger fidelity: Megatron-LM's theoretical memory, the pipeline lab's measured peaks, and
the activation models (Korthikanti et al. 2022; Megatron-LM theoretical_memory_usage.py)."""

import pytest

from labs.hardware.gpus import get_gpu
from labs.memory.inputs import MemoryInput
from labs.memory.lab import compute_memory
from labs.model.activations import activation_bytes_per_layer
from labs.model.presets import get_model
from labs.pipeline.inputs import PipelineLabInput
from labs.pipeline.lab import run_pipeline_lab, stage_memory
from labs.schedules.inflight import in_flight
from labs.schedules.inputs import PipelineInput
from labs.schedules.simulate import simulate

H100 = get_gpu("h100-sxm")
L70 = get_model("llama-3.1-70b")
STATE = ("weights", "gradients", "master_weights", "optimizer_moments")


def ledger(model=L70, **kwargs):
    return compute_memory(MemoryInput(model=model, gpu=H100, **kwargs))


def megatron_weight_and_optimizer_bytes(*, h, heads, groups, kv_channels, ffn, layers, vocab,
                                        tp, pp, dp, tp_pad=128):
    """Megatron-LM's compute_weight_and_optimizer_memory for a dense SwiGLU GQA model with
    untied embeddings and the distributed optimizer, written out from its published formula:
    most loaded shard = (block / pp + embedding) / tp parameters at 6 + 12/dp bytes each."""
    padded_vocab = -(-vocab // (tp_pad * tp)) * tp_pad * tp  # --make-vocab-size-divisible-by
    attention = 2 * h * h * ((1 + groups / heads) * (kv_channels * heads / h))
    layer = 2 * h * (ffn * 3 / 2 + 2) + attention
    block = layer * layers + 2 * h  # + final layernorm
    embedding = h * padded_vocab
    shard = (block / pp + embedding) / tp
    return shard * (6 + 12 / dp)


def test_weights_and_optimizer_match_megatron_theoretical_memory():
    # Llama 3.1 70B at TP8 PP4 DP4, distributed optimizer (= fp32 grads, optimizer state
    # sharded over DP: our adam18 with ZeRO-1), first stage holding the embedding.
    expected = megatron_weight_and_optimizer_bytes(
        h=8192, heads=64, groups=8, kv_channels=128, ffn=28672, layers=80, vocab=128256,
        tp=8, pp=4, dp=4)
    # By hand: layer = 16384·43010 + 2·8192²·1.125 = 855,670,784; block/4 = 17,113,419,776;
    # embedding 8192 x 129,024 = 1,056,964,608; (sum)/8 x 9 B = 20.44 GB.
    assert expected == pytest.approx(20.44e9, rel=1e-3)
    result = ledger(recipe="adam18", zero=1, tp=8, pp=4, dp=4)
    first = sum(result.stages[0].breakdown[k] for k in STATE)
    assert first == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize(("schedule", "p", "m", "v"), [
    ("gpipe", 4, 8, 1), ("gpipe", 3, 2, 1),
    ("1f1b", 4, 8, 1), ("1f1b", 4, 2, 1), ("1f1b", 8, 32, 1), ("1f1b", 5, 7, 1),
    ("interleaved-1f1b", 4, 8, 2), ("interleaved-1f1b", 4, 4, 2), ("interleaved-1f1b", 8, 16, 3),
    ("interleaved-1f1b", 2, 6, 4),
    ("zb-h1", 4, 8, 1), ("zb-h1", 4, 2, 1), ("zb-h1", 6, 24, 1),
    ("dualpipe-v", 4, 8, 2), ("dualpipe-v", 3, 12, 2), ("dualpipe-v", 6, 20, 2),
])
def test_in_flight_closed_forms_equal_the_simulators_peaks(schedule, p, m, v):
    result = simulate(PipelineInput(schedule=schedule, stages=p, microbatches=m, virtual=v))
    chunks = result.input.chunks
    for r in range(p):
        assert in_flight(schedule, p, m, r, v) == result.peak_activations[r] / chunks, r


def test_interleaved_factor_on_the_first_stage():
    # Megatron's interleaved penalty: 1 + (p-1)/(p·v) of p micro-batches' worth on rank 0.
    p, v = 8, 4
    factor = 1 + (p - 1) / (p * v)
    assert in_flight("interleaved-1f1b", p, 4 * p, 0, v) == pytest.approx(p * factor)
    assert in_flight("1f1b", p, 3, 0) == 3  # fewer micro-batches than stages: min(m, p)


@pytest.mark.parametrize(("schedule", "p", "m", "v"), [
    ("1f1b", 4, 8, 1), ("1f1b", 8, 3, 1), ("gpipe", 4, 6, 1), ("interleaved-1f1b", 4, 8, 2),
    ("zb-h1", 8, 16, 1), ("dualpipe-v", 4, 8, 2),
])
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_ledger_and_pipeline_lab_activations_are_equal(schedule, p, m, v, recompute):
    result = simulate(PipelineInput(schedule=schedule, stages=p, microbatches=m, virtual=v))
    composed = stage_memory(result, L70, H100, tp=8, recompute=recompute)
    direct = ledger(tp=8, pp=p, recompute=recompute, schedule=schedule, microbatches=m,
                    virtual=v)
    for r, bill in enumerate(direct.stages):
        assert composed.activation_bytes[r] == pytest.approx(bill.breakdown["activations"])
        assert composed.total_bytes[r] == pytest.approx(bill.total_bytes)


def test_pipeline_lab_reports_unfillable_pipelines_by_canonical_field():
    lab = run_pipeline_lab(PipelineLabInput(
        pipeline=PipelineInput(schedule="interleaved-1f1b", stages=32, microbatches=64,
                               virtual=4), model=L70, gpu=H100, tp=8))
    assert lab.memory is None and lab.memory_field == "virtual"
    assert "80 layers" in lab.memory_note
    assert lab.result.makespan > 0  # the schedule still stands
    ok = run_pipeline_lab(PipelineLabInput(pipeline=PipelineInput(), model=L70, gpu=H100, tp=8))
    assert ok.memory is not None and ok.memory.layers_per_rank == (20, 20, 20, 20)


def test_megatron_activation_model_uses_the_ffn_width():
    # Megatron: 18·s·b·h + 4·s·b·ffn per dense layer (34·s·b·h when ffn = 4h), / t with SP.
    s, h, ffn = 4096, 8192, 28672
    got = activation_bytes_per_layer(L70, s, activation_model="megatron")
    assert got == 18 * s * h + 4 * s * ffn
    assert activation_bytes_per_layer(L70, s, tp=8, activation_model="megatron") == got / 8
    gpt3 = get_model("gpt-3-175b")  # ffn = 4h: both models agree
    assert activation_bytes_per_layer(gpt3, 2048, activation_model="megatron") == \
        activation_bytes_per_layer(gpt3, 2048)
    result = ledger(activation_model="megatron")
    assert result.breakdown["activations"] == 80 * got
    assert any("Activation model: megatron" in n for n in result.assumptions)
    assert any("Activation model: classic" in n for n in ledger().assumptions)


def test_megatron_activation_model_for_moe_layers():
    mixtral = get_model("mixtral-8x7b")  # top-2 of 8 experts, expert_ffn 14336, no shared
    s, h = 4096, 4096
    got = activation_bytes_per_layer(mixtral, s, tp=2, activation_model="megatron",
                                     moe_layer=True, ep=4)
    assert got == 18 * s * h / 2 + 4 * 2 * s * h / 4 + 4 * 2 * s * 14336 / 4


def test_embedding_and_logits_on_their_stages():
    one = ledger()  # a single stage holds both
    # Token ids only: Llama trains without dropout, so no s·b·h embedding dropout mask
    # (round-12 cold reading of EP01, finding 10); Megatron-LM's estimate counts it anyway.
    emb = 8 * 4096
    out = 4 * 4096 * 8192 + 4 * 4096 * L70.vocab
    assert one.breakdown["embedding_and_logits"] == emb + out
    assert one.breakdown["activations"] == 34 * 4096 * 8192 * 80  # the seed figure unchanged
    megatron = ledger(activation_model="megatron").breakdown["embedding_and_logits"]
    assert megatron == emb + 4096 * 8192 + out
    gpt = ledger(get_model("gpt-3-175b"), seq_len=2048).breakdown["embedding_and_logits"]
    assert gpt == 8 * 2048 + 2048 * 12288 + 4 * 2048 * 12288 + 4 * 2048 * 50257
    notes = " ".join(ledger().assumptions)
    assert "trains without dropout, so no embedding dropout mask" in notes


def test_notes_name_the_choices():
    notes = " ".join(ledger(recompute="none").assumptions)
    assert "without FlashAttention" in notes
    offload = " ".join(ledger(dp=8, zero=1, offload=True).assumptions)
    assert "gradients are made on the GPU" in offload
    assert "host RAM" in offload


def test_microbatches_below_stages_hold_fewer():
    full = ledger(pp=4).stages[0].breakdown["activations"]
    two = ledger(pp=4, microbatches=2).stages[0].breakdown["activations"]
    assert two == pytest.approx(full / 2)
    gpipe = ledger(pp=4, microbatches=16, schedule="gpipe").stages[0].breakdown["activations"]
    assert gpipe == pytest.approx(4 * full)


def megatron_activation_bytes(*, s, b, h, ffn, layers, tp, pp, microbatches):
    """Megatron-LM's compute_activation_memory (SP with selective recomputation, plain 1F1B),
    written out from its published formula: the first stage's Table 2 bytes, L layers of
    s·b·h·(18 + 4·ffn/h) (L/p layers x p micro-batches) plus the embedding's 8·s·b·p token ids
    and s·b·h·p dropout mask, discounted by min(1, m/p) when fewer micro-batches than stages
    are in flight, all over t (megatron/training/theoretical_memory_usage.py)."""
    act = s * b * h * (18 + 4 * ffn / h) * layers
    act += 8 * s * b * pp + s * b * h * pp
    act *= min(1, microbatches / pp)
    return act / tp


def test_activations_match_megatron_theoretical_memory_with_fewer_microbatches_than_stages():
    # Llama 3.1 70B at TP8 PP4, 4,096 tokens, m = 2 < p: Megatron holds min(m, p) = 2
    # micro-batches in flight on the first stage, half of what p stage-loads would be.
    expected = megatron_activation_bytes(s=4096, b=1, h=8192, ffn=28672, layers=80, tp=8, pp=4,
                                         microbatches=2)
    # By hand: 4096·8192·32 = 1,073,741,824 B a layer; x80 + 131,072 + 134,217,728
    # = 86,033,694,720; x 2/4 / 8 = 5,377,105,920 B (5.38 GB).
    assert expected == 5_377_105_920
    result = ledger(tp=8, pp=4, dp=4, microbatches=2, activation_model="megatron",
                    recipe="adam18", zero=1)
    first = result.stages[0]
    assert first.in_flight == 2
    got = first.breakdown["activations"] + first.breakdown["embedding_and_logits"]
    assert got == pytest.approx(expected, rel=1e-9)
    # Unset, the ledger fills the pipeline (m = p): p stage-loads, twice Megatron's m = 2 figure.
    full = ledger(tp=8, pp=4, dp=4, activation_model="megatron", recipe="adam18", zero=1)
    assert full.stages[0].in_flight == 4
    assert full.stages[0].breakdown["activations"] == 2 * first.breakdown["activations"]


def test_flash_attention_without_recomputation_keeps_no_scores():
    # "flash": FlashAttention with nothing recomputed keeps what selective keeps (34·s·b·h, no
    # score term) and repeats nothing; "none" keeps the scores (Llama, without dropout: the
    # softmax output alone, 2·a·s²·b).
    s, h, a = 8192, 8192, 64
    flash = activation_bytes_per_layer(L70, s, recompute="flash")
    assert flash == activation_bytes_per_layer(L70, s, recompute="selective") == 34 * s * h
    assert activation_bytes_per_layer(L70, s, recompute="none") == flash + 2 * a * s * s
    notes = ledger(recompute="flash").assumptions
    assert not any("stores the attention scores" in n for n in notes)
    assert any("with FlashAttention" in n for n in notes)
