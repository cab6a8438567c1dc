"""The live class's routes: an instructor starts a class (/class/new) and watches it through
a private link; students join at /join and, while their cookie lasts, static/js/classroom.js
sends their answers and steps here.

Sessions and forgery: a student's session is an HttpOnly, SameSite=Lax cookie (``lab-class``)
holding a random token, stored hashed. Every POST carries a CSRF token, in the
``X-CSRF-Token`` header (htmx, classroom.js) or a ``csrf`` form field: a hash of the session
token for a student (``lab-class-csrf``, readable by the page's script, which sends it; its
presence is also how the script knows a class is joined) or of the secret for the
instructor; before a session exists (join, start) a double-submit token (``lab-csrf`` cookie
equal to the form's field). Bodies are url-encoded forms of at most MAX_BODY bytes; bad input
answers a 4xx naming its field, and nothing is stored from it."""

from __future__ import annotations

import secrets
from urllib.parse import parse_qsl

import segno
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from app.classroom import aggregates, answers, controls, db, sessions
from app.classroom.common import Refused, csrf_of, same
from app.classroom.models import CODE_LENGTH
from app.episodes import BY_SLUG
from app.routers.models import TooLarge, read_bounded
from app.settings import SETTINGS, url
from app.templating import templates

router = APIRouter(include_in_schema=False)

MAX_BODY = 2048  # bytes: the largest form here is a nickname and a code
SESSION = "lab-class"
SESSION_CSRF = "lab-class-csrf"
FORM_CSRF = "lab-csrf"
POLL_S = 1  # the dashboard's refresh (the issue: live within 2 s)


def _path() -> str:
    return SETTINGS.base_path or "/"


def _secure(request: Request) -> bool:
    return request.url.scheme == "https" or SETTINGS.public_url.startswith("https://")


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _error(field: str, message: str, status: int = 422) -> JSONResponse:
    return JSONResponse({"detail": [{"loc": ["body", field], "msg": message,
                                     "type": "value_error"}]}, status_code=status)


