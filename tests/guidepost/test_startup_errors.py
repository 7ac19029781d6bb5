"""``serve`` refusing to start: one line naming what to fix, never a traceback or a banner.

Each case runs the real command in a process of its own, as a person would (forked from
one that imported the libraries already: tests/support/forks.py).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import forks
from tests.support.paths import BROKEN_FLOWS
from tests.support.servers import (
    BUNDLED_FLOWS,
    REPO,
    Server,
    copy_flows,
    free_port,
    fresh_database,
    start_server,
)

pytestmark = pytest.mark.slow

BANNER = "guidepost: "


def serve(
    *args: str, env: dict[str, str] | None = None, flows: Path = BUNDLED_FLOWS
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return forks.run(["-m", "guidepost.cli", "serve", "--flows", str(flows), *args], env=full_env)


def assert_refused_in_one_line(result: subprocess.CompletedProcess[str], *names: str) -> str:
    assert result.returncode != 0
    assert BANNER not in result.stdout, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def read_only_database() -> Iterator[Path]:
    """A migrated SQLite file that nobody, root included, may write (immutable when root)."""
    directory = REPO / "var" / f"read-only-{secrets.token_hex(4)}"
    directory.mkdir(parents=True)
    path = directory / "ro.sqlite3"
    migrated = forks.run(
        ["manage.py", "migrate", "-v0"], env={**os.environ, "DATABASE_URL": f"sqlite:///{path}"}
    )
    assert migrated.returncode == 0, migrated.stderr
    root = os.geteuid() == 0
    if root:
        subprocess.run(["chattr", "+i", str(path)], check=True)
    else:
        path.chmod(0o444)
    try:
        yield path
    finally:
        if root:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        shutil.rmtree(directory)


@pytest.mark.parametrize(
    ("database", "names"),
    [
        ("/proc/nope/guidepost.sqlite3", ["/proc/nope/guidepost.sqlite3", "/proc/nope"]),
        ("/sys/guidepost.sqlite3", ["/sys/guidepost.sqlite3", "writable"]),
    ],
    ids=["directory-cannot-be-made", "directory-not-writable"],
)
def test_an_unusable_sqlite_path_is_one_line_naming_database_url_and_the_path(
    database: str, names: list[str]
) -> None:
    result = serve("--port", str(free_port()), env={"DATABASE_URL": f"sqlite:///{database}"})
    assert_refused_in_one_line(result, "DATABASE_URL", *names)


def test_a_read_only_sqlite_file_is_refused_before_serving(read_only_database: Path) -> None:
    result = serve(
        "--port", str(free_port()), env={"DATABASE_URL": f"sqlite:///{read_only_database}"}
    )
    line = assert_refused_in_one_line(result, "DATABASE_URL", str(read_only_database))
    assert "readonly" in line


def test_a_closed_postgres_port_is_one_line_naming_database_url_and_the_host() -> None:
    closed = free_port()
    result = serve(
        "--port",
        str(free_port()),
        env={"DATABASE_URL": f"postgres://guidepost:secret@127.0.0.1:{closed}/guidepost"},
    )
    line = assert_refused_in_one_line(result, "DATABASE_URL", f"127.0.0.1:{closed}", "guidepost")
    assert "secret" not in line


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("GUIDEPOST_PORT", "eighty", "eighty"),
        ("GUIDEPOST_AUTH", "maybe", "maybe"),
        ("GUIDEPOST_TRUSTED_PROXIES", "10.0.0.1, proxy.example", "proxy.example"),
    ],
)
def test_a_malformed_variable_is_one_line_naming_it(name: str, value: str, shown: str) -> None:
    result = serve(env={name: value})
    assert_refused_in_one_line(result, name, shown)


def test_flows_with_lint_errors_are_refused_with_file_and_line(tmp_path: Path) -> None:
    broken = BROKEN_FLOWS
    result = serve(
        "--port",
        str(free_port()),
        env={"DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"},
        flows=broken,
    )
    assert result.returncode != 0
    assert BANNER not in result.stdout
    assert result.stderr.strip().splitlines() == [
        "error bad_target broken/n_start/next: next 'n_nowhere' names no node: "
        f"point it at an existing node id ({broken / 'broken.yaml'}:9)",
        f"CommandError: 1 lint error in {broken}; fix them (guidepost-mcp lint) before serving",
    ]


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    tmp = tmp_path_factory.mktemp("busy")
    with fresh_database(tmp) as database_url:
        server = start_server(  # a copy: a running server writes its flows directory
            database_url=database_url, flows_dir=copy_flows(tmp / "flows"), log=tmp / "server.log"
        )
        try:
            yield server, database_url
        finally:
            server.stop()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_second_serve_on_a_busy_port_says_so_without_announcing_itself(
    running: tuple[Server, str], workers: str
) -> None:
    server, database_url = running
    port = server.base.rsplit(":", 1)[1]
    result = serve("--port", port, "--workers", workers, env={"DATABASE_URL": database_url})
    assert_refused_in_one_line(result, f"127.0.0.1:{port}", "address already in use")
    assert server.process.poll() is None  # the first server is untouched
