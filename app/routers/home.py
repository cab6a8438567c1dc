"""The home page (all ten episodes), drill checking, and a health probe for hosting."""

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from app.labkit import DRILLS, VIEWS, check_drill
from app.templating import templates

router = APIRouter()


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def home(request: Request) -> Response:
    live = {view.episode.slug: view for view in VIEWS.values()}
    return templates.TemplateResponse(request, "home.html", {"live": live})


@router.get("/healthz", tags=["hosting"], summary="Liveness probe for class hosting")
async def healthz() -> dict:
    return {"status": "ok"}


@router.get("/drills/{drill_id}", include_in_schema=False)
async def drill_page(
    request: Request,
    drill_id: str,
    answer: str = Query("", max_length=40),
    attempt: int = Query(1, ge=1, le=100),
) -> Response:
    if drill_id not in DRILLS:
        raise HTTPException(status_code=404, detail="no such drill")
    view, drill = DRILLS[drill_id]
    outcome = check_drill(drill, answer, attempt)
    ctx = {"view": view, "drill": drill, "outcome": outcome, "episode": view.episode}
    if request.headers.get("hx-request") == "true":
        return templates.TemplateResponse(request, "partials/_drill.html", ctx)
    return templates.TemplateResponse(request, "drill.html", ctx)


@router.get("/api/drills/{drill_id}", tags=["drills"], summary="Check a drill's answer")
async def drill_api(
    drill_id: str,
    answer: str = Query(..., max_length=40),
    attempt: int = Query(1, ge=1, le=100),
) -> Response:
    if drill_id not in DRILLS:
        return JSONResponse({"detail": "no such drill"}, status_code=404)
    _, drill = DRILLS[drill_id]
    return JSONResponse(check_drill(drill, answer, attempt))
