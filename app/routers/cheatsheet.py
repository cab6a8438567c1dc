"""EP12's cheat sheet: every formula of the course, each with a worked example computed by the
lab that teaches it (labs/cheatsheet/lab.py) for the model and GPU at the top, and a link to the
episode step that teaches it, at the same example. Page, htmx swap and JSON (/api/cheatsheet)."""

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import Field, field_validator

from app.charts.units import (
    fmt_bytes,
    fmt_count,
    fmt_duration,
    fmt_link_gbs,
    fmt_ms,
    fmt_pct,
)
from app.episodes import BY_SLUG, EPISODES
from app.labkit.parsing import QueryForm, validate
from app.labkit.render import VARY, is_fragment
from app.labkit.routes import api_error, json_response
from app.model_controls import ModelChoice, model_choices, model_field
from app.options import GpuId, LabQuery, gpu_options, model_options
from app.schemas import CheatSheetAnswer
from app.templating import templates
from labs.cheatsheet.failure_lines import failures_step_s
from labs.cheatsheet.inputs import CheatInput
from labs.cheatsheet.lab import MOE_EXAMPLE, RL_EXAMPLE, cheat_sheet
from labs.cheatsheet.lines import dp_link
from labs.core.errors import LabInputError
from labs.core.limits import (
    MAX_CHEAT_DEGREE,
    MAX_CHEAT_DP,
    MAX_CHEAT_MICRO_BATCH,
    MAX_CHEAT_MICROBATCHES,
    MAX_SEQ_LEN,
)
from labs.hardware.gpus import get_gpu
from labs.model.presets import get_model
from labs.precision.speed import TP8_ZERO1
from labs.rl.recipes import recipes

router = APIRouter()
EPISODE = BY_SLUG["playground"]
PATH = EPISODE.path + "/cheatsheet"
API_PATH = "/api/cheatsheet"
PURE_ROUTES = (API_PATH, PATH)  # cached and pooled like a lab's answers (app/main.py)


class CheatQuery(LabQuery):
    """The worked example's knobs; each line's lab reads the ones it needs."""

    model: ModelChoice = model_field("llama-3.1-70b")
    gpu: GpuId = Field("h100-sxm", description="GPU preset id (GET /api/gpus).")
    seq_len: int = Field(4096, ge=1, le=MAX_SEQ_LEN, description="Tokens per sequence s.")
    micro_batch: int = Field(1, ge=1, le=MAX_CHEAT_MICRO_BATCH,
                             description="Sequences per micro-batch b.")
    tp: int = Field(8, ge=1, le=MAX_CHEAT_DEGREE, description="Tensor-parallel degree t.")
    pp: int = Field(4, ge=1, le=MAX_CHEAT_DEGREE, description="Pipeline stages p.")
    dp: int = Field(2, ge=1, le=MAX_CHEAT_DP, description="Data-parallel replicas N (or D).")
    cp: int = Field(2, ge=1, le=MAX_CHEAT_DEGREE, description="Context-parallel degree c.")
    microbatches: int = Field(16, ge=1, le=MAX_CHEAT_MICROBATCHES,
                              description="Micro-batches per step m.")

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        """A preset id or a valid model code, settled while the query is validated (a
        dictionary lookup or a cached decode), so a bad one is a 422 naming the control."""
        try:
            get_model(value)
        except LabInputError as error:
            raise ValueError(error.message) from None
        return value


LABELS = {"model": "Model", "gpu": "GPU", "seq_len": "Sequence length s",
          "micro_batch": "Micro-batch b", "tp": "TP degree t", "pp": "Pipeline stages p",
          "dp": "DP replicas N", "cp": "CP degree c", "microbatches": "Micro-batches m"}


FORM = QueryForm(CheatQuery, LABELS)  # what the shared parser needs of this form


def bounds() -> dict[str, tuple]:
    """Each number control's bounds, read off the query model (one source: labs.core.limits)."""
    found = {}
    for name, info in CheatQuery.model_fields.items():
        low = next((m.ge for m in info.metadata if hasattr(m, "ge")), None)
        high = next((m.le for m in info.metadata if hasattr(m, "le")), None)
        found[name] = (low, high)
    return found


