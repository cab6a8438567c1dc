"""What a render will cost, known before it runs, and the lane it waits in (app/render_pool.py).

Why: the render processes took misses first come, first served, with no bound. Sixteen clients
looping EP08's heaviest planner search (about 1.2 CPU-s each, never cached) made other users'
uncached EP01 answers (5 ms of work) wait 7.3 s at the median, 8.0 s at worst. Knowing a
request's cost before it runs lets the pool keep cheap work out of the queue behind dear work.

How: the cost of a lab answer is set by a few of its controls, read here from the raw query
(the lab's defaults where a control is not given, never a simulation): the planner's search
by the layouts it may try (the TP x PP x CP x EP divisors ``labs.recipe.planner.shapes``
loops over, each with 4 schedules and 3 micro-batch sizes), a pipeline by the actions
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

LIGHT, HEAVY = "light", "heavy"
HEAVY_MS = 50.0  # as app/labkit/parsing.py HEAVY_SECONDS: a result worth keeping apart
# Issue 31, measured with the op-level step model (profile_requests.py --answers; "again":
# the engine's caches warm for the model and cluster, "first": cold).
BASE_MS = 5.0  # a lab answer at its defaults: 1-9 ms again, 2-12 ms first
ACTION_MS = 0.005  # per pipeline action simulated and drawn (4.1-6.7 us measured)
PLAN_SHAPE_MS = 0.6  # per TP x PP x CP x EP layout the planner may try (0.2-4 ms measured)
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


def estimate(path: str, query: bytes) -> Cost:
    """The expected cost of the GET answer at ``path`` (without the base path) and ``query``."""
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
    """The planner's layouts and schedules: the product ``labs.recipe.planner.shapes`` loops
    over (and bounds by MAX_SHAPE_LOOPS) before it builds a plan."""
    from labs.parallel.layout import divisors
    from labs.recipe.planner import MAX_PLAN_CP

    m = c.model_spec()
    gpus, per_node, seq = c.whole("gpus"), c.whole("gpus_per_node"), c.whole("seq_len")
    kv = m.heads if m.uses_mla else m.kv_heads
    tps = [t for t in divisors(per_node) if m.heads % t == 0 and kv % t == 0]
    pps = [p for p in range(1, min(64, m.layers) + 1) if gpus % p == 0]
    cps = [x for x in (1, 2, 4, 8, 16) if x <= MAX_PLAN_CP and seq % (2 * x) == 0 or x == 1]
    eps = list(divisors(m.experts, gpus)) if m.is_moe else [1]
    shapes = len(tps) * len(pps) * len(cps) * len(eps)  # each x PLAN_SCHEDULES x MICRO_BATCHES
    return Cost(BASE_MS + PLAN_SHAPE_MS * shapes,
                f"a plan search over {shapes:,} layouts")


ESTIMATORS = {"pipeline": _pipeline, "recipe": _recipe, "recipe-api": _recipe_api,
              "twod": _two_d, "playground": _playground,
              "compare": _compare, "cheatsheet": _cheatsheet, "plan": _plan,
              "validation": _validation}
_ROUTES: dict[str, tuple[str, object]] = {}


def _route(path: str) -> tuple[str, object] | None:
    """(estimator, query model) of a path, or None for the base cost. Read from the registry
    and the routers at the first request, once every lab registered."""
    if not _ROUTES:
        from app.labkit import VIEWS
        from app.routers import cheatsheet, compare, plan, validation

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
