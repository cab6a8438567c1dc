"""One way to serve every lab: the same data as a page, an HTMX swap, an iframe embed and JSON.

A lab registers a :class:`LabView`; :func:`register` adds its three routes:

- ``GET /episodes/<slug>``: the lesson page. With ``HX-Request`` it answers only the diagram
  partial (or the whole bench, controls included, when the target is ``#bench``), plus
  out-of-band error slots, so a slider move swaps one fragment and the chart updates in place.
- ``GET /embed/<name>``: the diagram alone, for an iframe.
- ``GET /api/<name>``: JSON; its query names are the page's control names.

Bad input never costs a 500: pydantic bounds and the lab's own ``LabInputError`` become a 422
naming the field (JSON), or a message by the control with the last good chart kept (page).
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ValidationError

from app.episodes import Episode
from app.templating import templates
from labs.errors import LabInputError

FORM = "_form"  # errors that belong to no single control


@dataclass(frozen=True)
class Case:
    """A button that sets the controls to a telling state."""

    label: str
    query: Mapping[str, Any]
    why: str

    @property
    def query_string(self) -> str:
        return urlencode(self.query)


@dataclass(frozen=True)
class Drill:
    """A numeric question whose answer the lab computes (never typed in)."""

    id: str
    question: str
    answer: Callable[[], float]
    unit: str
    hint: str
    explanation: str  # formatted with {answer}
    rel_tol: float = 0.02


@dataclass(frozen=True)
class LabView:
    name: str  # /api/<name>, /embed/<name>
    episode: Episode
    query_model: type[BaseModel]
    run: Callable[[Any], Any]  # query -> lab result; raises LabInputError
    to_api: Callable[[Any], dict]
    figure: Callable[[Any], dict]
    page_template: str
    controls_template: str
    diagram_template: str
    summary: str  # OpenAPI description of the API route
    # Extra template context for a state (option lists that depend on it, say).
    extra_context: Callable[[Any], dict] | None = None
    # Controls re-rendered out of band with every diagram swap, because their options
    # depend on the state (a model's layer count sets the valid PP degrees, say).
    oob_template: str | None = None
    good: Case | None = None
    bad: Case | None = None
    drills: tuple[Drill, ...] = field(default=())


@dataclass(frozen=True)
class State:
    """A valid query and the lab's result for it: what one diagram draws."""

    query: BaseModel
    result: Any


VIEWS: dict[str, LabView] = {}
DRILLS: dict[str, tuple[LabView, Drill]] = {}


def error_slots(view: LabView) -> list[str]:
    """Every error slot of a lab's form: one per control, plus the form's own."""
    return [*view.query_model.model_fields, FORM]


def parse(view: LabView, params: Mapping[str, str]) -> tuple[State | None, dict[str, str]]:
    """Validate a query and run the lab: (state, {}) or (None, {field: message})."""
    fields = view.query_model.model_fields
    data = {k: v for k, v in params.items() if k in fields and v != ""}
    try:
        query = view.query_model.model_validate(data)
    except ValidationError as exc:
        errors: dict[str, str] = {}
        for err in exc.errors(include_url=False):
            name = str(err["loc"][0]) if err["loc"] else FORM
            errors.setdefault(name, err["msg"])
        return None, errors
    try:
        return State(query, view.run(query)), {}
    except LabInputError as exc:
        return None, {exc.field: exc.message}


def parse_with_fallback(view: LabView, params: Mapping[str, str]) -> tuple[State, dict[str, str]]:
    """Like parse, but always returns a state to draw: drop the bad fields, else defaults."""
    state, errors = parse(view, params)
    if state is not None:
        return state, errors
    kept = {k: v for k, v in params.items() if k not in errors}
    state, _ = parse(view, kept)
    if state is None:
        state, _ = parse(view, {})
    assert state is not None, f"{view.name}: the default query must be valid"
    return state, errors


def _context(request: Request, view: LabView, state: State, errors: dict[str, str]) -> dict:
    return {
        "view": view,
        "episode": view.episode,
        "result": state.result,
        # The controls show the values of the state drawn, bad ones echoed back as typed.
        "query": {**state.query.model_dump(), **{k: request.query_params[k] for k in errors
                                                  if k in request.query_params}},
        "figure": view.figure(state.result),
        "errors": errors,
        "fields": error_slots(view),
        # The canonical URL query of the state drawn: for embed codes and "open in lab" links.
        "state_query": urlencode(state.query.model_dump(exclude_defaults=True)),
        "embedding": False,
        "base_url": str(request.base_url).rstrip("/"),
        **(view.extra_context(state) if view.extra_context else {}),
    }


