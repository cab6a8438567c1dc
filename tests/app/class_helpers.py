"""Helpers of the live-class tests: an instructor and students, each a client of their own
(their own cookies) over the same in-process app."""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from fastapi.testclient import TestClient

import app.main  # noqa: F401  (registers every lab view and its drills)
from app.labkit import DRILLS
from app.labkit.view import Decide


def drill_of(kind: str):
    """The first registered drill of a kind (decide, predict, derive), with its right answer
    and a wrong one, as a student would type them."""
    for drill_id, (_, drill) in sorted(DRILLS.items()):
        if drill.kind != kind:
            continue
        if isinstance(drill, Decide):
            right = next(o.key for o in drill.judge() if o.right)
            wrong = next(k for k, _ in drill.choices if k != right)
        else:
            right, wrong = repr(drill.answer()), repr(drill.answer() * 3 + 7)
        return drill_id, right, wrong
    raise LookupError(kind)


@dataclass
class Instructor:
    web: TestClient
    base: str  # /class/CODE/teach/SECRET
    code: str
    csrf: str

    def live(self) -> str:
        response = self.web.get(self.base + "/live")
        assert response.status_code == 200, response.text
        return response.text

    def control(self, name: str, **fields) -> object:
        return self.web.post(f"{self.base}/{name}", data=fields,
                             headers={"X-CSRF-Token": self.csrf, "HX-Request": "true"})


def new_client() -> TestClient:
    from app.main import app

    return TestClient(app)


def start_class() -> Instructor:
    web = new_client()
    token = web.get("/class/new").cookies["lab-csrf"]
    response = web.post("/class/new", data={"csrf": token}, follow_redirects=False)
    assert response.status_code == 303, response.text
    base = response.headers["location"]
    page = web.get(base)
    assert page.status_code == 200
    csrf = re.search(r'"X-CSRF-Token": "([0-9a-f]+)"', page.text).group(1)
    return Instructor(web, base, base.split("/")[2], csrf)


@dataclass
class Student:
    web: TestClient

    @property
    def csrf(self) -> str:
        return self.web.cookies.get("lab-class-csrf", "")

    def post(self, path: str, **fields):
        return self.web.post(path, data=fields, headers={"X-CSRF-Token": self.csrf})

    def answer(self, drill: str, answer: str):
        return self.post("/class/answer", drill=drill, answer=answer)


def join(code: str, nickname: str = "") -> Student:
    web = new_client()
    token = web.get("/join").cookies["lab-csrf"]
    response = web.post("/join", data={"csrf": token, "code": code, "nickname": nickname},
                        follow_redirects=False)
    assert response.status_code == 303, response.text
    return Student(web)


# ---- against a real server (uvicorn), through urllib -------------------------------------

def form_post(opener: urllib.request.OpenerDirector, origin: str, path: str, **fields):
    """GET a form page of a real server, then POST it with its CSRF token: the response
    (after redirects), or the HTTPError a 4xx raised, whose ``.code`` is the status."""
    page = opener.open(origin + path).read().decode()
    token = page.split('name="csrf" value="')[1].split('"')[0]
    try:
        return opener.open(origin + path, data=urllib.parse.urlencode(
            {"csrf": token, **fields}).encode())
    except urllib.error.HTTPError as error:
        return error


def session_post(opener: urllib.request.OpenerDirector, origin: str, path: str, **fields):
    """A joined student's POST to a real server (its CSRF token from the opener's cookies)."""
    jar = next(h.cookiejar for h in opener.handlers
               if isinstance(h, urllib.request.HTTPCookieProcessor))
    csrf = next(c.value for c in jar if c.name == "lab-class-csrf")
    return opener.open(urllib.request.Request(
        origin + path, headers={"X-CSRF-Token": csrf},
        data=urllib.parse.urlencode(fields).encode()))
