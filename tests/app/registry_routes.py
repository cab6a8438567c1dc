"""Every route of every registered lab, diagram and drill, listed at collection time, so that
the hosting, header and hostile-input tests cover a lab the moment its router is merged."""

from dataclasses import dataclass

import app.main  # noqa: F401  (registers every lab view)
from app.labkit import DRILLS, VIEWS


@dataclass(frozen=True)
class Route:
    # page, fragment, bench, embed, embed-fragment, api, lazy (a lazy diagram's fragment),
    # lazy-page (the same without htmx), drill, drill-api, site
    kind: str
    path: str  # inside the app (no base path)
    lab: str = ""
    htmx: dict | None = None

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.path}"


def lab_routes() -> list[Route]:
    routes = []
    for name, view in VIEWS.items():
        page = view.episode.path
        routes += [
            Route("page", page, name),
            Route("fragment", page, name, {"HX-Request": "true", "HX-Target": "x"}),
            Route("bench", page, name, {"HX-Request": "true", "HX-Target": "bench"}),
            Route("embed", f"/embed/{name}", name),
            Route("embed-fragment", f"/embed/{name}", name, {"HX-Request": "true"}),
            Route("api", f"/api/{name}", name),
        ]
        routes += [Route("embed", f"/embed/{name}/{d.name}", name) for d in view.diagrams]
        for lazy in (view.lazy_path(d) for d in view.diagrams if d.lazy_template):
            routes += [Route("lazy", lazy, name, {"HX-Request": "true"}),
                       Route("lazy-page", lazy, name)]
    return routes


def drill_routes() -> list[Route]:
    routes = []
    for drill_id, (view, _) in DRILLS.items():
        routes += [Route("drill", f"/drills/{drill_id}", view.name),
                   Route("drill-fragment", f"/drills/{drill_id}", view.name,
                         {"HX-Request": "true"}),
                   Route("drill-api", f"/api/drills/{drill_id}", view.name)]
    return routes


SITE = [Route("site", p) for p in ("/", "/docs", "/redoc", "/api/diagrams", "/healthz",
                                   "/openapi.json", "/api/models", "/api/gpus")]
ALL = lab_routes() + drill_routes() + SITE
HTML = [r for r in ALL if r.kind not in ("api", "drill-api")
        and r.path not in ("/api/diagrams", "/healthz", "/openapi.json", "/api/models",
                           "/api/gpus")]


def sweep(items, check, name=lambda item: item.id) -> None:
    """Run ``check`` on every item and fail once, naming each item that failed and why: one
    test id for one behaviour over every route, not one id per route."""
    failures = []
    for item in items:
        try:
            check(item)
        except AssertionError as exc:
            failures.append(f"{name(item)}: {' '.join(str(exc).split())[:300]}")
    assert not failures, f"{len(failures)} of {len(items)} fail:\n" + "\n".join(failures[:30])
