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


def test_every_lab_has_page_embed_api_and_readme_line(client):
    assert VIEWS, "no lab registered"
    for name, view in VIEWS.items():
        assert client.get(view.episode.url).status_code == 200, name
        assert client.get(f"/embed/{name}").status_code == 200, name
        assert client.get(f"/api/{name}").status_code == 200, name
        assert f"/api/{name}" in README, f"README does not mention /api/{name}"
        assert f"/embed/{name}" in README or "/embed/<name>" in README


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
