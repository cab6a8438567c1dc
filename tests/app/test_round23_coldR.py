"""Round-23 cold reading R (issue 36): three figures a page took from the wrong source or plan.

EP11 step 7 (finding 1) credited EP08's engine with the 6.23 s step: the engine times Llama 3's
layout at 5.92 s on 16,384 GPUs, and the lab applies its speed-ups to step 4's 6N step (6.23 s)."""

from app.routers.failures_state import LLAMA3_REPLICA, STEP_S, llama3_timed, scaled_step
from app.routers.memory_lesson import H100_DRIVER_MIB
from app.routers.rl_lesson import facts as rl_facts
from tests.app.test_round22_prose import _step


def test_ep11_step_7_says_the_engine_times_5_92_s_and_the_lab_scales_step_4s(client):
    why = _step(client, "/episodes/failures", 7).split("Limit.")[0]
    engine = llama3_timed(128)["step_s"]
    assert (
        f"{engine:.3g} s on 16,384 GPUs; the lab applies its speed-ups to step 4's "
        f"{STEP_S:.3g} s:" in why
    ), why
    assert f"{STEP_S:.3g} s on 16,384 GPUs" not in why
    for gpus in (32_768, 65_536):
        lab = scaled_step(gpus // LLAMA3_REPLICA)["lab_step_s"]
        assert f"{lab:.3g} s on {gpus:,}" in why
    assert "the lab's step is" in why  # the 8,192-sequence note: the engine's step, scaled


def test_ep09_step_3_takes_sglangs_fraction_of_what_the_device_reports(client):
    """Finding 2: SGLang's --mem-fraction-static is a share of the device's memory
    (model_runner.py), not the datasheet's 80 GB. Round 26 B #2: of the free memory at engine
    start, at most CUDA's 79.1 GiB for a process, not the driver's 81,559 MiB (EP10 step 5's,
    which that page still states)."""
    three = _step(client, "/episodes/rl-placement", 3).split("Limit.")[0]
    ten = _step(client, "/episodes/low-precision", 5)
    # Round-29 reading B, #19: EP10 step 5 quotes CUDA's 79.1 GiB too, no longer the driver's.
    assert f"{H100_DRIVER_MIB:,} MiB" not in ten and "CUDA gives a process 79.1 GiB" in ten
    reported = H100_DRIVER_MIB * 2**20
    fp8 = rl_facts()["r1_sep"]["api"]["serving_weights"]["fp8_bytes"]
    # Round-26 reading B, finding 2: the base is the free memory at engine start, at most what
    # CUDA gives a process (the HBM tip's 79.1 GiB), not the driver's figure.
    process = rl_facts()["r1_sep"]["result"].input.gpu.cuda_memory_gib * 2**30
    reserved = 0.7 * process
    assert (
        f"--mem-fraction-static of the free memory CUDA reports at engine start ( "
        f"model_runner.py ), at most a process's 79.1 GiB (the HBM tip; less, colocated): "
        f"0.7 × {process / 1e9:.2f} GB = {reserved / 1e9:.2f} GB"
    ) in three, three
    assert f"0.7 × {reported / 1e9:.1f} GB" not in three
    assert (
        f"{reserved / 1e9:.2f} GB − {fp8 / 1e9:.2f} GB = {(reserved - fp8) / 1e9:.2f} GB of "
        f"cache, {(reserved - fp8) / fp8:.1f}× its weights"
    ) in three
    assert "0.7 × 80.0 GB" not in three
    # the lab's own cache on the busiest GPU stays below that: "the lab errs low" holds
    kv = rl_facts()["r1_sep"]["api"]["pools"][1]["breakdown"]["kv_cache"]
    assert "Against slime's run the lab errs low on the cache" in three
    assert kv < reserved - fp8


def test_ep09_decide_says_dp_6_does_not_divide_the_64_samples(client):
    """Finding 3: the 'all 24 colocated' plan trained on DP 6, and 64 samples do not divide
    over it (slime asserts the global batch divides by DP); its feedback said so. Round-24
    cold reading B, finding 16: an option a real run refuses is still an option that cannot
    run. The decide now asks 192 samples a step, which every plan's DP divides, and the
    feedback's refusal sentence says nothing; the helper still writes it for a batch that
    does not divide."""
    from app.lesson_drills.rl import DECIDE, _unsplit_batch

    drill = "/api/drills/placement-decide-throughput"
    plans = {
        "colocated": {"placement": "colocated", "train_gpus": 24, "engines": 12},
        "rollout-heavy": {"placement": "separate", "train_gpus": 8, "engines": 8},
        "train-heavy": {"placement": "separate", "train_gpus": 16, "engines": 4},
        "trainer-starved": {"placement": "separate", "train_gpus": 4, "engines": 10},
    }
    for key, params in plans.items():
        a = client.get("/api/placement", params={**DECIDE, **params}).json()
        assert a["samples"] % a["dp"] == 0, key
        feedback = client.get(drill, params={"answer": key}).json()["feedback"]
        why = next(f["why"] for f in feedback if f["key"] == key)
        assert "does not divide" not in why
    old = client.get("/api/placement", params=plans["colocated"]).json()
    said = _unsplit_batch(old)
    assert (f"DP {old['dp']} does not divide {old['samples']} samples "
            f"({old['samples'] / old['dp']:.2f} a replica)") in said
    assert "slime/utils/arguments.py" in said and "slime refuses such a batch" in said
    assert client.get(drill, params={"answer": "train-heavy"}).json()["status"] == "right"


def test_ep12_step_2s_note_and_ep09_step_2s_swap_say_what_they_count_and_which_way(client):
    """Findings 9 and 11: EP12 step 2's note pointed back to "the three tensors" where the why
    names four; EP09 step 2's reference swap runs at the datasheet's PCIe rate without saying
    that the lab errs fast there (step 6 says so for R1)."""
    two = _step(client, "/episodes/playground", 2)
    assert "the three tensors" not in two
    assert "Megatron-LM counts the same bytes as three terms" in two
    rl_two = _step(client, "/episodes/rl-placement", 2).split("Limit.")[0]
    swap = rl_two.split("swapping its weights in from host and the actor's back")[1]
    assert swap.startswith(" at the datasheet's PCIe rate (the lab errs fast), 2 ×"), swap


def test_ep11_step_4s_quotient_is_the_quotient_of_its_printed_parts(client):
    """Finding 8 (EP11 step 4): '249.6 s ÷ 6.23 s = 40.07' gave the unrounded quotient; the
    printed parts give 40.06."""
    from app.routers.failures import facts as failures_facts

    sb = failures_facts()["sync_best"]["api"]
    daly, step = round(sb["daly_s"], 1), round(sb["step_here_s"], 2)
    four = _step(client, "/episodes/failures", 4)
    assert f"{daly:.1f} s ÷ {step:.2f} s = {daly / step:.2f}, so" in four, four
