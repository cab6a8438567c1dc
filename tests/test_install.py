"""The lock files agree with pyproject.toml and with each other, and every install reads them.

requirements.lock pins the app (what `make run` and the Dockerfile install);
requirements-test.lock is compiled on top of it (`make lock`), so it must repeat each of its
pins byte for byte and add the test tools.
"""

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PIN = re.compile(r"^([A-Za-z0-9._-]+)==(\S+)((?:\s*\\\n\s+--hash=sha256:[0-9a-f]{64})+)", re.M)


def pins(name: str) -> dict[str, tuple[str, str]]:
    """Canonical package name -> (version, its hash lines) from a lock file."""
    text = (ROOT / name).read_text()
    found = {canonicalize_name(m[1]): (m[2], m[3]) for m in PIN.finditer(text)}
    requirement_lines = [line for line in text.splitlines() if re.match(r"^[A-Za-z0-9]", line)]
    assert len(found) == len(requirement_lines), f"{name}: a requirement without ==pin or hash"
    return found


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_every_dependency_is_pinned_with_hashes():
    run, test = pins("requirements.lock"), pins("requirements-test.lock")
    for spec in project()["dependencies"]:
        req = Requirement(spec)
        assert canonicalize_name(req.name) in run, req.name
        assert req.specifier.contains(run[canonicalize_name(req.name)][0]), spec
    for spec in project()["optional-dependencies"]["test"]:
        req = Requirement(spec)
        assert canonicalize_name(req.name) in test, req.name
        assert req.specifier.contains(test[canonicalize_name(req.name)][0]), spec


def test_test_lock_repeats_every_app_pin():
    run, test = pins("requirements.lock"), pins("requirements-test.lock")
    assert set(test) > set(run)
    for name, pinned in run.items():
        assert test[name] == pinned, f"{name}: requirements-test.lock differs from the app's pin"


def test_run_test_and_image_install_from_the_locks():
    makefile = (ROOT / "Makefile").read_text()
    assert "install --require-hashes -r requirements.lock" in makefile
    assert "install --require-hashes -r requirements-test.lock" in makefile
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^RUN pip install .*--require-hashes -r requirements\.lock", dockerfile, re.M)
