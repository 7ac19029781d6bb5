"""Real guidepost servers for tests: a uvicorn subprocess on a free loopback port.

Each server gets its own database (a SQLite file, or a fresh PostgreSQL database
when ``DATABASE_URL`` points at PostgreSQL) and its own copy of the flows.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2

from tests.support import forks
from tests.support.mcp_http import http_get
from tests.support.paths import BUNDLED_FLOWS
from tests.support.paths import REPO as REPO  # where the tests have long found it
from tests.support.time_limit import shared
from tests.support.waiting import wait_until

START_TIMEOUT = 180.0
TEST_RATE_BURST = "1000000"
# A server process: a fork of the zygote, or a process of its own (nginx, an installed
# guidepost-mcp).
Process = forks.Forked | subprocess.Popen[bytes]


def stop_process(process: Process) -> None:
    """SIGTERM, and SIGKILL when it has not ended 10 s later; reaped either way."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_answering(process: Process, url: str, output: Callable[[], str]) -> None:
    """Wait until a GET of ``url`` answers 200. Raises RuntimeError with the process's
    ``output`` when it exits first, or when START_TIMEOUT passes (it is stopped then)."""

    def answering() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{output()}")
        try:
            return http_get(url, timeout=10).status_code == 200
        except httpx2.HTTPError:
            return False

    try:
        wait_until(answering, START_TIMEOUT, 0.05)
    except AssertionError:
        stop_process(process)
        raise RuntimeError(f"server did not start within {START_TIMEOUT}s:\n{output()}") from None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def uses_postgres() -> bool:
    return os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))


@contextmanager
def fresh_database(tmp_path: Path, *, empty: bool = False) -> Iterator[str]:
    """A DATABASE_URL for a new database of the suite's kind; dropped afterwards.

    It is migrated: a copy of this process's template, which ``migrate`` made once (an
    SQLite file copied; PostgreSQL's ``CREATE DATABASE ... TEMPLATE``), so that a server
    started on it does not spend a second migrating an empty database. ``empty=True``
    gives a database nothing ever touched, for what proves the first start on one."""
    if not uses_postgres():
        path = tmp_path / "server.sqlite3"
        if not empty:
            shutil.copyfile(template_database(), path)
        yield f"sqlite:///{path}"
        return
    import psycopg

    base = os.environ["DATABASE_URL"]
    name = "gp_e2e_" + secrets.token_hex(6)
    admin_url = base.split("?")[0]
    template = "" if empty else f' TEMPLATE "{template_database()}"'
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{template}')
    try:
        yield with_database(base, name)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


_template: str | None = None


def template_database() -> str:
    """This process's migrated template (made on first use, removed when it exits): an
    SQLite file's path, or a PostgreSQL database's name."""
    global _template
    if _template is None:
        with shared("the template database"):  # made once for every test of the process
            _template = _make_template()
    return _template


def _make_template() -> str:
    if uses_postgres():
        import psycopg

        base = os.environ["DATABASE_URL"]
        admin_url = base.split("?")[0]
        name = "gp_e2e_template_" + secrets.token_hex(6)
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

        def drop() -> None:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

        atexit.register(drop)
        migrate(with_database(base, name))
        return name
    directory = Path(tempfile.mkdtemp(prefix="guidepost-template-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    path = directory / "template.sqlite3"
    migrate(f"sqlite:///{path}")
    return str(path)


def migrate(database_url: str) -> None:
    done = forks.run(
        ["manage.py", "migrate", "--verbosity", "0"],
        env={**os.environ, "DATABASE_URL": database_url},
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def copy_flows(target: Path) -> Path:
    # Not what a server running on the checkout's flows/ last copied (ADR 0081).
    shutil.copytree(BUNDLED_FLOWS, target, ignore=shutil.ignore_patterns(".guidepost-catalog.json"))
    return target


@dataclass
class Server:
    base: str
    process: forks.Forked
    log: Path
    database_url: str = ""

    @property
    def url(self) -> str:
        """The MCP endpoint."""
        return self.base + "/mcp/"

    def stop(self) -> None:
        stop_process(self.process)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def start_server(
    *,
    database_url: str,
    flows_dir: Path,
    log: Path,
    workers: int = 1,
    port: int | None = None,
    env: dict[str, str] | None = None,
    host: str | None = None,
) -> Server:
    """Start ``guidepost-mcp serve`` (migrating first; a fork of tests/support/forks.py's
    zygote) and wait until /mcp answers.

    ``host`` is passed as ``--host``; the server is reached through 127.0.0.1 whatever it
    is (``0.0.0.0`` listens there too)."""
    port = port or free_port()
    full_env = {
        # Test clients make hundreds of calls a second as one caller: the limits' own
        # tests set small ones.
        "GUIDEPOST_RATE_BURST": TEST_RATE_BURST,
        "GUIDEPOST_DRAFTS_PER_HOUR": "0",
        "GUIDEPOST_REFUSED_BURST": "0",
        **os.environ,
        "DATABASE_URL": database_url,
        "GUIDEPOST_FLOWS_POLL_MS": "200",
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    command = [
        "-m",
        "guidepost.cli",
        "serve",
        "--port",
        str(port),
        "--flows",
        str(flows_dir),
        "--workers",
        str(workers),
        *(["--host", host] if host else []),
    ]
    with log.open("wb") as handle:
        process = forks.start(command, env=full_env, output=handle)
    server = Server(
        base=f"http://127.0.0.1:{port}", process=process, log=log, database_url=database_url
    )
    wait_answering(process, server.base + "/admin/login/", server.output)
    return server


@contextmanager
def serving(tmp: Path, *, flows_dir: Path | None = None, **options: Any) -> Iterator[Server]:
    """``start_server`` on a fresh database of ``tmp`` with a copy of the bundled flows (or
    ``flows_dir``), its log in ``tmp``: stopped, and its database dropped, at the end.
    ``options``: ``start_server``'s (``env``, ``workers``, ``host``, ``port``)."""
    with fresh_database(tmp) as database_url:
        running = start_server(
            database_url=database_url,
            flows_dir=flows_dir or copy_flows(tmp / "flows"),
            log=tmp / "server.log",
            **options,
        )
        try:
            yield running
        finally:
            running.stop()


def guidepost_command(
    database_url: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``guidepost-mcp ARGS`` as a process of its own on ``database_url`` (a fork of one
    that has imported its libraries: tests/support/forks.py)."""
    return forks.run(
        ["-m", "guidepost.cli", *args],
        env={**os.environ, "DATABASE_URL": database_url, **(env or {})},
    )


DJANGO_EVAL = """
import json, sys
import django
django.setup()
namespace = {}
exec(sys.stdin.read(), namespace)
print(json.dumps(namespace["result"], default=str))
"""


def django_eval(database_url: str, code: str, *, env: dict[str, str] | None = None) -> Any:
    """Run ``code`` (which sets ``result``) in a Django process on ``database_url``: how a
    test reads or edits a real server's database. Returns ``result`` through JSON."""
    done = forks.run(
        ["-c", DJANGO_EVAL],
        env={
            **os.environ,
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "guidepost.settings",
            **(env or {}),
        },
        input=code,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])
