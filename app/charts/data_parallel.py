"""EP02's keys: which of its figures wait for which step's guess or drill's answer, at which
state (lab.js masking: a step's id waits for its guess, a drill's form id until it is
answered), and what a held figure says while it waits. The scaling chart
(``data_parallel_scaling.py``) and the time and crossover charts (``data_parallel_time.py``)
hand their figures to these keys; so do the lesson's router and bench."""

from app.charts.zero_traffic import held_text, owned
from labs.data_parallel.lab import GPUS_PER_SERVER, SERVER_LINK
from labs.hardware.links import get_link

# Step 3 asks what is left of the speedup at 64 GPUs on one 100 Gb/s Ethernet port a
# server; the Ethernet curves (and their hover, "19.68×, 30.7%" at 64) wait for its guess on
# the lesson, at every state (lab.js, layout.meta.owners, "partly": the other curves stay).
# Round-12 cold reading of EP02, finding 11. At an Ethernet state (the bad case, step 1's 16
# and 64 GPUs) every figure of its all-reduce waits too: the chosen point and its label, the
# time and crossover charts, and the bench's figures (templates/partials/_data_parallel.html).
# Issue 36, s46: step 1's links and the bad case showed 19.7×, 30.7% before the guess.
STEP3_LINK, STEP3, STEP3_NAME = "eth-100g", "step-3", "Ethernet (step 3)"
STEP3_WHAT = "The all-reduce on 100 Gb/s Ethernet"  # held_text: "... shows once step 3 is guessed."
STEP3_MASK = held_text(STEP3_WHAT, (STEP3,))
ALLREDUCE_WHAT = "This all-reduce"  # a drill's state: "... shows once it is answered"
# Round-22 cold reading P, finding 3: at one port a server across servers on InfiniBand (step
# 1's 16 and 64 GPUs, step 4's "IB, 1 port"), the all-reduce's time over the bytes each GPU
# sends (27.56 GB in 575.2 ms) is the port's 48 GB/s, step 3's answer: its times wait too.
ONE_PORT_WHAT = "The all-reduce through one port a server"


# Step 8 asks the crossover T* on 8 GPUs over PCIe 4.0; step 2's "8 × PCIe" link printed it
# (T* 14,995 and compute ÷ all-reduce 1.09 at 16,384 tokens). At a PCIe state the crossover
# chart, note and T* wait for step 8's guess. Issue 36, s46.
STEP8_LINK, STEP8 = "pcie-4", "step-8"
CROSSOVER_WHAT = {STEP3: STEP3_WHAT, STEP8: "The crossover on PCIe 4.0"}

