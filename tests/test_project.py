"""Completeness and hygiene: every lab has its page, embed, API and README line; ruff is clean."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import app.main  # noqa: F401  (registers every lab)
from app.episodes import EPISODES
from app.labkit import VIEWS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_ruff_clean():
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_lab_has_page_embeds_and_api(client):
    assert VIEWS, "no lab registered"
    for name, view in VIEWS.items():
        assert client.get(view.episode.url).status_code == 200, name
        assert client.get(f"/embed/{name}").status_code == 200, name
        for diagram in view.diagrams:
            assert client.get(f"/embed/{name}/{diagram.name}").status_code == 200
        assert client.get(f"/api/{name}").status_code == 200, name


def test_readme_episode_table_is_the_registrys():
    """README.md's episode table is written by tools/readme_episodes.py from the registry."""
    from tools.readme_episodes import replaced, table

    assert replaced(README, table()) == README, (
        "the README's episode table is not the registry's: run "
        "python tools/readme_episodes.py --write")


def test_registry_lists_each_episode_once_in_order_each_with_its_files():
    """app/episodes.py: episodes numbered 1..N, slugs and lab names distinct, every lab's view
    registered by its router module, and its templates where the convention puts them."""
    assert [e.number for e in EPISODES] == list(range(1, len(EPISODES) + 1))
    assert len({e.slug for e in EPISODES}) == len({e.lab for e in EPISODES}) == len(EPISODES)
    views = {view.episode.slug: view for view in VIEWS.values()}
    assert set(views) == {e.slug for e in EPISODES}, "every episode's lab is live"
    for episode in EPISODES:
        view = views[episode.slug]
        assert sys.modules[episode.routers[0]].VIEW is view, episode.routers[0]
        for template in (view.page_template, view.controls_template, view.diagram_template):
            assert (ROOT / "templates" / template).is_file(), template


def test_readme_names_the_two_commands_and_ci_runs_the_test_one():
    commands = re.findall(r"^\s*(?:\$ )?(make test)\s*$", README, re.M)
    assert commands, "README must show the test command"
    ci = (ROOT / ".ci/run").read_text()
    assert commands[0] in ci
    assert "python -m app" in README


def test_labs_stay_pure():
    """labs/ is the simulation engine: no web, template or chart imports (STYLE.md)."""
    pattern = re.compile(r"^\s*(from|import)\s+(fastapi|starlette|jinja2|plotly|app)\b", re.M)
    for path in (ROOT / "labs").rglob("*.py"):
        assert not pattern.search(path.read_text()), path


def import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports, at the top or inside a function
    (a lazy import is an arrow too). ``from a.b import c`` is an arrow to ``a.b.c`` when that
    is a module, else to ``a.b``."""
    files = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
             for p in (ROOT / package).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = ".".join(here.split(".")[:len(here.split(".")) - node.level + 1])
                    base = f"{parent}.{base}" if base else parent
                targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in files else base
                               for a in node.names)
        graph[name] = {t for t in targets if t in files and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of two or more modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_app_modules_import_one_another_without_a_cycle():
    """No module of app/ reaches itself through its imports, lazy ones included: the render
    pool, say, imports the app by its import string, not app.main (which imports the pool)."""
    graph = import_graph("app")
    assert "app.render_pool" in graph["app.main"]  # the graph sees real arrows
    assert cycles(graph) == []
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
