"""Bring your own run: a pasted Megatron-LM or torchtitan log (or torch.cuda.memory_stats()
JSON beside an EP08 plan) beside the lab's prediction for the same plan.

- ``POST /api/runs/parse``: JSON in (:class:`RunParseRequest`), JSON out
  (:class:`RunParseAnswer`): the plan as EP08's controls and URL, what the run measured, the
  lab's answer for the plan exactly as ``GET /api/recipe`` gives it (the same parser, cache and
  ``to_api``), the ratio of each figure and the memory gap by part. 422 naming the field.
- ``GET /episodes/recipe-3d/your-run``: the page, a form (textarea and file upload) that posts
  without JavaScript (``POST`` to the same path answers the whole page) and that htmx turns
  into an in-place answer (the result fragment).

The reading and the recipe run in the worker thread pool (app/main.py WORKER_THREADS), as a
sync route would, never on the event loop. Bodies are refused unread above their bound (a
declared length first, then as they stream): the API's at 2 × labs.core.limits.MAX_LOG_BYTES
+ 8 KiB of JSON, the form's at app.limits.MAX_BODY_BYTES. Nothing pasted is stored: no cache
holds a body, and the plan leaves as a URL.
"""

import json
from email.parser import BytesParser
from email.policy import HTTP
from urllib.parse import parse_qsl, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from app.episodes import BY_SLUG
from app.labkit.parsing import parse
from app.labkit.routes import json_response
from app.limits import MAX_BODY_BYTES
from app.options import gpu_options
from app.routers import recipe
from app.routers.models import TooLarge, read_bounded
from app.schemas import RunParseAnswer, RunParseRequest
from app.templating import templates
from labs.core.errors import LabInputError
from labs.core.limits import MAX_LOG_BYTES
from labs.hardware.links import links
from labs.runs_log.common import too_large
from labs.runs_log.lab import compare, read_run, recipe_params

router = APIRouter()
EPISODE = BY_SLUG["recipe-3d"]
PATH = EPISODE.path + "/your-run"
API_PATH = "/api/runs/parse"
API_LIMIT = 2 * MAX_LOG_BYTES + 8192
CONTROLS = ("gpu", "gpus_per_node", "intra_link", "inter_link", "model")
TEXTS = ("log", "memory_stats", "plan")


class Refused(Exception):
    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__(errors)
        self.errors = errors


def _non_default(params: dict[str, str]) -> dict[str, str]:
    defaults = {k: ("true" if v else "false") if isinstance(v, bool) else str(v)
                for k, v in recipe.RecipeQuery().model_dump().items()}
    return {k: v for k, v in params.items() if defaults.get(k) != v}


def analyse(request: RunParseRequest) -> tuple[dict, object, object]:
    """(the API answer, the recipe state, the run) or Refused naming each field."""
    try:
        stats = request.memory_stats
        if isinstance(stats, dict):
            stats = json.dumps(stats)
        run = read_run(request.log, stats, request.plan, request.gpus)
        controls = {k: str(getattr(request, k)) for k in CONTROLS if getattr(request, k)}
        params, defaulted = recipe_params(run, controls)
    except LabInputError as exc:
        raise Refused({exc.field: exc.message}) from None
    state, errors, _ = parse(recipe.VIEW, params.items())  # what GET /api/recipe runs
    if errors or state is None:
        raise Refused({f"plan.{k}": v for k, v in errors.items()})
    refused = recipe.api_errors(state.result)
    if refused:
        raise Refused({f"plan.{k}": v for k, v in refused.items()})
    comparison = compare(run, state.result.result,
                         gpu_guessed=any(c == "gpu" for c, _, _ in defaulted))
    m = run.measured
    answer = {
        "framework": run.framework, "found": list(run.found), "gpus": run.world_size,
        "model_name": state.result.result.model.name,
        "recipe_query": params,
        "recipe_url": EPISODE.url + "?" + urlencode(_non_default(params)),
        "defaulted": [{"control": c, "value": v, "reason": r} for c, v, r in defaulted],
        "notes": list(run.notes),
        "measured": {k: getattr(m, k) for k in RunParseAnswer.model_fields["measured"]
                     .annotation.model_fields},
        "figures": [{"name": f.name, "unit": f.unit, "measured": f.measured,
                     "predicted": f.predicted, "ratio": f.ratio, "ratio_of": f.ratio_of,
                     "derived": f.derived, "unlike": f.unlike, "withheld": f.withheld}
                    for f in comparison.figures],
        "residuals": [{"name": r.name, "bytes": r.bytes, "detail": r.detail}
                      for r in comparison.residuals],
        "comparison_notes": list(comparison.notes),
        "capacity_note": comparison.capacity,
        "flops_per_token": {"log": comparison.log_flops_per_token,
                            "lab": comparison.lab_flops_per_token,
                            "differ": comparison.flops_counts_differ},
        "recipe": recipe.to_api(state.result),
    }
    return answer, state, run


def _errors(request: Request, errors: dict[str, str], status: int = 422) -> Response:
    return json_response(request, {"detail": [
        {"loc": ["body", *field.split(".")], "msg": f"{field}: {message}",
         "type": "value_error"} for field, message in errors.items()]}, status_code=status)


