"""Completeness and hygiene: every lab has its page, embed, API and README line; ruff is clean."""

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


def test_labs_stay_pure():
    """labs/ is the simulation engine: no web, template or chart imports (STYLE.md)."""
    pattern = re.compile(r"^\s*(from|import)\s+(fastapi|starlette|jinja2|plotly|app)\b", re.M)
    for path in (ROOT / "labs").rglob("*.py"):
        assert not pattern.search(path.read_text()), path