def cheat_input(q: CheatQuery) -> CheatInput:
    return CheatInput(get_model(q.model), get_gpu(q.gpu), seq_len=q.seq_len,
                      micro_batch=q.micro_batch, tp=q.tp, pp=q.pp, dp=q.dp, cp=q.cp,
                      microbatches=q.microbatches)


# ---- Each line's episode step, at a query its lab reads as the same example ----

def _failures_state(q) -> dict:
    """EP11 at the example's GPUs and its own step (the best interval is whole steps)."""
    return {"model": q.model, "gpus": q.tp * q.pp * q.dp * q.cp, "save": "sync",
            "step_s": failures_step_s(get_model(q.model))}


def _model_gpu(q) -> dict:
    return {"model": q.model, "gpu": q.gpu, "seq_len": q.seq_len, "micro_batch": q.micro_batch}


def _recipe_plan(q) -> dict:
    c = cheat_input(q).cluster
    return {"model": q.model, "gpu": c.gpu.id, "nodes": cheat_input(q).nodes,
            "gpus_per_node": c.gpus_per_node, "intra_link": c.intra.id,
            "inter_link": c.inter.id, "tp": q.tp, "pp": q.pp, "dp": q.dp, "cp": q.cp,
            "microbatches": q.microbatches, "micro_batch": q.micro_batch, "seq_len": q.seq_len}


def _dp(q) -> dict:
    """EP02 at the line's own example: its N, link (the H100 servers' the line is pinned to)
    and tokens per GPU b·m·s (round-18 cold reading C, finding 6: the link carried only the
    model and N, so EP02 timed 4 × 1 sequences and showed 1.93 against the line's 1.98)."""
    return {"model": q.model, "gpus": q.dp, "link": dp_link(cheat_input(q)),
            "seq_len": q.seq_len, "micro_batch": q.micro_batch, "microbatches": q.microbatches}


def _tp(q) -> dict:
    """EP04 at the line's example: sequence parallelism on, as the line counts it (finding 6:
    EP04's own default is off, so the link showed 470 MB against the line's 587), on the GPU's
    node."""
    c = cheat_input(q).cluster
    return {**_model_gpu(q), "tp": q.tp, "sp": "true", "gpus_per_node": c.gpus_per_node,
            "intra_link": c.intra.id, "inter_link": c.inter.id}


def _moe(q) -> dict:
    return {"model": q.model if get_model(q.model).is_moe else MOE_EXAMPLE}


def _rl(q) -> dict:
    preset = next((k for k, r in recipes().items() if r.model == q.model), RL_EXAMPLE)
    return {"preset": preset, "gpu": q.gpu}


