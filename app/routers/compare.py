"""EP12's A/B compare: two playground states side by side, each a playground URL of its own,
with the plan's figures (EP08's audit of each) and the ones that differ marked."""

from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from app.charts.units import fmt_bytes, fmt_count, fmt_ms, fmt_pct
from app.labkit.parsing import parse
from app.labkit.render import VARY, Chart, state_query, with_query
from app.labkit.routes import api_error, json_response
from app.routers.playground import VIEW, page_url
from app.routers.playground_panels import BY_LAB, run_panel
from app.schemas import CompareAnswer
from app.templating import templates

router = APIRouter()
PATH = VIEW.episode.path + "/compare"
API_PATH = "/api/playground/compare"
PURE_ROUTES = (API_PATH, PATH)  # cached and pooled like a lab's answers (app/main.py)
MAX_SIDE = 4000  # characters of one side's query: far above every control set at once

# (key, label, unit, which way is better: "low", "high" or "true")
METRICS = (
    ("gpus", "GPUs", "", None),
    ("memory_per_gpu_bytes", "Memory per GPU (heaviest stage)", "bytes", "low"),
    ("fits", "Fits in the GPU", "bool", "true"),
    ("passes", "Every audit passes", "bool", "true"),
    ("step_s", "Step time", "ms", "low"),
    ("bubble_fraction", "Pipeline bubble", "pct", "low"),
    ("efficiency", "Efficiency", "pct", "high"),
    ("mfu", "MFU (6·N·D on peak)", "pct", "high"),
    ("tokens_per_s", "Tokens per second", "count", "high"),
    ("global_batch", "Global batch (sequences)", "", None),
)


@dataclass(frozen=True)
class Side:
    name: str  # "a" or "b"
    query: str  # the playground's canonical query
    errors: dict[str, str]
    metrics: dict
    recipe: object  # EP08's RecipeState, or None

    @property
    def url(self) -> str:
        return page_url(self.query)


def side_items(raw: str) -> list[tuple[str, str]]:
    """A side as given: a playground link, or its query string alone."""
    text = raw.strip()
    if "://" in text or text.startswith("/"):
        text = urlsplit(text).query
    return parse_qsl(text.lstrip("?"), keep_blank_values=False)


def run_side(name: str, raw: str) -> Side:
    state, errors, _ = parse(VIEW, side_items(raw))
    if state is None:
        return Side(name, "", {f"{name}.{k}": v for k, v in errors.items()}, {}, None)
    panel = run_panel(BY_LAB["recipe"], state.query, names=("step", "memory"))
    metrics: dict = {}
    if panel.result is not None and panel.result.result.legal:
        r = panel.result.result
        metrics = {"gpus": r.gpus, "memory_per_gpu_bytes": r.memory_per_gpu_bytes,
                   "fits": r.fits, "passes": r.passes, "step_s": r.step_s,
                   "bubble_fraction": r.bubble_fraction, "efficiency": r.efficiency,
                   "mfu": r.mfu, "tokens_per_s": r.tokens_per_s,
                   "global_batch": r.plan.global_batch}
    errors = {f"{name}.{k}": v for k, v in panel.errors.items()}
    if panel.result is not None and not panel.result.result.legal:
        errors.update({f"{name}.{p.field}": p.message for p in panel.result.result.problems})
    return Side(name, state_query(state), errors, metrics, panel.result)


def differs(a: Side, b: Side) -> list[str]:
    return [key for key, *_ in METRICS
            if key in a.metrics and key in b.metrics and a.metrics[key] != b.metrics[key]]


def better(key: str, a: Side, b: Side) -> str | None:
    """Which side is better on a metric ("a", "b" or None when equal or not comparable)."""
    way = next(w for k, _, _, w in METRICS if k == key)
    va, vb = a.metrics.get(key), b.metrics.get(key)
    if way is None or va is None or vb is None or va == vb:
        return None
    # A plan that fails an audit cannot run as timed: its speed is no win.
    if key not in ("memory_per_gpu_bytes", "fits", "passes") and not (
            a.metrics.get("passes") and b.metrics.get("passes")):
        return None
    if way == "true":
        return "a" if va else "b"
    return ("a" if va < vb else "b") if way == "low" else ("a" if va > vb else "b")


