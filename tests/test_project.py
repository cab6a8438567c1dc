"""Completeness and hygiene: every lab has its page, embed, API and README line; ruff is clean."""

import ast
import re
import subprocess
import sys
from pathlib import Path

from app.labkit import VIEWS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_ruff_clean():
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def readme_row(view) -> str:
    """The README's Episodes row of a lab, as the registry defines it (the title column is
    free prose, written as ``TITLE`` here)."""
    embeds = ", ".join(f"`/embed/{view.name}{path}`"
                       for path in ["", *(f"/{d.name}" for d in view.diagrams)])
    return (f"| {view.episode.code} | TITLE | `{view.episode.url}` | {embeds} "
            f"| `/api/{view.name}` |")


def test_every_lab_has_page_embeds_api_and_its_readme_row(client):
    assert VIEWS, "no lab registered"
    rows = [line for line in README.splitlines() if re.match(r"\| EP\d\d \|", line)]
    assert len(rows) == len(VIEWS), "one README row per registered lab"
    for name, view in VIEWS.items():
        assert client.get(view.episode.url).status_code == 200, name
        assert client.get(f"/embed/{name}").status_code == 200, name
        for diagram in view.diagrams:
            assert client.get(f"/embed/{name}/{diagram.name}").status_code == 200
        assert client.get(f"/api/{name}").status_code == 200, name
        row = next((r for r in rows if r.startswith(f"| {view.episode.code} |")), None)
        assert row is not None, f"README has no row for {view.episode.code}"
        title = row.split(" | ")[1]
        assert row == readme_row(view).replace("TITLE", title)


def test_readme_names_the_two_commands_and_ci_runs_the_test_one():
    commands = re.findall(r"^\s*(?:\$ )?(make test)\s*$", README, re.M)
    assert commands, "README must show the test command"
    ci = (ROOT / ".ci/run").read_text()
    assert commands[0] in ci
    assert "python -m app" in README


# The floors of labs/ (README's Architecture table): a package imports only from its own floor
# or those below it; lab packages on one floor may use each other while no cycle results.
FLOORS = {
    "core": 1,
    "hardware": 2, "model": 2,
    "parallel": 3, "schedules": 3,
    "memory": 4, "data_parallel": 4, "zero": 4, "tensor_parallel": 4, "pipeline": 4,
    "context_parallel": 4, "experts": 4,
    "recipe": 5,
    "rl": 6, "cheatsheet": 6,
}
# The one cycle left to remove (issue 17: the render pool is to import the app by its import
# string); delete this line when it is gone. Any other cycle fails.
KNOWN_CYCLES = [{"app.main", "app.render_pool", "app.response_cache"}]


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
    cycles = [cycle for group, cycle in _cycles(_graph()) if group not in KNOWN_CYCLES]
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_a_labs_package_imports_only_its_floor_and_below():
    graph = _graph()
    packages = {name.split(".")[1] for name in graph if name.count(".") >= 1
                and name.startswith("labs.")}
    assert packages == set(FLOORS), "every labs/ package has a floor here and in the README"
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


def test_readme_floor_table_is_the_tests():
    rows = re.findall(r"^\s*\| (\d) \| ([^|]*) \| ([^|]*) \|$", README, re.M)
    listed = {package: int(floor) for floor, where, what in rows
              for package in re.findall(r"`(\w+)/`", where + what)}
    assert listed == FLOORS


def test_labs_stay_pure():
    """labs/ is the simulation engine: the standard library and labs/ only, so no web,
    template or chart imports (STYLE.md), wherever the import stands."""
    for name, targets in _graph().items():
        if name.startswith("labs"):
            outside = {t.split(".")[0] for t in targets} - {"labs"} - sys.stdlib_module_names
            assert not outside, f"{name} imports {sorted(outside)}"
