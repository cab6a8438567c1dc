"""Bring your own model: a pasted Hugging Face config.json -> its shape, counts and model code.

- ``POST /api/models/parse``: the config.json as the JSON body -> :class:`ParsedModel`, or a
  422 naming the config field that is wrong (413 above the size bound).
- ``POST /models/parse``: the page's form (``config``, ``return_to``). With htmx it answers the
  fragment the disclosure shows (the shape and counts, or the message); lab.js-side
  (static/js/byom.js) then sets the lab's model to the code. Without JavaScript it redirects
  to the page it came from with ``model=<code>`` (303), or shows the message.

Bodies are read up to labs.core.limits.MAX_CONFIG_BYTES and refused unread beyond that, before any
JSON parsing. Nothing is stored: the model lives in the URL as its code.
"""

from urllib.parse import parse_qsl, urlencode, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from app.labkit.routes import json_response
from app.labkit.view import VIEWS
from app.schemas import ParsedModel
from app.settings import url
from app.templating import templates
from labs.core.errors import LabInputError
from labs.core.limits import MAX_CONFIG_BYTES
from labs.model.code import decode, is_code
from labs.model.hf_config import SUPPORTED, ParsedConfig, parse_config_text
from labs.model.spec import ModelSpec

router = APIRouter()

SHAPE_FIELDS = tuple(name for name in ParsedModel.model_fields
                     if name not in ("code", "name", "architecture", "params", "active_params",
                                     "expert_params", "notes"))


class TooLarge(Exception):
    pass


async def read_bounded(request: Request, limit: int = MAX_CONFIG_BYTES) -> bytes:
    """The body, or TooLarge as soon as it passes ``limit`` bytes (a declared length is
    checked first, so an oversized upload is refused without reading it)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TooLarge
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise TooLarge
    return bytes(body)


def parsed_json(parsed: ParsedConfig) -> dict:
    spec = parsed.spec
    return {"code": parsed.code, "name": spec.name, "architecture": parsed.architecture,
            "params": spec.params, "active_params": spec.active_params,
            "expert_params": spec.expert_params,
            **{name: getattr(spec, name) for name in SHAPE_FIELDS},
            "notes": list(parsed.notes)}


def _error(request: Request, field: str, message: str, status: int = 422) -> Response:
    return json_response(request, {"detail": [
        {"loc": ["body", field], "msg": f"{field}: {message}", "type": "value_error"}]},
        status_code=status)


EXAMPLE = {"architectures": ["LlamaForCausalLM"], "hidden_size": 8192,
           "intermediate_size": 28672, "num_attention_heads": 64, "num_hidden_layers": 80,
           "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False}


@router.post(
    "/api/models/parse", tags=["presets"], response_model=ParsedModel,
    summary="Bring your own model: a Hugging Face config.json -> its shape, parameter counts "
            "and model code (pass it as ?model= to any lab)",
    responses={422: {"description": "Not JSON, not an object, an unsupported architecture or "
                                    "a bad field: the message names the config field."},
               413: {"description": f"Body over {MAX_CONFIG_BYTES:,} bytes."}},
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"type": "object", "description": "A config.json, as published with the "
                   "model (architectures: " + ", ".join(SUPPORTED) + ")."},
        "example": EXAMPLE}}}},
)
async def parse_api(request: Request) -> Response:
    try:
        body = await read_bounded(request)
    except TooLarge:
        return _error(request, "config", f"more than a config.json's {MAX_CONFIG_BYTES:,}-byte "
                                         "limit", status=413)
    try:
        parsed = parse_config_text(body)
    except LabInputError as exc:
        return _error(request, exc.field, exc.message)
    return json_response(request, parsed_json(parsed))


def safe_return(return_to: str) -> str:
    """Only this site's lesson or embed pages: never an open redirect."""
    parts = urlsplit(return_to or "")
    pages = {view.episode.url for view in VIEWS.values()}
    if parts.scheme or parts.netloc or parts.path not in pages:
        return url("/")
    return parts.path + (f"?{parts.query}" if parts.query else "")


def with_model(return_to: str, code: str) -> str:
    """The page's own state with its model set to the code (a custom size dropped)."""
    parts = urlsplit(return_to)
    kept = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("model", "params")]
    return f"{parts.path}?{urlencode([('model', code), *kept])}"


@router.post("/models/parse", include_in_schema=False)
async def parse_page(request: Request) -> Response:
    htmx = request.headers.get("hx-request") == "true"
    error, parsed, return_to = None, None, url("/")
    try:
        # Form encoding inflates a config up to 3x (%XX): the text is bounded once decoded.
        body = await read_bounded(request, 3 * MAX_CONFIG_BYTES + 4096)
        form = dict(parse_qsl(body.decode("utf-8", "replace"),
                              keep_blank_values=True, max_num_fields=8))
        return_to = safe_return(form.get("return_to", ""))
        parsed = parse_config_text(form.get("config", ""))
    except TooLarge:
        error = ("config", f"more than a config.json's {MAX_CONFIG_BYTES:,}-byte limit")
    except ValueError as exc:  # LabInputError, or a form with too many fields
        error = (exc.field, exc.message) if isinstance(exc, LabInputError) else \
            ("config", "send one config field")
    if parsed is not None and not htmx:
        return RedirectResponse(with_model(return_to, parsed.code), status_code=303)
    context = {"error": error, "parsed": parsed, "return_to": return_to,
               "use_url": with_model(return_to, parsed.code) if parsed else None,
               "standalone": not htmx}
    # htmx swaps only 2xx answers: the message is the fragment, so it comes back as 200.
    status = 200 if htmx or error is None else (413 if error[1].startswith("more") else 422)
    return templates.TemplateResponse(request, "partials/_byom_result.html", context,
                                      status_code=status)


def current_model(value: str | None) -> ModelSpec | None:
    """The pasted model a state uses, for the disclosure's "in use" line (None otherwise)."""
    if not value or not is_code(value):
        return None
    try:
        return decode(value)
    except LabInputError:
        return None


templates.env.globals.update(byom_model=current_model, byom_architectures=SUPPORTED)