# The drills' states, as their questions state them (app/routers/data_parallel.py,
# app/lesson_drills/data_parallel.py), each keyed by its form's id: at a state the bench's
# controls set to one of them, what answers it waits for the drill's answer (lab.js masking).
# Round-14 cold reading of EP02-EP05, findings 1 and 2: 16 GB on 8 GPUs over PCIe printed
# 1,067.2 ms, 16 GPUs on two NDR ports a server 12.62×, 4 GPUs on PCIe T* = 12,852.
PCIE_DRILL = {"gpus": 8, "link": "pcie-4", "grad_bytes": 16e9}
IB16_DRILL = {"gpus": 16, "link": "ib-ndr", "nics_per_node": 2}
DRILL_STATES = {"drill-dp-allreduce-pcie": PCIE_DRILL, "drill-dp-predict-16-ib": IB16_DRILL}
# The states whose all-reduce answers a later step, keyed to that step as the drills' are
# (round-16 cold reading of EP01-EP02, finding 2: the bench's own controls printed step 2's
# 6.66x, step 4's 93.1%, step 6's 250.64x and step 9's 64.0% before their guesses; steps 5
# and 7 the same once step 3 was guessed). The lesson's try links are these states
# (app/routers/data_parallel_lesson.py facts), so a step's link and what its guess unmasks are one.
STRONG_GPUS, STRONG_BATCH = (16, 128), 256  # step 7: one global batch, 8x the GPUs
STEP_STATES = {
    "step-2": {"gpus": 8, "link": "nvlink-4", "micro_batch": 1},
    "step-4": {"gpus": 64, "link": "ib-ndr", "nics_per_node": 8},
    "step-5": {"gpus": 64, "link": STEP3_LINK, "overlap": "bucketed"},
    # On either scale-out link its buckets run the same tree, capped below both ports: 250.64x.
    "step-6": {"gpus": 1024, "link": ("ib-ndr", STEP3_LINK), "nics_per_node": 8,
               "overlap": "bucketed", "bucket_bytes": 1024 * 1024},
    # Step 7 asks how much faster 128 GPUs run a fixed global batch of 256 sequences than 16
    # do (round-17 cold reading of EP02, finding 4): at either count its all-reduce waits.
    "step-7": {"gpus": STRONG_GPUS, "link": STEP3_LINK, "scaling": "strong",
               "global_batch": STRONG_BATCH},
    "step-9": {"gpus": 64, "link": STEP3_LINK, "microbatches": 4},
}
# Step 6 asks which algorithm NCCL runs for a bucket: wherever the bench's readout names
# NCCL's tree, that word waits for its guess (at 25 MiB on 1,024 GPUs too).
STEP6, TREE = "step-6", "tree"
# Step 1 asks what each of 16 GPUs sends (2 × 15/16 × 14 GB) and step 10 what the 8B holds
# at one sequence of 8,192 tokens (its state and activations): at their states the readout's
# bytes sent and the replica panel wait for their guesses.
STEP1_STATE = {"gpus": 16, "grad_bytes": 14e9}
STEP10, STEP10_STATE = "step-10", {"micro_batch": 1, "seq_len": 8192}
STEP10_MODEL = "llama-3.1-8b"
WHAT = {"step-1": "What each GPU sends", STEP10: "The 8B's replica"}


def waits(what: str, keys: tuple[str, ...]) -> str:
    """What a held figure says until its keys are guessed or answered: held_text's "… shows
    once step 3 is guessed.", or "… once its drill is answered." """
    steps = tuple(k for k in keys if k.startswith("step-"))
    drill = "its drill below is answered" if len(steps) < len(keys) else ""
    if not steps:
        return f"{what} shows once {drill}."
    text = held_text(what, steps)
    return f"{text[:-1]} and {drill}." if drill else text


def veiled(figure: dict, keys: tuple[str, ...], what: str) -> dict:
    """``owned`` by one owner that waits for every key (lab.js: veiled while any is masked),
    its summary's mask saying what it waits for (``waits``)."""
    if not keys:
        return figure
    figure = owned(figure, (" ".join(keys),), what)
    figure["layout"]["meta"]["owners"][0]["summary"][1] = waits(what, keys)
    return figure


def _at(inp, state: dict, link: str | None = None) -> bool:
    """Whether the input, on ``link`` if given, is at ``state``: each of its fields equal (a
    tuple: any of them), its link one of the state's, a scale-out link within one server
    read as the server's NVLink, which is all its all-reduce crosses (step 2's 8 GPUs on one
    sequence print 6.66x on InfiniBand too)."""
    def fabric(link_id: str) -> str:
        inside = get_link(link_id).kind == "scale-out" and inp.gpus <= GPUS_PER_SERVER
        return SERVER_LINK if inside else link_id

    def same(key: str, value) -> bool:
        if key != "link":
            return getattr(inp, key) in (value if isinstance(value, tuple) else (value,))
        return fabric(link or inp.link) in {fabric(v) for v in
                                            (value if isinstance(value, tuple) else (value,))}

    return all(same(key, value) for key, value in state.items())


def one_port_across(result, link: str) -> bool:
    """Whether ``link``'s speedup at the state answers step 3 in kind: a scale-out link with
    one port a server, across servers (the bytes over the one port's busBW)."""
    inp = result.input
    return (get_link(link).kind == "scale-out" and inp.nics_per_node == 1
            and inp.gpus > GPUS_PER_SERVER)