STEPS: dict[str, tuple[str, str, Any]] = {  # line -> (episode slug, step id, its query)
    "state16": ("memory", "step-2", _model_gpu),
    "state18": ("memory", "step-2", lambda q: {**_model_gpu(q), "recipe": "adam18"}),
    "activations": ("memory", "step-3", _model_gpu),
    "activations_none": ("memory", "step-3", lambda q: {**_model_gpu(q), "recompute": "none"}),
    "activations_flash": ("memory", "step-3", lambda q: {**_model_gpu(q), "recompute": "flash"}),
    "activations_full": ("memory", "step-3", lambda q: {**_model_gpu(q), "recompute": "full"}),
    "inference": ("memory", "step-4", lambda q: {**_model_gpu(q), "mode": "infer"}),
    "kv_cache": ("memory", "step-4", lambda q: {**_model_gpu(q), "mode": "infer"}),
    "min_gpus": ("memory", "step-5", _model_gpu),
    "ring": ("data-parallel", "step-1", _dp),
    "dp_speedup": ("data-parallel", "step-2", _dp),
    **{f"zero{k}": ("zero", "step-2", lambda q, k=k: {**_model_gpu(q), "dp": q.dp, "zero": k})
       for k in range(4)},
    "zero_traffic": ("zero", "step-4", lambda q: {**_model_gpu(q), "dp": q.dp, "zero": 3}),
    "tp": ("tensor-parallel", "step-3", _tp),
    "bubble": ("pipeline", "step-2", lambda q: {"stages": q.pp, "microbatches": q.microbatches}),
    "bubble_interleaved": ("pipeline", "step-4", lambda q: {
        "schedule": "interleaved-1f1b", "virtual": 2, "stages": q.pp,
        "microbatches": q.microbatches}),
    "bubble_zb": ("pipeline", "step-5", lambda q: {
        "schedule": "zb-h1", "stages": q.pp, "microbatches": q.microbatches}),
    "cp_contiguous": ("context-parallel", "step-2", lambda q: {
        "tokens": 4 * q.cp, "cp": q.cp, "layout": "contiguous"}),
    "cp_zigzag": ("context-parallel", "step-3", lambda q: {
        "tokens": 4 * q.cp, "cp": q.cp, "layout": "zigzag"}),
    "cp_kv": ("context-parallel", "step-6", lambda q: {
        "cp": q.cp, "layout": "zigzag", "model": q.model, "seq_len": q.seq_len, "gpu": q.gpu}),
    "moe_params": ("experts", "step-1", _moe),
    "moe_a2a": ("experts", "step-3", lambda q: {**_moe(q), "link": "dgx-h100", "nodes": 1,
                                               "ep": 8, "tokens": q.seq_len * q.micro_batch}),
    "flops_6nd": ("recipe-3d", "step-1", _recipe_plan),
    "flops_8nd": ("recipe-3d", "step-10", lambda q: {**_recipe_plan(q), "recompute": "full"}),
    "mfu": ("recipe-3d", "step-1", _recipe_plan),
    "hfu": ("recipe-3d", "step-10", lambda q: {**_recipe_plan(q), "recompute": "full"}),
    "step": ("recipe-3d", "step-3", _recipe_plan),
    "serving": ("rl-placement", "step-3", _rl),
    "colocated": ("rl-placement", "step-4", _rl),
    "state_fp8-delayed": ("low-precision", "step-2", lambda q: {**_model_gpu(q),
                                                              "recipe": "fp8-delayed"}),
    "state_fp8-blockwise": ("low-precision", "step-5", lambda q: {**_model_gpu(q),
                                                                "recipe": "fp8-blockwise"}),
    "state_mxfp8": ("low-precision", "step-6", lambda q: {**_model_gpu(q), "recipe": "mxfp8"}),
    # Fix E, finding 3: EP10's 70B layout, whose g, r, c and e step 9's why works.
    "fp8_speedup": ("low-precision", "step-9", lambda q: {
        **_model_gpu(q), "recipe": "fp8-delayed", **TP8_ZERO1, "seq_len": q.seq_len,
        "micro_batch": q.micro_batch}),
    "lora_params": ("low-precision", "step-10", lambda q: {"model": q.model, "rank": 16,
                                                          "modules": "qv"}),
    "qlora_base": ("low-precision", "step-11", lambda q: {
        **_model_gpu(q), "rank": 64, "modules": "all", "recompute": "full",
        "ft_recipe": "adam12", "seq_len": q.seq_len, "micro_batch": q.micro_batch}),
    "young": ("failures", "step-4", lambda q: _failures_state(q)),
    "goodput": ("failures", "step-5", lambda q: _failures_state(q)),
    "offload": ("low-precision", "step-12", lambda q: {
        **_model_gpu(q), "recipe": "adam16", "dp": 1, "zero": 0, "offload": 100,
        # Its TP: the copy hides behind the layer's kernels and TP collectives (round 29),
        # so the share hidden is no longer the same at every TP.
        "tp": q.tp, "seq_len": q.seq_len, "micro_batch": q.micro_batch}),
}


def step_link(key: str, q: CheatQuery, refused: bool = False) -> tuple[str, str]:
    """(URL of the step at this example, step id) for a line; a line whose lab refuses the
    example links to the step at the lesson's own state."""
    slug, step, query = STEPS[key]
    if refused:
        return f"{BY_SLUG[slug].url}#{step}", step
    return f"{BY_SLUG[slug].url}?{urlencode(query(q))}#{step}", step


