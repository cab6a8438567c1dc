"""A view's routes: lesson page, embeds (whole lab and each diagram) and JSON API, plus the
list of every diagram. Handlers are plain functions, so FastAPI runs them in its thread pool:
a long simulation never holds the event loop (a /healthz probe answers meanwhile)."""

import gzip
import json
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, Field

from app.labkit.parsing import QueryForm, parse, single
from app.labkit.render import (
    embed_path,
    public_base_url,
    render_embed,
    render_lazy,
    render_page,
)
from app.labkit.view import VIEWS, Diagram, LabView, add_view

EVENT_SHAPES = ("rows", "columns", "none")
GZIP_MIN = 1024  # as the app's GZipMiddleware: smaller answers are not worth compressing
GZIP_LEVEL = 3  # app/main.py says why


SLICE = 1000  # list items per json.dumps call

# Every lab view's own handlers by their route's path (a page, a lazy diagram, the whole
# lab's embed, the JSON API): each takes the request alone and reads nothing FastAPI's routing
# adds to it, so a render process calls it directly (app/render_child.py's ``Direct``).
HANDLERS: dict[str, Callable[[Request], Response]] = {}


def _pieces(value: Any):
    """JSON text in pieces: long lists are encoded a slice at a time. json.dumps holds the
    GIL for the whole call (180 ms for the largest pipeline answer), which would stall the
    event loop and every other request; a slice holds it for about 3 ms."""
    if isinstance(value, dict) and any(isinstance(v, list | dict) for v in value.values()):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield ("," if i else "") + json.dumps(str(key)) + ":"
            yield from _pieces(item)
        yield "}"
    elif isinstance(value, list) and len(value) > SLICE:
        yield "["
        for start in range(0, len(value), SLICE):
            chunk = json.dumps(value[start:start + SLICE], separators=(",", ":"),
                               allow_nan=False)
            yield ("," if start else "") + chunk[1:-1]
        yield "]"
    else:
        yield json.dumps(value, separators=(",", ":"), allow_nan=False)


def encode_json(content: Any) -> bytes:
    return "".join(_pieces(content)).encode()


def json_response(request: Request, content: Any, status_code: int = 200) -> Response:
    """JSON, gzipped here in the worker thread when the client accepts it: compressing a
    multi-MB answer in the middleware would hold the event loop (the middleware leaves a
    response that already has a Content-Encoding alone)."""
    body = encode_json(content)
    headers = {"Vary": "Accept-Encoding"}
    if len(body) >= GZIP_MIN and "gzip" in request.headers.get("accept-encoding", ""):
        body = gzip.compress(body, compresslevel=GZIP_LEVEL)
        headers["Content-Encoding"] = "gzip"
    return Response(body, status_code=status_code, media_type="application/json",
                    headers=headers)


def api_error(request: Request, errors: dict[str, str]) -> Response:
    """The same shape FastAPI gives its own validation errors."""
    detail = [
        {"loc": ["query", name], "msg": msg, "type": "value_error"}
        for name, msg in errors.items()
    ]
    return json_response(request, {"detail": detail}, status_code=422)


def shape_events(answer: dict, key: str, shape: str) -> dict:
    """?events=rows (a list of objects), columns (one list per field) or none (left out)."""
    rows = answer.get(key)
    if shape == "rows" or not isinstance(rows, list):
        return answer
    if shape == "none":
        return {**answer, key: None}
    fields = list(rows[0]) if rows else []
    return {**answer, key: {f: [row[f] for row in rows] for f in fields}}


def query_parameters(view: LabView | QueryForm) -> list[dict]:
    """OpenAPI parameters of /api/<name>, from the query model (the handler parses the query
    itself, with the page's parser, so FastAPI does not see them)."""
    schema = view.query_model.model_json_schema()
    params = []
    for name, prop in schema["properties"].items():
        prop = dict(prop)
        description = prop.pop("description", "")
        prop.pop("title", None)
        params.append({"name": name, "in": "query", "required": False,
                       "description": description, "schema": prop})
    if getattr(view, "events_key", None):
        params.append({
            "name": "events", "in": "query", "required": False,
            "description": f"Shape of `{view.events_key}`: rows (one object per event), "
                           "columns (one list per field, about half the bytes) or none.",
            "schema": {"type": "string", "enum": list(EVENT_SHAPES), "default": "rows"},
        })
    return params


class DiagramInfo(BaseModel):
    lab: str = Field(description="The lab's name, as in /api/<lab>.")
    episode: str = Field(description="Episode code, e.g. EP05.")
    name: str = Field(description="The diagram's name, as in /embed/<lab>/<name>.")
    title: str
    page_url: str = Field(description="The lesson page that draws it (absolute).")
    embed_url: str = Field(description="The diagram alone, for an iframe (absolute).")
    api_url: str = Field(description="The JSON answer of the same lab (absolute).")


def _lazy_handler(view: LabView, diagram: Diagram):
    """The handler of a lazy diagram's route (one per diagram: FastAPI reads its signature)."""
    def lazy(request: Request) -> Response:
        return render_lazy(request, view, diagram)
    return lazy


def register(router: APIRouter, view: LabView) -> None:
    add_view(view)

    def page(request: Request) -> Response:
        return render_page(request, view)

    def embed(request: Request) -> Response:
        return render_embed(request, view, None)

    def embed_one(request: Request, diagram: str) -> Response:
        found = view.diagram(diagram)
        if found is None:
            names = ", ".join(d.name for d in view.diagrams)
            raise HTTPException(404, f"{view.name} has no diagram {diagram!r}; it has {names}")
        return render_embed(request, view, found)

    def api(request: Request) -> Response:
        items = request.query_params.multi_items()
        state, errors, _ = parse(view, items)
        shape, refused = single(items, "events", "events")
        shape = shape or "rows"  # empty is not given, as for every control
        if view.events_key and refused is None and shape not in EVENT_SHAPES:
            refused = f"events must be one of: {', '.join(EVENT_SHAPES)}"
        if view.events_key and refused is not None:
            errors = {**errors, "events": refused}
        if errors or state is None:
            return api_error(request, errors)
        if view.api_errors and (refused := view.api_errors(state.result)):
            return api_error(request, refused)
        answer = view.to_api(state.result)
        if view.events_key:
            answer = shape_events(answer, view.events_key, shape)
        return json_response(request, answer)

    def add(path: str, handler: Callable[[Request], Response], **options) -> None:
        HANDLERS[path] = handler
        router.add_api_route(path, handler, **options)

    html = {"methods": ["GET"], "response_class": HTMLResponse, "include_in_schema": False}
    add(view.episode.path, page, **html)
    for lazy in (d for d in view.diagrams if d.lazy_template):
        add(view.lazy_path(lazy), _lazy_handler(view, lazy), **html)
    add(embed_path(view), embed, **html)
    router.add_api_route(embed_path(view) + "/{diagram}", embed_one, **html)
    add(
        f"/api/{view.name}", api, methods=["GET"], summary=view.summary,
        tags=[view.episode.code], response_model=view.response_model,
        responses={422: {"description": "Bad or inconsistent input: `detail[].loc` names the "
                                        "control, `detail[].msg` says what it must be"}},
        openapi_extra={"parameters": query_parameters(view)},
    )


def diagram_list(request: Request) -> list[DiagramInfo]:
    base = public_base_url(request)
    return [
        DiagramInfo(
            lab=view.name, episode=view.episode.code, name=d.name, title=d.title,
            page_url=base + view.episode.path, embed_url=base + embed_path(view, d),
            api_url=f"{base}/api/{view.name}",
        )
        for view in VIEWS.values() for d in view.diagrams
    ]


