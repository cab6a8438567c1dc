"""EP04's keys: which of the bench's figures wait for which guess or drill at a state
(``drill_key``, ``step_keys``, ``held_keys``, a sweep row's ``row_keys``), what a mask says
(``waits``) and the layout.meta that veils a chart until then (``held_meta``). The charts are
``tensor_parallel_efficiency.py`` (efficiency against t, per link) and
``tensor_parallel_cost.py`` (time per layer, memory per GPU, the crossover)."""


# The drill tp-predict-70b asks Llama 3.1 70B's efficiency per step at TP 8 in the NVLink node.
# At every state of that model the figures that give it by a division (the headline, the
# efficiency and cost charts, their tables, the step's readout) wait on the lesson until the
# drill is answered: lab.js masks what is keyed by the drill's form (round-12 cold reading of
# EP04, finding 2: switching the Model select drew "75.9% efficient" before the guess).
MODEL_70B, DRILL_70B = "llama-3.1-70b", "drill-tp-predict-70b"
# The steps whose answers the bench's own controls set (round-13 cold reading of EP04, findings
# 1 and 2): step 5 asks what sequence parallelism does to a layer's time, so at every state with
# SP on the time figures wait for its guess; step 4 asks one all-reduce's time where the group's
# slowest link is 25 Gb/s Ethernet, so at every such state they wait for step 4's.
STEP_4, STEP_5, SLOW_LINK = "step-4", "step-5", "eth-25g"
STEP_4_TP = 8  # the degree step 4 asks about over SLOW_LINK
# Step 6 asks the crossover (h/t)* across InfiniBand NDR (its beat's key, lab.js): where the
# group crosses that link, a layer's collectives beside its compute give it by one division.
CROSSING, CROSSING_LINK = "tp-crossover", "ib-ndr"
WAITS = {DRILL_70B: "the drill in step 4 is answered", STEP_4: "step 4 is guessed",
         STEP_5: "step 5 is guessed", CROSSING: "step 6 is guessed"}
AFTER = {DRILL_70B: "step 4's drill", STEP_4: "step 4", STEP_5: "step 5",
         CROSSING: "step 6"}  # a legend's words


def crossing_key(result) -> str:
    """'tp-crossover' where the state's collectives cross step 6's link (its bottleneck):
    there its collectives' times and bytes give that step's (h/t)*; '' elsewhere."""
    return CROSSING if result.cost.bottleneck == CROSSING_LINK else ""


def drill_key(result) -> str:
    """The drill whose answer this state's efficiency gives ('' for none)."""
    return DRILL_70B if result.input.model.id == MODEL_70B else ""


def step_keys(result) -> tuple[str, ...]:
    """The steps whose answer this state's time figures give: step 5 with SP on, step 4
    wherever the group's slowest link is 25 Gb/s Ethernet. At t = 8 that is step 4's answer;
    at another t (the bad case's 4) the figures lay out the method and land beside it (round-19
    cold reading X, finding 3: "0.43x one GPU" one click before step 4's 0.39x), so they wait
    too, as EP02's bad case does."""
    return ((STEP_5,) if result.input.sp else ()) + (
        (STEP_4,) if result.cost.bottleneck == SLOW_LINK and result.cost.tp > 1 else ())


def slow_point(result, c) -> bool:
    """Whether the sweep's entry ``c`` is step 4's answer at a state whose own t is another:
    t = 8 over 25 Gb/s Ethernet, drawn by the bad case's TP = 4 (round-16 cold reading of
    EP04, finding 2: the bad case veiled its whole state, t = 4 included, which answers no
    step, so its button drew grey bars and "?")."""
    return (c.tp == STEP_4_TP and c.bottleneck == SLOW_LINK
            and STEP_4 not in step_keys(result))


def row_keys(result, c) -> str:
    """What a sweep row's efficiency and times wait for: the state's (``held_keys``), and
    step 4's where the row is its answer (``slow_point``)."""
    return " ".join(filter(None, (held_keys(result), STEP_4 if slow_point(result, c) else "")))


def held_keys(result) -> str:
    """What this state's efficiency and times wait for on the lesson, as an .answer-mask's
    data-after-guess: the 70B drill, and the steps ``step_keys`` names."""
    return " ".join(filter(None, (drill_key(result), *step_keys(result))))


def waits(keys: str, word: str = "until") -> str:
    """What a mask says it waits for: "until step 5 is guessed" (or, ``word`` "once", when
    what it hides shows)."""
    return f"{word} " + " and ".join(WAITS[k] for k in keys.split())


def held_meta(keys: str, tp: int, traces: int, label: int, part: str, mask: str,
               names: dict[int, str] | None = None) -> dict:
    """layout.meta that veils a chart whole until ``keys`` are guessed or answered (lab.js
    veilOf: one owner, keyed by them all), with its label masked and ``part`` of its summary
    read as ``mask``; {} where nothing waits."""
    if not keys:
        return {}
    return {"meta": {"masked": {str(label): f"t = {tp}: ?"},
                     **({"names": {str(i): n for i, n in names.items()}} if names else {}),
                     "owners": [{"step": keys, "traces": list(range(traces)),
                                 "annotations": [label], "summary": [part, mask]}]}}