def fmt_metric(value, unit: str) -> str:
    if value is None:
        return "—"
    return {"bytes": fmt_bytes, "ms": fmt_ms, "pct": fmt_pct, "count": fmt_count,
            "bool": lambda v: "yes" if v else "no"}.get(unit, lambda v: f"{v:,}")(value)


def changed_controls(a: Side, b: Side) -> list[tuple[str, str, str]]:
    """The controls whose values differ between the sides: (label, A, B)."""
    qa, qb = dict(parse_qsl(a.query)), dict(parse_qsl(b.query))
    defaults = VIEW.query_model().model_dump(mode="json")
    out = []
    for name in VIEW.query_model.model_fields:
        va, vb = qa.get(name, str(defaults[name])), qb.get(name, str(defaults[name]))
        if va != vb:
            out.append((VIEW.label(name), va, vb))
    return out


def _given(request: Request) -> tuple[str, str, dict[str, str]]:
    a = request.query_params.get("a", "")
    b = request.query_params.get("b", "")
    errors = {k: f"plan {k.upper()} is over {MAX_SIDE:,} characters"
              for k, v in (("a", a), ("b", b)) if len(v) > MAX_SIDE}
    return a, b, errors


def compare_api(a: Side, b: Side) -> dict:
    def side(s: Side) -> dict:
        return {"query": s.query, "url": s.url, "metrics": s.metrics, "errors": s.errors}
    return {"a": side(a), "b": side(b), "differs": differs(a, b)}


@router.get(API_PATH, tags=["EP12"], response_model=CompareAnswer,
            summary="Two playground states side by side: each plan's figures and which differ",
            responses={422: {"description": "A side's bad or inconsistent control"}})
def compare_json(request: Request, a: str = "", b: str = "") -> Response:
    """``a`` and ``b``: a playground query (or link) each; empty is the worked plan."""
    a, b, errors = _given(request)
    if errors:
        return api_error(request, errors)
    sa, sb = run_side("a", a), run_side("b", b)
    if sa.errors or sb.errors:
        return api_error(request, {**sa.errors, **sb.errors})
    return json_response(request, compare_api(sa, sb))


def _charts(side: Side) -> dict[str, Chart]:
    if side.recipe is None:
        return {}
    recipe = BY_LAB["recipe"].view
    figs = recipe.figures(side.recipe)
    return {f"{side.name}-{d.name}": Chart(f"{side.name}-{d.name}", d.title,
                                           f"{side.name}-recipe-{d.name}", figs.get(d.name),
                                           "", d.embed_height)
            for d in recipe.diagrams}


@router.get(PATH, response_class=HTMLResponse, include_in_schema=False)
def compare_page(request: Request) -> Response:
    a, b, errors = _given(request)
    if errors:
        a, b = ("" if "a" in errors else a), ("" if "b" in errors else b)
    sa, sb = run_side("a", a), run_side("b", b)
    ctx = {
        "episode": VIEW.episode, "sides": (sa, sb), "metrics": METRICS,
        "differs": differs(sa, sb), "better": better, "fmt_metric": fmt_metric,
        "changed": changed_controls(sa, sb), "errors": {**errors, **sa.errors, **sb.errors},
        "charts": {**_charts(sa), **_charts(sb)}, "state_query": f"{sa.query}|{sb.query}",
        "given": {"a": a, "b": b}, "compare_url": with_query(VIEW.episode.url + "/compare", ""),
        "swap_query": urlencode({"a": sb.query, "b": sa.query}),
    }
    return templates.TemplateResponse(request, "compare.html", ctx, headers=VARY)