def _is_fragment(request: Request) -> bool:
    # A history restore must get the full page (htmx docs, "History Support").
    return (
        request.headers.get("hx-request") == "true"
        and request.headers.get("hx-history-restore-request") != "true"
    )


def render_page(request: Request, view: LabView) -> Response:
    headers = {"Vary": "HX-Request, HX-Target"}
    if _is_fragment(request):
        state, errors = parse(view, request.query_params)
        if state is None:
            # Keep the last good chart: swap nothing but the error slots (out of band),
            # and do not push the bad state into the history.
            headers.update({"HX-Reswap": "none", "HX-Push-Url": "false"})
            return templates.TemplateResponse(
                request, "partials/_errors_oob.html",
                {"errors": errors, "fields": error_slots(view)},
                status_code=422, headers=headers,
            )
        # Case buttons and step links replace the whole bench (controls too); a control
        # change replaces only the diagram and clears the error slots out of band.
        template = (
            "partials/_bench.html" if request.headers.get("hx-target") == "bench"
            else "partials/_fragment.html"
        )
        ctx = _context(request, view, state, errors)
        return templates.TemplateResponse(request, template, ctx, headers=headers)
    state, errors = parse_with_fallback(view, request.query_params)
    ctx = _context(request, view, state, errors)
    return templates.TemplateResponse(
        request, view.page_template, ctx, status_code=422 if errors else 200, headers=headers
    )


def render_embed(request: Request, view: LabView) -> Response:
    state, errors = parse_with_fallback(view, request.query_params)
    ctx = _context(request, view, state, errors)
    ctx["embedding"] = True
    return templates.TemplateResponse(
        request, "embed.html", ctx, status_code=422 if errors else 200
    )


def api_error(errors: dict[str, str]) -> JSONResponse:
    """The same shape FastAPI gives its own validation errors."""
    detail = [
        {"loc": ["query", name], "msg": msg, "type": "value_error"}
        for name, msg in errors.items()
    ]
    return JSONResponse({"detail": detail}, status_code=422)


def register(router: APIRouter, view: LabView) -> None:
    VIEWS[view.name] = view
    for drill in view.drills:
        DRILLS[drill.id] = (view, drill)
    model = view.query_model

    async def page(request: Request) -> Response:
        return render_page(request, view)

    async def embed(request: Request) -> Response:
        return render_embed(request, view)

    async def api(query: Annotated[model, Query()]) -> Response:  # type: ignore[valid-type]
        try:
            result = view.run(query)
        except LabInputError as exc:
            return api_error({exc.field: exc.message})
        return JSONResponse(view.to_api(result))

    router.add_api_route(
        view.episode.url, page, methods=["GET"], response_class=HTMLResponse,
        include_in_schema=False,
    )
    router.add_api_route(
        f"/embed/{view.name}", embed, methods=["GET"], response_class=HTMLResponse,
        include_in_schema=False,
    )
    router.add_api_route(
        f"/api/{view.name}", api, methods=["GET"], summary=view.summary,
        tags=[view.episode.code], responses={422: {"description": "Bad or inconsistent input"}},
    )


def check_drill(drill: Drill, answer: str, attempt: int) -> dict[str, Any]:
    """Grade one try: right within tolerance; a hint after a wrong try; the reveal after two."""
    expected = drill.answer()
    try:
        given = float(answer.replace(",", "").strip())
    except ValueError:
        return {"status": "invalid", "attempt": attempt, "message": "Enter a number."}
    right = abs(given - expected) <= drill.rel_tol * abs(expected)
    if right:
        status = "right"
    elif attempt >= 2:
        status = "revealed"
    else:
        status = "hint"
    return {
        "status": status,
        "attempt": attempt,
        "given": given,
        "answer": expected if status in ("right", "revealed") else None,
        "message": {
            "right": "Right. " + drill.explanation.format(answer=f"{expected:,.1f}"),
            "hint": "Not quite. Hint: " + drill.hint,
            "revealed": "The answer is " + drill.explanation.format(answer=f"{expected:,.1f}"),
        }[status],
    }
