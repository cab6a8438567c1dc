"""The home page (every episode), the diagram list, drill checking, and a health probe."""

from typing import Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel

from app.episodes import BY_SLUG
from app.glossary import GLOSSARY
from app.glossary_taught import TAUGHT_IN
from app.labkit import DRILLS, VIEWS, DiagramInfo, check_drill, diagram_list
from app.labkit.parsing import WHOLE_TEXT, single
from app.templating import templates
from labs.recipe.runs import RUNS_USE

router = APIRouter()

MAX_ATTEMPT = 100
ATTEMPT = {"name": "attempt", "in": "query", "required": False,
           "description": "Which try this is: 2 reveals.",
           "schema": {"type": "integer", "minimum": 1, "maximum": MAX_ATTEMPT, "default": 1}}


def attempt_of(request: Request) -> tuple[int, JSONResponse | None]:
    """``attempt`` by the labs' rules (empty is not given: 1; digits only), or a 422."""
    value, error = single(request.query_params.multi_items(), "attempt", "attempt")
    if error is None and value is not None and (
            not WHOLE_TEXT.fullmatch(value) or not 1 <= int(value.split(".")[0]) <= MAX_ATTEMPT):
        error = f"attempt must be a whole number from 1 to {MAX_ATTEMPT}"
    if error is not None:
        detail = [{"loc": ["query", "attempt"], "msg": error, "type": "value_error"}]
        return 0, JSONResponse({"detail": detail}, status_code=422)
    return (int(value.split(".")[0]) if value else 1), None


class OptionFeedback(BaseModel):
    key: str
    label: str
    right: bool
    why: str


class DrillAnswer(BaseModel):
    status: Literal["right", "hint", "revealed", "invalid"]
    attempt: int
    given: float | str | None  # a number, or a decide drill's choice key
    answer: float | str | None  # given once right or revealed
    message: str
    # A decide drill's options judged: the one chosen after a wrong try, all once answered.
    feedback: list[OptionFeedback] = []
    # A numeric drill's known wrong derivation the try matches (its feedback is the message).
    mistake: str | None = None


@router.get("/glossary", response_class=HTMLResponse, include_in_schema=False)
def glossary(request: Request) -> Response:
    """Every term of art the lessons use, defined (app/glossary.py)."""
    return templates.TemplateResponse(request, "glossary.html",
                                      {"letters": glossary_letters(), "taught": taught_links(),
                                       "taught_at": taught_at_links()})


# Where a term is taught, when that is not the lesson that first uses it (cold reading C,
# issue 36 item 18: the entry's one link was its first marked use, which for these is a
# passing mention): the episode and the step that teaches it.
TAUGHT_AT: dict[str, tuple[str, str]] = {
    "goodput": ("failures", "step-5"),
    "all-to-all": ("experts", "step-3"),
    "mfu": ("recipe-3d", "step-10"),
    "bubble": ("pipeline", "step-1"),
    "ulysses": ("context-parallel", "step-5"),
}


def taught_at_links() -> dict[str, tuple[str, str]]:
    """Each ``TAUGHT_AT`` term's "Taught in" link: (its text, its URL at the step)."""
    out = {}
    for slug, (episode, step) in TAUGHT_AT.items():
        ep = BY_SLUG[episode]
        out[slug] = (f"{ep.code}: {ep.title}, step {step.removeprefix('step-')}",
                     f"{ep.url}#{step}")
    return out


def taught_links() -> dict[str, tuple[str, str]]:
    """Each term's "First used in" link: (its text, its URL), the first lesson that uses it
    (app/glossary_taught.py), landing on the term's marked first use there (``#term-<slug>``,
    in the step that teaches it)."""
    return {slug: (f"{BY_SLUG[episode].code}: {BY_SLUG[episode].title}",
                   f"{BY_SLUG[episode].url}#term-{slug}") for slug, episode in TAUGHT_IN.items()}


def glossary_letters() -> list[tuple[str, list]]:
    """The entries A to Z (case folded), grouped by first letter ('#' for a digit), for the
    page's letter index: 75 entries are some 25 screens on a phone (round-5 reading)."""
    groups: dict[str, list] = {}
    for term in sorted(GLOSSARY, key=lambda t: t.term.casefold()):
        first = term.term[0].upper()
        groups.setdefault(first if first.isalpha() else "#", []).append(term)
    return sorted(groups.items(), key=lambda g: (g[0] != "#", g[0]))


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def home(request: Request) -> Response:
    live = {view.episode.slug: view for view in VIEWS.values()}
    return templates.TemplateResponse(request, "home.html", {"live": live, "runs_use": RUNS_USE})


# async on purpose: it must answer from the event loop even while every worker thread
# is busy with a simulation.
@router.get("/healthz", tags=["hosting"], summary="Liveness probe for class hosting")
async def healthz() -> dict:
    return {"status": "ok"}


@router.get("/api/diagrams", tags=["diagrams"], response_model=list[DiagramInfo],
            summary="Every diagram of every lab: its lesson page and its embed URL")
def diagrams(request: Request) -> list[DiagramInfo]:
    return diagram_list(request)


@router.get("/drills/{drill_id}", include_in_schema=False)
def drill_page(
    request: Request,
    drill_id: str,
    answer: str = Query("", max_length=40),
) -> Response:
    if drill_id not in DRILLS:
        raise HTTPException(status_code=404, detail="no such drill")
    attempt, refused = attempt_of(request)
    if refused is not None:
        return refused
    view, drill = DRILLS[drill_id]
    outcome = check_drill(drill, answer, attempt)
    ctx = {"view": view, "drill": drill, "outcome": outcome, "episode": view.episode}
    if request.headers.get("hx-request") == "true":
        return templates.TemplateResponse(request, "partials/_drill.html", ctx)
    return templates.TemplateResponse(request, "drill.html", ctx)


@router.get("/api/drills/{drill_id}", tags=["drills"], summary="Check a drill's answer",
            response_model=DrillAnswer,
            responses={404: {"description": "No such drill"},
                       422: {"description": "The answer is not a finite number, or not "
                                                 "one of a decide drill's choices"}},
            openapi_extra={"parameters": [ATTEMPT]})
def drill_api(
    request: Request,
    drill_id: str,
    answer: str = Query(..., max_length=40,
                        description="The number tried (commas allowed), or a decide drill's "
                                    "choice key."),
) -> Response:
    if drill_id not in DRILLS:
        return JSONResponse({"detail": "no such drill"}, status_code=404)
    attempt, refused = attempt_of(request)
    if refused is not None:
        return refused
    _, drill = DRILLS[drill_id]
    outcome = check_drill(drill, answer, attempt)
    if outcome["status"] == "invalid":
        detail = [{"loc": ["query", "answer"], "msg": outcome["message"], "type": "value_error"}]
        return JSONResponse({"detail": detail}, status_code=422)
    return JSONResponse(outcome)
