"""What a render will cost, known before it runs, and the lane it waits in (app/render_pool.py).

Why: the render processes took misses first come, first served, with no bound. Sixteen clients
looping EP08's heaviest planner search (about 1.2 CPU-s each, never cached) made other users'
uncached EP01 answers (5 ms of work) wait 7.3 s at the median, 8.0 s at worst. Knowing a
request's cost before it runs lets the pool keep cheap work out of the queue behind dear work.

How: the cost of a lab answer is set by a few of its controls, read here from the raw query
(the lab's defaults where a control is not given, never a simulation): the planner's search
by the plans it makes (``labs.recipe.plan_space.count_plans``: the layouts that divide the GPUs,
each with its schedules and micro-batch sizes) and whether the GPUs' memory lets it rank
them, a lesson's whole page by the page drawn around its answer, a pipeline by the actions
it simulates and draws (stages x micro-batches x chunks x 2 or 3, ``labs.schedules.simulate``),
EP08's recipe by its pipeline and its re-plan (its step 14 chart, drawn on its own request, by
its sweep), EP12's playground by every lab it runs and its
pipeline, the A/B compare by two playgrounds, the cheat sheet by its lines, the validation
page by its table. The figures (``*_MS``) are CPU milliseconds on the 2-core machine
docs/capacity.md measures, rounded up from tests/benchmarks/profile_requests.py's table of
every answer's render cost (``--answers``: with the engine's caches cold and warm) and
tests/benchmarks/hostile_load.py's ``--calibrate``; the estimate is a guide, not a promise:
the render deadline (RENDER_TIMEOUT) bounds whatever a render really takes.

An estimate of HEAVY_MS or more runs in the heavy lane; the rest in the light lane, cheapest
first. A request whose controls do not parse costs its parse (a 422): the base cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from urllib.parse import parse_qsl

from starlette.concurrency import run_in_threadpool

LIGHT, HEAVY = "light", "heavy"
HEAVY_MS = 50.0  # as app/labkit/parsing.py HEAVY_SECONDS: a result worth keeping apart
# Issue 31, measured with the op-level step model (profile_requests.py --answers; "again":
# the engine's caches warm for the model and cluster, "first": cold).
BASE_MS = 5.0  # a lab answer at its defaults: 1-9 ms again, 2-12 ms first
# A lesson's whole page around its answer (the page, not its htmx fragments): every lab's
# page at a new sequence length took 19-49 ms more CPU than its bench fragment (23-56 ms
# against 2.6-18; in-process at load 10), and hostile_load.py --calibrate drew EP01's page in
# 20.9 ms and EP08's in 48.0 on an idle machine, where 5-5.6 ms were estimated. Still light.
PAGE_MS = 25.0
ACTION_MS = 0.005  # per pipeline action simulated and drawn (4.1-6.7 us measured)
# The planner (GET /api/plan at its defaults, GPT-3 175B on A100s, batch 32, and other
# models; in-process CPU at load 10, and hostile_load.py --calibrate on an idle machine):
# 8-21 ms for the 150-436 plans of 8-32 GPUs, whose memory cannot hold the state, each plan
# dropped on its floors (0.05 ms a plan); where it can, the plans are ranked and many timed:
# 0.15-0.9 ms a plan (40 GPUs 128 ms for 210 plans, 64 GPUs 77-122 ms for 591, 512 GPUs
# 433-913 ms for 714, Mixtral on 64 1.0 s for 2,082, DeepSeek-V3 on 256 1.9 s for 4,154).
# (Before: 0.6 ms per layout of the TP x PP x CP x EP product, 53 ms for 8 GPUs, 89 for 512.)
PLAN_MS = 0.05  # per plan made
PLAN_RANKED_MS = 0.4  # more per plan, where the GPUs can hold the state
# EP08 re-plan: the nearest passing plan, searched by distance (labs.recipe.replan): 10 ms at
# the median, 45 ms at worst, cold, over 7 models x 8 node counts from GPT-3 175B on 8 nodes
# (it was 49 ms cold for 405B on 6 nodes before the planner's caches; then 60 here put
# every re-plan in the heavy lane).
REPLAN_MS = 30.0
RECIPE_MS = 5.0  # EP08's recipe: 2-7 ms (page, bench, fragment, JSON)
# EP08 step 14's chart on its own request (GET /episodes/recipe-3d/twod): fourteen planner
# searches for a model, cluster and batch not swept yet, 64-117 ms with the planner's caches
# warm and 320 ms cold at the defaults; 4-6 ms for one swept already (compare_cached). A miss
# is mostly a new sweep: the heavy lane (a class's step-14 links all ask the same few, which
# the response cache answers).
TWO_D_MS = 60.0
# Every lab of the curriculum at once: 5-12 ms (13-22 before TP and the ledger were cached).
PLAYGROUND_MS = 12.0
CHEATSHEET_MS = 25.0  # 18-23 ms again, 37 ms first
VALIDATION_MS = 25.0  # the validation page: 24 ms again, 126 ms first (its table, once)


@dataclass(frozen=True)
class Cost:
    ms: float  # expected CPU milliseconds
    what: str  # what it is, for a message

    @property
    def lane(self) -> str:
        return HEAVY if self.ms >= HEAVY_MS else LIGHT


BASE = Cost(BASE_MS, "a lab answer")


def estimate(path: str, query: bytes, page: bool = False) -> Cost:
    """The expected cost of the GET answer at ``path`` (without the base path) and ``query``;
    ``page``: asked as a whole page (no HX-Request), which a lesson's path draws around its
    answer (PAGE_MS more)."""
    cost = _answer(path, query)
    if page and path in _PAGES:
        return Cost(cost.ms + PAGE_MS, f"{cost.what}, its whole page")
    return cost


# The estimators that enumerate rather than read a few controls: the planner's counts its
# plans (labs.recipe.plan_space.count_plans, cached; cold, 0.1-1 ms for a dense model and up to
# 25 ms for DeepSeek-V3 on 65,536 GPUs, each new model code, cluster or batch a miss). The
# middleware asks them in a worker thread (estimate_off_loop), as app/routers/runs.py parses a
# log: never on the event loop, which every other request waits on.
OFF_LOOP = frozenset({"plan"})


async def estimate_off_loop(path: str, query: bytes, page: bool = False) -> Cost:
    """``estimate``, in a worker thread where its estimator enumerates (OFF_LOOP); inline
    where it reads a few controls (a thread's hand-off would cost more than the read)."""
    route = _route(path)
    if route is not None and route[0] in OFF_LOOP:
        return await run_in_threadpool(estimate, path, query, page)
    return estimate(path, query, page)


def _answer(path: str, query: bytes) -> Cost:
    route = _route(path)
    if route is None:
        return BASE
    kind, view = route
    given = {k: v for k, v in parse_qsl(query.decode("latin-1")) if v != ""}
    try:
        return ESTIMATORS[kind](_Controls(view, given))
    except Exception:  # a control that does not parse (any way): the answer is its 422
        return BASE


class _Controls:
    """A query's controls as numbers and strings, the lab's defaults where not given."""

    def __init__(self, model, given: dict[str, str]) -> None:
        self.model, self.given = model, given

    def _default(self, name: str):
        return self.model.model_fields[name].default

    def text(self, name: str) -> str:
        return self.given.get(name) or str(self._default(name) or "")

    def model_spec(self):
        """The ModelSpec the model and params controls name (app.options.chosen_model)."""
        from app.options import chosen_model

        params = self.given.get("params")
        return chosen_model(self.given.get("model"), float(params) if params else None,
                            self._default("model"))

    def whole(self, name: str) -> int:
        value = self.given.get(name)
        number = float(value) if value is not None else self._default(name)
        return max(1, int(number)) if math.isfinite(number) else 1


def _pipeline_actions(c: _Controls, stages: str, microbatches: str) -> int:
    from labs.schedules.catalogue import CATALOGUE

    schedule = CATALOGUE[c.text("schedule")]  # an unknown one: its 422
    per_unit = 3 if schedule.split_backward else 2
    return c.whole(stages) * c.whole(microbatches) * schedule.chunks(c.whole("virtual")) * per_unit


def _pipeline(c: _Controls) -> Cost:
    actions = _pipeline_actions(c, "stages", "microbatches")
    return Cost(BASE_MS + ACTION_MS * actions, f"a pipeline of {actions:,} actions")


def _recipe(c: _Controls) -> Cost:
    actions = _pipeline_actions(c, "pp", "microbatches")
    # As app/routers/recipe.py decides: a new model, or a node count other than 0 (the form
    # always sends replan_nodes=0; counting it made every EP08 control a heavy answer).
    replanned = c.given.get("replan_model") or float(c.given.get("replan_nodes", "0")) != 0
    replan = REPLAN_MS if replanned else 0.0
    return Cost(RECIPE_MS + ACTION_MS * actions + replan, "a 3D recipe")


def _two_d(c: _Controls) -> Cost:
    return Cost(TWO_D_MS, "EP08's 2-D against 3-D sweep")


def _recipe_api(c: _Controls) -> Cost:
    """/api/recipe answers step 14's ``two_d`` too: the recipe and its sweep (a dense model's;
    the sweep is left out for a mixture of experts)."""
    recipe = _recipe(c)
    if c.model_spec().is_moe:
        return recipe
    return Cost(recipe.ms + TWO_D_MS, "a 3D recipe and its 2-D against 3-D sweep")


def _playground(c: _Controls) -> Cost:
    actions = _pipeline_actions(c, "pp", "microbatches")
    return Cost(PLAYGROUND_MS + ACTION_MS * actions, "the playground")


def _compare(c: _Controls) -> Cost:
    """Two playground states' figures on one page (no lab's own page markup)."""
    from app.labkit import VIEWS

    view = VIEWS["playground"].query_model
    actions = sum(_pipeline_actions(_Controls(view, {
        k: v for k, v in parse_qsl(c.given.get(side, "").lstrip("?")) if v != ""}),
        "pp", "microbatches") for side in ("a", "b"))
    return Cost(PLAYGROUND_MS + ACTION_MS * actions, "two playgrounds")


def _cheatsheet(c: _Controls) -> Cost:
    return Cost(CHEATSHEET_MS, "the cheat sheet")


def _validation(c: _Controls) -> Cost:
    return Cost(VALIDATION_MS, "the validation table")


def _plan(c: _Controls) -> Cost:
    """The planner's search: each plan it makes (``labs.recipe.plan_space.count_plans``, the
    layouts that divide the GPUs and keep the batch, each with its schedules and micro-batch
    sizes), dropped on its memory floors where the job's GPUs cannot hold the model's
    training state (its bytes per parameter over their memory), else ranked and many of
    them timed."""
    from labs.core.catalogue import RECIPES
    from labs.hardware.gpus import get_gpu
    from labs.recipe.plan_space import count_plans

    m = c.model_spec()
    gpus = c.whole("gpus")
    plans = count_plans(m, gpus, c.whole("gpus_per_node"), c.whole("seq_len"),
                        c.whole("global_batch"))
    if c.text("hsdp").lower() in ("true", "1", "on", "yes"):
        # HSDP offers each ZeRO-3 variant again (labs.recipe.plan_space.variants): of the four
        # ZeRO stages' variants a shape makes, five.
        plans = plans * 5 // 4
    state = m.params * RECIPES[c.text("recipe")].bytes_per_param
    ranked = state <= get_gpu(c.text("gpu")).memory_bytes * gpus
    return Cost(BASE_MS + plans * (PLAN_MS + (PLAN_RANKED_MS if ranked else 0.0)),
                f"a plan search over {plans:,} plans")


ESTIMATORS = {"pipeline": _pipeline, "recipe": _recipe, "recipe-api": _recipe_api,
              "twod": _two_d, "playground": _playground,
              "compare": _compare, "cheatsheet": _cheatsheet, "plan": _plan,
              "validation": _validation}
_ROUTES: dict[str, tuple[str, object]] = {}
_PAGES: set[str] = set()  # every lab's lesson path (read with _ROUTES)


def _route(path: str) -> tuple[str, object] | None:
    """(estimator, query model) of a path, or None for the base cost. Read from the registry
    and the routers at the first request, once every lab registered."""
    if not _ROUTES:
        from app.labkit import VIEWS
        from app.routers import cheatsheet, compare, plan, validation

        _PAGES.update(view.episode.path for view in VIEWS.values())
        for name in ("pipeline", "recipe", "playground"):
            view = VIEWS[name]
            for route in (view.episode.path, f"/api/{name}", f"/embed/{name}"):
                _ROUTES[route] = (name, view.query_model)
        recipe = VIEWS["recipe"]
        _ROUTES["/api/recipe"] = ("recipe-api", recipe.query_model)
        _ROUTES[recipe.lazy_path(recipe.diagram("twod"))] = ("twod", recipe.query_model)
        _ROUTES["/embed/recipe/twod"] = ("twod", recipe.query_model)
        _ROUTES.update({p: ("plan", plan.PlanQuery) for p in plan.PURE_ROUTES})
        _ROUTES.update({p: ("cheatsheet", None) for p in cheatsheet.PURE_ROUTES})
        _ROUTES.update({p: ("compare", None) for p in compare.PURE_ROUTES})
        _ROUTES.update({p: ("validation", None) for p in validation.PURE_ROUTES})
    if path.startswith("/embed/") and path not in _ROUTES:
        path = "/".join(path.split("/")[:3])  # /embed/<lab>/<diagram>: the lab's cost
    return _ROUTES.get(path)
