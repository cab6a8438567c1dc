"""Every episode's predict and decide drills (issue 36: each episode has at least one of each).

A *predict* drill asks what the lab gives for a state the page does not show; the guess counts
within 10%, and only then does the drill link to that state. A *decide* drill asks for the
plan, the change or the cause among 3-4 choices; the lab runs every choice's state, the best
figure is the right one, and each choice's feedback quotes the lab's figure for it. No answer
is typed in: each is read off the lab's own JSON answer (app.labkit.drills.lab_value), and
none is in the page before the drill is answered (tests/app/test_drills.py).

One module per episode, named as its lab's router (``app/routers/<lab>.py``), each with its
``DRILLS`` (EP08's over ``recipe_overlap.py`` and ``recipe_two_d.py``, its overlap and 2-D
drills' plans and figures); ``units.py`` prints the figures the feedback quotes. Each lab's
router adds ``LESSON_DRILLS[<view name>]`` to its own drills.
"""

from app.labkit import Decide, Drill
from app.lesson_drills import (
    context_parallel,
    data_parallel,
    failures,
    memory,
    moe,
    pipeline,
    playground,
    precision,
    recipe,
    rl,
    tensor_parallel,
    zero,
)
from app.lesson_drills.recipe_overlap import (
    MIXTRAL_64,
    QWEN_EP16,
    a2a_s,
    micro_compute_s,
    network_copies,
)

__all__ = ["LESSON_DRILLS", "MIXTRAL_64", "QWEN_EP16", "a2a_s", "micro_compute_s",
           "network_copies"]

# Keyed by view name, in teaching order (EP01..EP12).
LESSON_DRILLS: dict[str, tuple[Drill | Decide, ...]] = {
    "memory": memory.DRILLS,
    "dp": data_parallel.DRILLS,
    "zero": zero.DRILLS,
    "tp": tensor_parallel.DRILLS,
    "pipeline": pipeline.DRILLS,
    "cp": context_parallel.DRILLS,
    "moe": moe.DRILLS,
    "recipe": recipe.DRILLS,
    "placement": rl.DRILLS,
    "precision": precision.DRILLS,
    "failures": failures.DRILLS,
    "playground": playground.DRILLS,
}