async def _form(request: Request, fields: tuple[str, ...]) -> dict[str, str]:
    """The url-encoded body's ``fields`` (each at most once; others ignored), or Refused."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if not ctype and request.headers.get("content-length", "0") == "0" \
            and "transfer-encoding" not in request.headers:
        return {}  # no body at all (a button with no fields; the CSRF token in the header)
    if ctype != "application/x-www-form-urlencoded":
        raise Refused("body", "body: send a url-encoded form "
                      "(application/x-www-form-urlencoded)", 415)
    try:
        body = await read_bounded(request, MAX_BODY)
    except TooLarge:
        raise Refused("body", f"body: at most {MAX_BODY} bytes", 413) from None
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False,
                          max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        raise Refused("body", "body: not a url-encoded form in UTF-8") from None
    out: dict[str, str] = {}
    for name, value in pairs:
        if name in fields:
            if name in out:
                raise Refused(name, f"{name}: given twice")
            if any(ord(c) < 32 for c in value):
                raise Refused(name, f"{name}: control characters")
            out[name] = value
    return out


def _given_csrf(request: Request, form: dict[str, str]) -> str:
    return request.headers.get("x-csrf-token") or form.get("csrf", "")


def _form_token(request: Request) -> str:
    """The double-submit token of a page that posts before any session (join, start)."""
    token = request.cookies.get(FORM_CSRF, "")
    return token if 32 <= len(token) <= 64 else secrets.token_urlsafe(32)


def _with_form_token(request: Request, response: Response, token: str) -> Response:
    if request.cookies.get(FORM_CSRF) != token:
        response.set_cookie(FORM_CSRF, token, path=_path(), httponly=True, samesite="lax",
                            secure=_secure(request))
    return response


def _check_form_token(request: Request, form: dict[str, str]) -> None:
    cookie = request.cookies.get(FORM_CSRF, "")
    if len(cookie) < 32 or not same(cookie, _given_csrf(request, form)):
        raise Refused("csrf", "csrf: the form's token does not match (reload the page)", 403)


# ---- the instructor ---------------------------------------------------------------------

def _new_page(request: Request, error: Refused | None = None, ended: bool = False) -> Response:
    token = _form_token(request)
    response = templates.TemplateResponse(
        request, "class/new.html", {"csrf": token, "error": error, "ended": ended,
                                    "ttl_days": SETTINGS.class_ttl_days},
        status_code=error.status if error else 200)
    return _with_form_token(request, response, token)


@router.get("/class/new", response_class=HTMLResponse)
def new_page(request: Request) -> Response:
    return _new_page(request, ended=request.query_params.get("ended") == "1")


@router.post("/class/new")
async def new_class(request: Request) -> Response:
    try:
        form = await _form(request, ("csrf",))
        _check_form_token(request, form)
        started = await run_in_threadpool(sessions.start_class, _client(request))
    except Refused as refused:
        return _new_page(request, refused)
    return RedirectResponse(url(f"/class/{started.code}/teach/{started.secret}"),
                            status_code=303)


def _join_url(request: Request, code: str) -> str:
    origin = SETTINGS.public_url or f"{request.url.scheme}://{request.url.netloc}"
    return f"{origin}{url('/join')}?code={code}"


def _qr(link: str) -> str:
    """The join link as an inline SVG QR code (segno; no script, no style attribute)."""
    return segno.make(link, error="m").svg_inline(
        scale=6, dark="#000", light="#fff", omitsize=True, svgclass="qr",
        title="QR code of the join link", lineclass=None)


async def _instructor(code: str, secret: str):
    def find():
        with db.begin() as conn:
            return sessions.instructor_class(conn, code, secret)
    return await run_in_threadpool(find)


def _not_found() -> Response:
    return _error("link", "link: no class has this instructor link (or it has ended)", 404)


def _teach_base(code: str, secret: str) -> str:
    return url(f"/class/{code}/teach/{secret}")


# htmx stops polling on this status: the dashboard's poll of a class just ended (its own End,
# or another tab's) answers it, with a line for the dashboard, rather than a 404 each poll.
STOP_POLLING = 286


async def _board(request: Request, code: str, secret: str, whole: bool) -> Response:
    """The dashboard: the whole page (``whole``: with the join code's QR code) or its live
    fragment, which the page polls."""
    cls = await _instructor(code, secret)
    if cls is None and not whole and request.headers.get("HX-Request") == "true":
        return HTMLResponse('<p class="class-status" role="status">No class has this '
                            "instructor link any more: it has ended.</p>",
                            status_code=STOP_POLLING, headers={"Cache-Control": "no-store"})
    if cls is None:
        return _not_found()
    board = await run_in_threadpool(aggregates.dashboard, cls)
    context = {"board": board, "base": _teach_base(cls.code, secret), "episodes": BY_SLUG,
               "poll_s": POLL_S, "csrf": csrf_of(secret)}
    if whole:
        link = _join_url(request, cls.code)
        context.update(join_url=link, qr=_qr(link), ttl_days=SETTINGS.class_ttl_days)
    return templates.TemplateResponse(request, "class/teach.html" if whole else
                                      "class/_live.html", context,
                                      headers={"Cache-Control": "no-store"})


@router.get("/class/{code}/teach/{secret}", response_class=HTMLResponse)
async def teach(request: Request, code: str, secret: str) -> Response:
    return await _board(request, code, secret, whole=True)


@router.get("/class/{code}/teach/{secret}/live", response_class=HTMLResponse)
async def live(request: Request, code: str, secret: str) -> Response:
    return await _board(request, code, secret, whole=False)


@router.get("/class/{code}/teach/{secret}/export.csv")
async def export(code: str, secret: str) -> Response:
    cls = await _instructor(code, secret)
    if cls is None:
        return _not_found()
    text = await run_in_threadpool(controls.export_csv, cls.id)
    return Response(text, media_type="text/csv; charset=utf-8", headers={
        "Content-Disposition": f'attachment; filename="class-{cls.code}-answers.csv"',
        "Cache-Control": "no-store"})


CONTROLS = {"reveal": ("drill", "shown"), "reset": ("drill",), "pace": ("episode", "step"),
            "end": ()}


@router.post("/class/{code}/teach/{secret}/{control}")
async def control(request: Request, code: str, secret: str, control: str) -> Response:
    """Reveal (``drill``, ``shown`` 1 or 0), reset (``drill``), pace (``episode``, ``step``;
    both empty releases) and end: each answers the refreshed dashboard fragment (htmx) or
    goes back to the dashboard (a plain form)."""
    if control not in CONTROLS:
        return _error("control", "control: reveal, reset, pace or end", 404)
    cls = await _instructor(code, secret)
    if cls is None:
        return _not_found()
    try:
        form = await _form(request, ("csrf", *CONTROLS[control]))
        if not same(csrf_of(secret), _given_csrf(request, form)):
            raise Refused("csrf", "csrf: missing or wrong token", 403)
        if control == "reveal":
            if form.get("shown", "1") not in ("0", "1"):
                raise Refused("shown", "shown: 1 or 0")
            await run_in_threadpool(controls.reveal, cls.id, form.get("drill", ""),
                                    form.get("shown", "1") == "1")
        elif control == "reset":
            await run_in_threadpool(controls.reset, cls.id, form.get("drill", ""))
        elif control == "pace":
            await run_in_threadpool(controls.pace, cls.id, form.get("episode", ""),
                                    form.get("step", ""))
        else:
            await run_in_threadpool(sessions.end_class, cls.id)
            done = url("/class/new?ended=1")
            if request.headers.get("hx-request") == "true":
                return Response(status_code=204, headers={"HX-Redirect": done})
            return RedirectResponse(done, status_code=303)
    except Refused as refused:
        return _error(refused.field, refused.message, refused.status)
    if request.headers.get("hx-request") != "true":
        return RedirectResponse(_teach_base(code, secret), status_code=303)
    return await live(request, code, secret)


# ---- students ---------------------------------------------------------------------------

def _join_page(request: Request, code: str = "", nickname: str = "",
               error: Refused | None = None) -> Response:
    token = _form_token(request)
    response = templates.TemplateResponse(
        request, "class/join.html", {"csrf": token, "code": code, "nickname": nickname,
                                     "error": error},
        status_code=error.status if error else 200)
    return _with_form_token(request, response, token)


@router.get("/join", response_class=HTMLResponse)
def join_page(request: Request) -> Response:
    code = sessions.normal_code(request.query_params.get("code", ""))[:CODE_LENGTH]
    return _join_page(request, code if code.isalnum() else "")


@router.post("/join")
async def join(request: Request) -> Response:
    code = nickname = ""
    try:
        form = await _form(request, ("csrf", "code", "nickname"))
        code, nickname = form.get("code", "")[:12], form.get("nickname", "")[:40]
        _check_form_token(request, form)
        token = await run_in_threadpool(sessions.join, form.get("code", ""), nickname,
                                        _client(request))
    except Refused as refused:
        return _join_page(request, code, nickname, refused)
    response = RedirectResponse(url("/class/me"), status_code=303)
    secure = _secure(request)
    age = SETTINGS.class_ttl_days * 86400
    response.set_cookie(SESSION, token, max_age=age, path=_path(), httponly=True,
                        samesite="lax", secure=secure)
    response.set_cookie(SESSION_CSRF, csrf_of(token), max_age=age, path=_path(),
                        httponly=False, samesite="lax", secure=secure)
    return response


def _forget(response: Response) -> Response:
    for name in (SESSION, SESSION_CSRF):
        response.delete_cookie(name, path=_path())
    return response


def _session(request: Request) -> str:
    return request.cookies.get(SESSION, "")


def _student_and_view(token: str):
    student = sessions.student_of(token)
    return student, aggregates.student_view(student) if student else []


@router.get("/class/me", response_class=HTMLResponse)
async def me(request: Request) -> Response:
    """The student's class: a page, or the bar every lesson polls (htmx)."""
    student, mine = await run_in_threadpool(_student_and_view, _session(request))
    fragment = request.headers.get("hx-request") == "true"
    response = templates.TemplateResponse(
        request, "class/_me.html" if fragment else "class/me.html",
        {"student": student, "mine": mine, "episodes": BY_SLUG,
         "csrf": csrf_of(_session(request)) if student else ""},
        headers={"Cache-Control": "no-store"})
    if student is None and (SESSION in request.cookies or SESSION_CSRF in request.cookies):
        _forget(response)  # the class ended or expired: the lessons stop sending
    return response


NO_SESSION = Refused("session", "session: not in a class (join one at /join)", 401)


async def _student_post(request: Request, fields: tuple[str, ...]) -> dict[str, str]:
    """The form of a student's POST, its CSRF token checked against the session's (no
    database needed: the token is the session token's hash)."""
    if not _session(request):
        raise NO_SESSION
    form = await _form(request, ("csrf", *fields))
    if not same(csrf_of(_session(request)), _given_csrf(request, form)):
        raise Refused("csrf", "csrf: missing or wrong token", 403)
    return form


def _as_student(token: str, action, *args):
    """``action(student, *args)`` for the session's student, in one worker-thread hop."""
    student = sessions.student_of(token)
    if student is None:
        raise NO_SESSION
    return action(student, *args)


@router.post("/class/answer")
async def answer(request: Request) -> Response:
    """A drill answer (``drill``, ``answer``, optional ``answer_id``), graded by the server
    and stored before the answer (200, its verdict): what classroom.js sends after each
    check, and resends under the same ``answer_id`` until acknowledged (a repeat is
    acknowledged again and stores nothing)."""
    try:
        form = await _student_post(request, ("drill", "answer", "answer_id"))
        stored = await run_in_threadpool(_as_student, _session(request), answers.answer,
                                         form.get("drill", ""), form.get("answer", ""),
                                         form.get("answer_id", ""))
    except Refused as refused:
        return _error(refused.field, refused.message, refused.status)
    return JSONResponse(stored, headers={"Cache-Control": "no-store"})


@router.post("/class/progress")
async def progress(request: Request) -> Response:
    """A step opened or a try-it link followed (``episode``, ``step``, ``kind``)."""
    try:
        form = await _student_post(request, ("episode", "step", "kind"))
        await run_in_threadpool(_as_student, _session(request), answers.moved,
                                form.get("episode", ""), form.get("step", ""),
                                form.get("kind", ""))
    except Refused as refused:
        return _error(refused.field, refused.message, refused.status)
    return Response(status_code=204)


@router.post("/class/leave")
async def leave(request: Request) -> Response:
    try:
        await _student_post(request, ())
    except Refused as refused:
        if refused.field != "session":
            return _error(refused.field, refused.message, refused.status)
    return _forget(RedirectResponse(url("/"), status_code=303))