EXAMPLE = {"log": "------------------------ arguments ------------------------\n"
           "  tensor_model_parallel_size ...................... 8\n  ...\n"
           " iteration       20/     100 | consumed samples: ... | elapsed time per iteration "
           "(ms): 8112.4 | throughput per GPU (TFLOP/s/GPU): 415.8 | ...",
           "gpu": "h100-sxm"}


@router.post(
    API_PATH, tags=["EP08"], response_model=RunParseAnswer,
    summary="Bring your own run: a Megatron-LM or torchtitan log (or memory_stats JSON with "
            "a plan) -> its plan, its measurements and the lab's prediction beside them",
    responses={422: {"description": "No recognisable lines (the message says what was looked "
                                    "for), contradictory arguments (named), or a plan the "
                                    "recipe refuses (`plan.<control>`)."},
               413: {"description": f"Body over {API_LIMIT:,} bytes (refused unread)."}},
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
        "schema": RunParseRequest.model_json_schema(), "example": EXAMPLE}}}},
)
async def parse_api(request: Request) -> Response:
    try:
        body = await read_bounded(request, API_LIMIT)
    except TooLarge:
        return _errors(request, {"log": too_large()}, status=413)
    try:
        given = RunParseRequest.model_validate_json(body or b"{}")
    except ValidationError as exc:
        found = {}
        for err in exc.errors(include_url=False):
            name = ".".join(str(p) for p in err["loc"]) or "body"
            found.setdefault(name, err["msg"])
        return _errors(request, found)
    try:
        answer, _, _ = await run_in_threadpool(analyse, given)
    except Refused as exc:
        return _errors(request, exc.errors)
    return json_response(request, answer)


def _form(body: bytes, content_type: str) -> dict[str, str]:
    """The form's fields: url-encoded, or multipart (the file upload) read with the standard
    library's email parser; an uploaded file is text, decoded as UTF-8."""
    if content_type.startswith("multipart/form-data"):
        message = BytesParser(policy=HTTP).parsebytes(
            b"Content-Type: " + content_type.encode("latin-1", "replace") + b"\r\n\r\n" + body)
        fields: dict[str, str] = {}
        if message.is_multipart():
            for part in list(message.iter_parts())[:16]:
                name = part.get_param("name", header="content-disposition")
                payload = part.get_payload(decode=True) or b""
                if name:
                    fields[str(name)] = payload.decode("utf-8", "replace")
        if fields.get("file", "").strip():
            fields["log"] = fields["file"]
        return fields
    return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True,
                          max_num_fields=16))


def _request_of(fields: dict[str, str]) -> RunParseRequest:
    data: dict[str, object] = {k: fields.get(k, "") for k in (*TEXTS, *CONTROLS)}
    for name in ("gpus_per_node", "gpus"):
        raw = fields.get(name, "").strip()
        data[name] = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 7 else None
        if raw and data[name] is None:
            raise Refused({name: "a whole number"})
    for name in TEXTS:
        if len(str(data[name]).encode("utf-8", "replace")) > MAX_LOG_BYTES:
            raise Refused({name: too_large()})
    try:
        return RunParseRequest.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise Refused({str(err["loc"][0]): err["msg"]}) from None


def _context(fields: dict[str, str]) -> dict:
    return {"episode": EPISODE, "state_query": "", "form": fields, "gpu_options": gpu_options(),
            "intra_options": [(k, links()[k].name) for k in recipe.INTRA],
            "inter_options": [(k, links()[k].name) for k in recipe.INTER],
            "max_log_bytes": MAX_LOG_BYTES, "action": PATH}


@router.get(PATH, response_class=HTMLResponse, include_in_schema=False)
def your_run_page(request: Request) -> Response:
    ctx = {**_context({}), "answer": None, "error": None, "run": None}
    return templates.TemplateResponse(request, "your_run.html", ctx)


@router.post(PATH, response_class=HTMLResponse, include_in_schema=False)
async def your_run_post(request: Request) -> Response:
    htmx = request.headers.get("hx-request") == "true"
    fields: dict[str, str] = {}
    answer = error = run = None
    status = 200
    try:
        try:
            body = await read_bounded(request, MAX_BODY_BYTES)
        except TooLarge:
            raise Refused({"log": too_large()}) from None
        try:
            fields = _form(body, request.headers.get("content-type", ""))
        except ValueError:
            raise Refused({"log": "send the form's fields once each"}) from None
        answer, _, run = await run_in_threadpool(analyse, _request_of(fields))
    except Refused as exc:
        error = exc.errors
        status = 200 if htmx else (413 if "limit" in next(iter(error.values())) else 422)
    shown = {k: v for k, v in fields.items() if k in CONTROLS or k in ("gpus", "plan")}
    ctx = {**_context(shown), "answer": answer, "error": error, "run": run,
           "log_text": fields.get("log", "") if error else ""}
    name = "partials/_your_run_result.html" if htmx else "your_run.html"
    return templates.TemplateResponse(request, name, ctx, status_code=status)
