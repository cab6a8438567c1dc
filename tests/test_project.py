"""Completeness and hygiene: every lab has its page, embed, API and README line; the
architecture doc's floor table is the packages'; ruff is clean."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import app.main  # noqa: F401  (registers every lab)
from app.episodes import EPISODES
from app.labkit import VIEWS
from tools.readme_episodes import floors

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()


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
    """app/episodes.py (read from the lesson templates' front matter): episodes numbered
    1..N, slugs and lab names distinct, every lab's view registered by its router module, and
    its templates where the convention puts them."""
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


def test_readme_is_short_and_every_link_it_makes_resolves():
    """The README is what a newcomer reads (at most 150 lines); the detail is in docs/, and
    every relative link there or in the README names a file of the repository."""
    assert len(README.splitlines()) <= 150, "keep README.md short: move detail to docs/"
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\((?!https?:|#)([^)#\s]+)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.name} links {target}"


# The floors of labs/, as each package's __init__.py declares them (FLOOR = n), and
# docs/architecture.md's table writes them (tools/readme_episodes.py): a package imports only
# from its own floor or those below it; lab packages on one floor may use each other while no
# cycle results.
FLOORS = {package: floor for package, (floor, _) in floors().items()}
# The infrastructure floors stay where they are: a lab package sits above them.
INFRASTRUCTURE = {"core": 1, "hardware": 2, "model": 2, "parallel": 3, "schedules": 3,
                  "recipe": 5}


def _modules() -> dict[str, Path]:
    """Every module of labs/ and app/ by its dotted name (a package by its __init__)."""
    found = {}
    for top in ("labs", "app"):
        for path in (ROOT / top).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """What ``name`` imports, wherever the statement stands (module level, a function, an
    ``if TYPE_CHECKING`` block): each imported top-level package, or module of labs/ or app/,
    with the line of its first import."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, int] = {}

    def add(target: str, line: int) -> None:
        while target.count(".") and target not in modules:
            target = target.rpartition(".")[0]  # a name imported from a module
        if target != name:
            found.setdefault(target, line)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            for alias in node.names:
                add(f"{base}.{alias.name}", node.lineno)
    return found


def _graph() -> dict[str, dict[str, int]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, dict[str, int]]) -> list[tuple[set[str], list[str]]]:
    """Each strongly connected group of modules (Tarjan's algorithm), with one cycle in it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for group in groups:  # walk the group from its first module back to it
        start = min(group)
        path, seen = [start], {start}
        while True:
            step = min(w for w in graph[path[-1]] if w in group)
            if step in seen:
                cycles.append((group, [*path[path.index(step):], step]))
                break
            path.append(step)
            seen.add(step)
    return cycles


def test_no_import_cycles_in_labs_or_app():
    """No module imports one that imports it back, not even inside a function."""
    cycles = [cycle for _, cycle in _cycles(_graph())]
    assert "app.render_pool" in _graph()["app.main"]  # the graph sees real arrows
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


# A module stays under 400 lines, each with one job. STILL_LONG held those still over it, each
# to be split (EP02's charts, 636 lines, were split three ways and EP05's router, 527, four;
# the last four, EP06's router and charts, EP07's charts and EP08's drills, two or three
# ways): it is empty now, and no module may join it.
MAX_LINES = 400
STILL_LONG: set[str] = set()


def test_no_module_of_labs_or_app_reaches_400_lines():
    long = {path.relative_to(ROOT).as_posix(): lines for path in _modules().values()
            if (lines := len(path.read_text().splitlines())) >= MAX_LINES}
    assert not set(long) - STILL_LONG, (
        f"over {MAX_LINES - 1} lines (split by what they do): "
        + ", ".join(f"{p} ({n})" for p, n in sorted(long.items()) if p not in STILL_LONG))


def test_a_labs_package_imports_only_its_floor_and_below():
    graph = _graph()
    packages = {name.split(".")[1] for name in graph if name.count(".") >= 1
                and name.startswith("labs.")}
    assert packages == set(FLOORS), "every labs/ package declares its FLOOR"
    assert {p: FLOORS[p] for p in INFRASTRUCTURE} == INFRASTRUCTURE
    assert all(FLOORS[p] >= 4 for p in set(FLOORS) - set(INFRASTRUCTURE)), "labs sit on 4+"
    wrong, between = [], {}
    for name, targets in graph.items():
        if not name.startswith("labs."):
            continue
        mine = name.split(".")[1]
        for target, line in targets.items():
            if not target.startswith("labs.") or target.split(".")[1] == mine:
                continue
            theirs = target.split(".")[1]
            between.setdefault(mine, {}).setdefault(theirs, line)
            if FLOORS[theirs] > FLOORS[mine]:
                wrong.append(f"{name}:{line} (floor {FLOORS[mine]}) imports {target} "
                             f"(floor {FLOORS[theirs]})")
    assert not wrong, "imports from a higher floor:\n" + "\n".join(wrong)
    cycles = [cycle for _, cycle in _cycles(between)]  # no lab package imports back
    assert not cycles, "package cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_architecture_floor_table_is_the_packages():
    """docs/architecture.md's floor table is written by tools/readme_episodes.py from each
    package's FLOOR and docstring."""
    from tools.readme_episodes import floor_table, replaced

    assert replaced(ARCHITECTURE, floor_table()) == ARCHITECTURE, (
        "docs/architecture.md's floor table is not the packages': run "
        "python tools/readme_episodes.py --write")
    rows = re.findall(r"^\s*\| (\d) \| `(\w+)/` \| [^|]* \|$", ARCHITECTURE, re.M)
    assert {package: int(floor) for floor, package in rows} == FLOORS


def test_labs_stay_pure():
    """labs/ is the simulation engine: the standard library and labs/ only, so no web,
    template or chart imports (STYLE.md), wherever the import stands."""
    for name, targets in _graph().items():
        if name.startswith("labs"):
            outside = {t.split(".")[0] for t in targets} - {"labs"} - sys.stdlib_module_names
            assert not outside, f"{name} imports {sorted(outside)}"


def test_a_lesson_template_without_front_matter_or_with_a_bad_line_is_refused(tmp_path):
    """The registry refuses, naming the file, a lesson template that does not declare its
    episode, declares a field twice or an unknown one, or numbers episodes with a gap."""
    import pytest

    from app import episodes

    good = "{#- episode\nnumber: 1\nslug: a\ntitle: A\nquestion: Why?\n-#}\n{% extends 'x' %}"
    cases = {
        "no front matter": "{% extends 'episode.html' %}",
        "unknown field": good.replace("title: A", "titel: A"),
        "field twice": good.replace("title: A", "title: A\ntitle: B"),
        "no number": good.replace("number: 1", "number: one"),
        "a gap": good.replace("number: 1", "number: 2"),
    }
    for text in cases.values():
        (tmp_path / "lab.html").write_text(text)
        with pytest.raises(RuntimeError, match="lab.html|numbered"):
            episodes._episodes(tmp_path)
    (tmp_path / "lab.html").write_text(good)
    (found,) = episodes._episodes(tmp_path)
    assert (found.number, found.slug, found.lab, found.extra_routers) == (1, "a", "lab", ())