# ---- Formatting a term as the pages show it ----

def fmt_term(value: float, unit: str) -> str:
    if unit == "bytes":
        return fmt_bytes(value)
    if unit == "fraction":
        return fmt_pct(value)
    if unit == "gain":  # a ratio its line reads to 3 places (EP10 step 9's r)
        return f"{value:.3f}"
    if unit == "s":
        return fmt_ms(value)
    if unit == "duration":
        return fmt_duration(value)
    if unit == "count":
        return fmt_count(value)
    if unit == "flops":
        return f"{value:.3g} FLOP"
    if unit == "flop/s":
        return f"{value / 1e12:,.0f} TFLOP/s"
    if unit == "B/s":  # a link preset's rate, as EP02 states it (367.6, 26.24, 48)
        return f"{fmt_link_gbs(value)} GB/s"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.3g}"


def term_api(t) -> dict:
    return {"symbol": t.symbol, "value": t.value, "unit": t.unit, "meaning": t.meaning}


def to_api(q: CheatQuery, lines) -> dict:
    return {"model": q.model, "gpu": q.gpu, "lines": [
        {"key": ln.key, "episode": ln.episode, "title": ln.title, "formula": ln.formula,
         "source": ln.source, "terms": [term_api(t) for t in ln.terms],
         "result": term_api(ln.result) if ln.result else None, "note": ln.note,
         "link": step_link(ln.key, q, ln.result is None)[0]} for ln in lines]}


def parse_query(request: Request) -> tuple[CheatQuery | None, dict[str, str]]:
    query, errors, _ = validate(FORM, request.query_params.multi_items())
    return query, errors


@router.get(API_PATH, tags=["EP12"], response_model=CheatSheetAnswer,
            summary="Every formula of the course with its worked example for one model and GPU",
            responses={422: {"description": "A bad control, named in `detail[].loc`"}},
            openapi_extra={"parameters": [
                {"name": n, "in": "query", "required": False,
                 "description": prop.get("description", ""),
                 "schema": {k: v for k, v in prop.items() if k not in ("title", "description")}}
                for n, prop in CheatQuery.model_json_schema()["properties"].items()]})
def cheatsheet_api(request: Request) -> Response:
    query, errors = parse_query(request)
    if query is None:
        return api_error(request, errors)
    return json_response(request, to_api(query, cheat_sheet(cheat_input(query))))


@router.get(PATH, response_class=HTMLResponse, include_in_schema=False)
def cheatsheet_page(request: Request) -> Response:
    query, errors = parse_query(request)
    if query is None and is_fragment(request):
        return templates.TemplateResponse(
            request, "partials/_errors_oob.html",
            {"errors": errors, "fields": [*CheatQuery.model_fields, "_form"]}, status_code=422,
            headers={**VARY, "HX-Reswap": "none", "HX-Push-Url": "false"})
    if query is None:  # draw the defaults, with the messages by their controls
        kept = [(k, v) for k, v in request.query_params.multi_items() if k not in errors]
        query = validate(FORM, kept)[0] or CheatQuery()
    lines = cheat_sheet(cheat_input(query))
    by_episode = {ep.code: ep for ep in EPISODES}
    ctx = {
        "episode": EPISODE, "query": query.model_dump(), "errors": errors if errors else {},
        "fields": [*CheatQuery.model_fields, "_form"], "lines": lines,
        "links": {ln.key: step_link(ln.key, query, ln.result is None) for ln in lines},
        "by_episode": by_episode, "fmt_term": fmt_term,
        "model_options": model_choices(model_options(), query.model, custom=False),
        "gpu_options": gpu_options(), "bounds": bounds(),
        "playground_url": EPISODE.url, "sheet_url": BY_SLUG["playground"].url + "/cheatsheet",
    }
    template = ("partials/_cheatsheet_lines.html" if is_fragment(request)
                else "cheatsheet.html")
    return templates.TemplateResponse(request, template, ctx,
                                      status_code=422 if errors else 200, headers=VARY)
