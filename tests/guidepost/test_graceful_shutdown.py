"""An instance that is told to stop (SIGTERM) finishes what it is answering and exits 0:
/readyz turns 503 at once so a load balancer drains it, a new request is refused with
``server busy`` (retryable: another instance or this one restarted answers the retry),
the call in flight is answered, and only then does the process exit, with 0 (issue 24
point 2); ``serve`` says "MCP at …" only once it answers (issue 18 point 3). ADR 0075.

The call in flight is made slow for real: the test holds a write lock on the server's
database (SQLite's write lock, or PostgreSQL's lock on the runs table), so ``guide_start``
waits inside the server until the test lets go.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest

from tests.support.mcp_http import http_get, outcome, post
from tests.support.paths import REPO
from tests.support.servers import (
    copy_flows,
    free_port,
    fresh_database,
    start_server,
    uses_postgres,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


@contextmanager
def writes_held(database_url: str) -> Iterator[None]:
    """While inside, nothing can start a run on ``database_url``: the test holds the lock."""
    if uses_postgres():
        import psycopg

        with psycopg.connect(database_url.split("?")[0]) as conn:
            conn.execute("LOCK TABLE runs_app_run IN EXCLUSIVE MODE")
            yield
            conn.rollback()
        return
    conn = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def reached(ask: Callable[[], httpx2.Response]) -> list[httpx2.Response]:
    """``ask``'s response, or none when the connection was reset or refused."""
    try:
        return [ask()]
    except httpx2.TransportError:
        return []


# How the signal comes: to the process `serve` (Kubernetes, docker stop), or to the
# process and every worker at once (systemd's default KillMode=control-group): the
# workers then get a second SIGTERM from their supervisor, which must not cut the drain.
SIGNALLED = {"one process": (1, False), "two workers": (2, False), "systemd": (2, True)}


@pytest.mark.parametrize("how", SIGNALLED, ids=list(SIGNALLED))
def test_sigterm_answers_the_call_in_flight_refuses_new_ones_and_exits_0(
    tmp_path: Path, how: str
) -> None:
    workers, everyone = SIGNALLED[how]
    with fresh_database(tmp_path) as database_url:
        server = start_server(
            database_url=database_url,
            flows_dir=copy_flows(tmp_path / "flows"),
            log=tmp_path / "server.log",
            workers=workers,
            env={"GUIDEPOST_SHUTDOWN_GRACE": "60", "GUIDEPOST_SQLITE_TIMEOUT": "60"},
        )
        try:
            assert http_get(server.base + "/readyz", timeout=10).status_code == 200
            answered: dict[str, httpx2.Response] = {}
            with writes_held(database_url):
                call = threading.Thread(
                    target=lambda: answered.update(
                        start=post(server.base, "guide_start", {"flow_id": "refund_request"})
                    )
                )
                call.start()
                time.sleep(2)  # the call reaches the lock and waits there
                workers_of = children_of(server.process.pid) if everyone else []
                server.process.send_signal(signal.SIGTERM)
                for pid in workers_of:
                    os.kill(pid, signal.SIGTERM)

                # Under systemd the worker with nothing in flight ends at once: a request
                # it had just accepted is reset, and a client tries again (as told).
                def not_ready() -> list[httpx2.Response]:
                    ready = reached(lambda: http_get(server.base + "/readyz", timeout=10))
                    return ready if ready and ready[0].status_code == 503 else []

                [readiness] = wait_until(not_ready, 20, 0.05, message=server.output)
                assert readiness.json()["error"] == "not ready"
                [refused] = wait_until(
                    lambda: reached(lambda: post(server.base, "guide_flows", {}))
                )
                assert refused.status_code == 503
                assert refused.json()["error"] == "server busy"
                assert refused.json()["retryable"] is True
                assert refused.headers["retry-after"]
                assert call.is_alive() and server.process.poll() is None
            call.join(60)
            is_error, payload = outcome(answered["start"])
            assert not is_error and payload["run_id"], payload
            assert server.process.wait(60) == 0, server.output()
            assert "Traceback" not in server.output()
        finally:
            server.stop()


def test_sigterm_with_nothing_in_flight_exits_0_at_once(tmp_path: Path) -> None:
    """At once: well within the grace, which a server that waited it out would use up."""
    grace = 16.0
    with fresh_database(tmp_path) as database_url:
        server = start_server(
            database_url=database_url,
            flows_dir=copy_flows(tmp_path / "flows"),
            log=tmp_path / "server.log",
            env={"GUIDEPOST_SHUTDOWN_GRACE": f"{grace:g}"},
        )
        try:
            server.process.send_signal(signal.SIGTERM)
            assert server.process.wait(grace / 2) == 0, server.output()
        finally:
            server.stop()


def test_serve_announces_itself_only_once_it_answers(tmp_path: Path) -> None:
    port = free_port()
    with fresh_database(tmp_path) as database_url:
        process = subprocess.Popen(
            [sys.executable, "-m", "guidepost.cli", "serve", "--port", str(port)],
            cwd=REPO,
            env={
                **os.environ,
                "DATABASE_URL": database_url,
                "GUIDEPOST_FLOWS_DIR": str(copy_flows(tmp_path / "flows")),
                "PYTHONUNBUFFERED": "1",
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert process.stdout is not None
            for line in process.stdout:
                if "MCP at" in line:
                    break
            else:
                pytest.fail("serve ended without announcing itself")
            # At once: no retry, no wait. Before, the line came 1 to 12 s before uvicorn
            # listened, and this connection was refused.
            response = http_get(f"http://127.0.0.1:{port}/healthz", timeout=10)
            assert response.status_code == 200
        finally:
            process.terminate()
            process.wait(30)
