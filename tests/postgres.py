"""A private PostgreSQL server for the class tests: Debian's postgresql package (initdb and
pg_ctl from /usr/lib/postgresql/<version>/bin, or PG_BIN), in a temporary directory on a free
port of 127.0.0.1, run as the ``postgres`` user when the tests run as root (PostgreSQL refuses
root). Never a mock. `make test` installs the package first (.ci/install); a server that
cannot start fails the tests that need it, loudly."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class PostgresUnavailable(RuntimeError):
    pass


def pg_bin() -> Path:
    if os.environ.get("PG_BIN"):
        return Path(os.environ["PG_BIN"])
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name))
    if not found:
        raise PostgresUnavailable(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): run "
            "`bash .ci/install` as root (apt-get install postgresql), or set PG_BIN")
    return Path(found[-1]).parent


def _runuser() -> str:
    """util-linux's runuser, in /usr/sbin on Debian: not on a PATH of /usr/bin:/bin (the
    README's commands run so), where the bare name failed every PostgreSQL-backed test."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    found = shutil.which("runuser", path=path)
    if found is None:
        raise PostgresUnavailable("runuser (util-linux) is not installed: it runs PostgreSQL "
                                  "as the postgres user when the tests run as root")
    return found


def _as_owner(command: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return [_runuser(), "-u", "postgres", "--", *command]
    return command


# How long initdb, pg_ctl and createdb may take: seconds on an idle machine, but a full suite on
# two loaded cores once took long enough that every PostgreSQL-backed class test errored.
STEP_TIMEOUT_S = 600


def _run(command: list[str]) -> None:
    try:
        done = subprocess.run(_as_owner(command), capture_output=True, text=True,
                              timeout=STEP_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise PostgresUnavailable(f"{' '.join(command[:2])} took over {STEP_TIMEOUT_S} s") \
            from exc
    if done.returncode != 0:
        raise PostgresUnavailable(f"{' '.join(command[:2])} failed ({done.returncode}): "
                                  f"{done.stderr.strip()[-2000:] or done.stdout[-2000:]}")


@contextmanager
def postgres_server(port: int) -> Iterator[str]:
    """A running server with an empty database ``lab``: its SQLAlchemy URL."""
    binaries = pg_bin()
    root = Path(tempfile.mkdtemp(prefix="lab-pg-"))
    data, sockets = root / "data", root / "run"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
    started = False
    try:
        _run([str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
              "--no-sync", "-E", "UTF8", "--locale", "C"])
        # fsync off: a test server that never outlives a power cut; a killed *app* loses
        # nothing a commit acknowledged either way (the data is in PostgreSQL's files).
        options = (f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c max_connections=200 -c shared_buffers=32MB")
        try:
            _run([str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l",
                  str(root / "log"), "-w", "-t", str(STEP_TIMEOUT_S), "start"])
        except PostgresUnavailable as exc:  # the server's own log says why
            log = root / "log"
            said = log.read_text(errors="replace")[-2000:] if log.exists() else "no log"
            raise PostgresUnavailable(f"{exc}; server log: {said}") from exc
        started = True
        _run([str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
              "lab"])
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/lab"
    finally:
        if started:
            subprocess.run(_as_owner([str(binaries / "pg_ctl"), "-D", str(data), "-m",
                                      "immediate", "-w", "stop"]), capture_output=True,
                           timeout=60)
        shutil.rmtree(root, ignore_errors=True)