def speed_keys(result, link: str | None = None) -> tuple[str, ...]:
    """What the speedup and efficiency on ``link`` (the state's own by default) at the
    state's GPU count wait for: ``link_keys``, and step 3's on one port a server across
    servers (``one_port_across``). Issue 36, round 21: step 4's "IB, 1 port" link drew
    InfiniBand's 40.93x at 64 GPUs (the chosen point's label, the readout, the table, the
    curve's hover), the curve step 3 holds at every other state, before step 3's guess.
    Only the figures wait there: the chosen point and the time chart stay drawn (step 1's
    links land on such states: its bytes move; round-14 cold reading, finding 3)."""
    link = link or result.input.link
    keys = link_keys(result, link)
    return keys if STEP3 in keys or not one_port_across(result, link) else (STEP3, *keys)


def link_keys(result, link: str) -> tuple[str, ...]:
    """What the all-reduce on ``link`` at the state's GPU count answers (its speedup,
    efficiency and times): step 3's on 100 Gb/s Ethernet, a drill's at its state."""
    step3 = link == STEP3_LINK
    return ((STEP3,) if step3 else ()) + tuple(
        key for key, state in (*STEP_STATES.items(), *DRILL_STATES.items())
        if _at(result.input, state, link))


def allreduce_keys(result) -> tuple[str, ...]:
    """What the state's own all-reduce (the chosen point, the time chart, the readout's
    times) answers: ``link_keys`` at its link."""
    return link_keys(result, result.input.link)


def algorithm_keys(result) -> dict[str, tuple[str, ...]]:
    """Step 6's guess where the readout's algorithm answers which one NCCL runs for a
    bucket: the whole gradients' where it names the tree; each bucket's at every bucketed
    state across servers (a "?" only where it is the tree would say so)."""
    point = result.point
    bucket = point.buckets > 1 and (bool(point.bucket_across) or point.bucket_algorithm == TREE)
    return {"whole": (STEP6,) if point.algorithm == TREE else (),
            "bucket": (STEP6,) if bucket else ()}


def sent_keys(result) -> tuple[str, ...]:
    """Step 1's guess where the readout's bytes sent a GPU are its answer (16 GPUs, 14 GB)."""
    return ("step-1",) if _at(result.input, STEP1_STATE) else ()


def replica_keys(result) -> tuple[str, ...]:
    """Step 10's guess where the replica panel prints its parts (the 8B's state and
    activations at one sequence of 8,192 tokens, whatever N)."""
    inp = result.input
    return (STEP10,) if inp.model.id == STEP10_MODEL and _at(inp, STEP10_STATE) else ()


def crossover_keys(result) -> tuple[str, ...]:
    """The step whose answer the state's crossover (chart, note, T*) gives: step 3's at an
    Ethernet state (its all-reduce), step 8's on PCIe (the T* it asks); and a drill whose
    state it is (its all-reduce)."""
    inp = result.input
    steps = (STEP3,) if inp.link == STEP3_LINK else (STEP8,) if inp.link == STEP8_LINK else ()
    # One port a server across servers: its all-reduce's time over the bytes is the port's
    # busBW, step 3's answer (round-22 cold reading P, finding 3; ``time_keys``).
    if not steps and one_port_across(result, inp.link):
        steps = (STEP3,)
    return (*steps, *(k for k in allreduce_keys(result) if k not in steps))


def crossover_what(result, keys: tuple[str, ...]) -> str:
    """What the held crossover says it is: Ethernet's all-reduce, one port's, PCIe's T*."""
    if not keys:
        return ""
    if keys[0] == STEP3 and result.input.link != STEP3_LINK:
        return ONE_PORT_WHAT
    return CROSSOVER_WHAT.get(keys[0], ALLREDUCE_WHAT)


def step3_state(result) -> bool:
    """Whether the state's all-reduce is step 3's: one 100 Gb/s Ethernet port a server."""
    return result.input.link == STEP3_LINK


def time_keys(result) -> tuple[str, ...]:
    """What the state's all-reduce times (the time chart's all-reduce, the readout's exposed
    time and bottleneck, the tables' times) wait for: ``allreduce_keys``, and step 3's at one
    port a server across servers, where its time over the bytes is the port's busBW (round-22
    cold reading P, finding 3: step 1's "64 GPUs" link printed 27.56 GB and 575.2 ms, 48 GB/s,
    before step 3's guess). The same keys as the state's speedup (``speed_keys``)."""
    return speed_keys(result)
