"""Real database faults against a real server (ADR 0035): a SQLite file locked by another
writer or made unwritable, a PostgreSQL role out of connections, and the connections a
loaded server holds. Every failure reaches the client as the error object (spec §7)
with an honest ``retryable``, ``attempt`` still counts, and the server recovers."""

from __future__ import annotations

import json
import secrets
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
import psycopg
import pytest

from tests.support.mcp_http import http_post
from tests.support.servers import Server, copy_flows, fresh_database, start_server, uses_postgres
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

RPC_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}
ERROR_KEYS = {"error", "reason", "next", "retryable", "attempt", "repeated", "retry_after"}

sqlite_only = pytest.mark.skipif(uses_postgres(), reason="a SQLite fault (the SQLite pass)")
postgres_only = pytest.mark.skipif(
    not uses_postgres(), reason="a PostgreSQL fault (the PostgreSQL pass)"
)


def call(server: Server, name: str, arguments: dict[str, Any]) -> httpx2.Response:
    """One tools/call over HTTP, as it is answered."""
    return http_post(
        server.url,
        headers=RPC_HEADERS,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        },
        timeout=30,
    )


def tool(server: Server, name: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """(is_error, the result or error object) of one tools/call over HTTP."""
    response = call(server, name, arguments)
    assert response.status_code == 200, response.text
    body = response.json()
    assert "result" in body, body  # never a raw JSON-RPC error
    result = body["result"]
    return bool(result.get("isError")), json.loads(result["content"][0]["text"])


def refused(server: Server, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    is_error, error = tool(server, name, arguments)
    assert is_error, error
    assert set(error) <= ERROR_KEYS and {"error", "reason", "next", "retryable"} <= set(error)
    assert "Traceback" not in json.dumps(error)
    return error


@contextmanager
def sqlite_server(tmp_path: Path, **env: str) -> Iterator[tuple[Server, Path]]:
    database = tmp_path / "faults.sqlite3"
    server = start_server(
        database_url=f"sqlite:///{database}",
        flows_dir=copy_flows(tmp_path / "flows"),
        log=tmp_path / "server.log",
        env=env,
    )
    try:
        yield server, database
    finally:
        server.stop()


@sqlite_only
def test_a_locked_sqlite_database_is_server_busy_counted_and_then_recovers(
    tmp_path: Path,
) -> None:
    with sqlite_server(tmp_path, GUIDEPOST_SQLITE_TIMEOUT="0.3") as (server, database):
        _, started = tool(server, "guide_start", {"flow_id": "payment_failed"})
        answer = {"run_id": started["run_id"], "choice": "E01", "at": "n_error_code"}
        holder = sqlite3.connect(database, isolation_level=None, timeout=5)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            errors = [refused(server, "guide_answer", answer) for _ in range(3)]
            # Reads still work while a writer holds the lock (WAL).
            is_error, status = tool(server, "guide_status", {"run_id": started["run_id"]})
            assert not is_error, status
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        is_error, moved = tool(server, "guide_answer", answer)

    assert [e["error"] for e in errors] == ["server busy"] * 3
    assert [e["attempt"] for e in errors] == [1, 2, 3]
    assert [e["retryable"] for e in errors] == [True, True, False]  # honest, then give up
    assert errors[0]["retry_after"] == 2 and errors[1]["repeated"] is True
    assert not is_error and moved["node"]["id"] == "n_card_age"


def _immutable(paths: list[Path], on: bool) -> None:
    for path in paths:
        if path.exists():
            subprocess.run(["chattr", "+i" if on else "-i", str(path)], check=True)


@sqlite_only
def test_an_unwritable_sqlite_database_is_storage_unavailable_and_reads_still_work(
    tmp_path: Path,
) -> None:
    with sqlite_server(tmp_path) as (server, database):
        _, started = tool(server, "guide_start", {"flow_id": "payment_failed"})
        # The database, its WAL and its directory freeze; not the -shm file: SQLite keeps
        # it mapped in memory, and the first transaction after a write records a read
        # mark in it. No real fault takes write access away from a mapping already open
        # (only chattr does); on a frozen -shm that write kills the process (SIGBUS)
        # before SQLite can report anything (ADR 0039).
        files = [Path(f"{database}{suffix}") for suffix in ("", "-wal")]
        files.append(database.parent)
        _immutable(files, True)
        try:
            start_error = refused(server, "guide_start", {"flow_id": "payment_failed"})
            answer_error = refused(
                server, "guide_answer", {"run_id": started["run_id"], "choice": "E01"}
            )
            listed, flows = tool(server, "guide_flows", {})
            read, status = tool(server, "guide_status", {"run_id": started["run_id"]})
        finally:
            _immutable(files, False)
        is_error, moved = tool(
            server, "guide_answer", {"run_id": started["run_id"], "choice": "E01"}
        )

    for error in (start_error, answer_error):
        assert (error["error"], error["retryable"]) == ("storage unavailable", False), error
        assert "human" in error["next"]
    assert answer_error["attempt"] == 1  # a different call: a streak of its own error
    assert not listed and not read, (flows, status)
    assert not is_error, moved


# --- PostgreSQL ---------------------------------------------------------------------------------


def _admin_url() -> str:
    import os

    return os.environ["DATABASE_URL"].split("?")[0]


@contextmanager
def throwaway_role_database(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A role and a database it owns, for a server to run as; dropped afterwards.
    Yields (role, DATABASE_URL as that role)."""
    role = "gp_tiny_" + secrets.token_hex(4)
    name = "gp_faults_" + secrets.token_hex(4)
    admin = _admin_url()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'CREATE DATABASE "{name}" OWNER "{role}"')
    parts = urlsplit(admin)
    url = urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port or 5432}"))
    try:
        yield role, urlunsplit(urlsplit(url)._replace(path="/" + name))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def refused_anywhere(server: Server, arguments: dict[str, Any]) -> dict[str, Any]:
    """guide_answer's refusal, as the tool's error result or, once this process's key check
    (cached for a second) needs the database too, as the gate's 503: the same error object."""
    response = call(server, "guide_answer", arguments)
    if response.status_code == 503:
        error: dict[str, Any] = response.json()
        assert response.headers["retry-after"] == "2", response.headers
    else:
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        assert result.get("isError"), result
        error = json.loads(result["content"][0]["text"])
    assert set(error) <= ERROR_KEYS and {"error", "reason", "next", "retryable"} <= set(error)
    assert "Traceback" not in json.dumps(error)
    return error


def answered_when_healthy(
    server: Server, name: str, arguments: dict[str, Any], within: float = 30.0
) -> dict[str, Any]:
    """The result of ``name`` once the server answers it: until then, ``server busy`` (the
    gate's key check or the call's) is the busy machine's or a fault's that is clearing."""
    last: list[httpx2.Response] = []

    def answered() -> dict[str, Any] | None:
        last[:] = [call(server, name, arguments)]
        response = last[0]
        result = response.json().get("result") if response.status_code == 200 else None
        if result is None or result.get("isError"):
            return None
        found: dict[str, Any] = json.loads(result["content"][0]["text"])
        return found

    return wait_until(answered, within, 0.5, message=lambda: last[0].text)


@postgres_only
def test_postgresql_out_of_connections_is_server_busy_and_then_recovers(tmp_path: Path) -> None:
    with throwaway_role_database(tmp_path) as (role, url):
        server = start_server(
            database_url=url,
            flows_dir=copy_flows(tmp_path / "flows"),
            log=tmp_path / "server.log",
            env={"GUIDEPOST_DB_POOL_TIMEOUT": "1"},
        )
        try:
            # A healthy start first: on a busy machine the pool's first connection can take
            # longer than its 1 s time-out, which is server busy too, not the fault pinned here.
            started = answered_when_healthy(server, "guide_start", {"flow_id": "payment_failed"})
            with psycopg.connect(_admin_url(), autocommit=True) as admin:
                # No connection left for the role, and the ones it held are gone.
                admin.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT 0')
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                    [role],
                )
                errors = [
                    refused_anywhere(server, {"run_id": started["run_id"], "choice": "E01"})
                    for _ in range(2)
                ]
                admin.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT -1')
            # The pool reconnects on its own; until it has, the call is refused as above (by
            # the gate's key check, a 503, or by the tool).
            moved = answered_when_healthy(
                server, "guide_answer", {"run_id": started["run_id"], "choice": "E01"}, within=20
            )
        finally:
            server.stop()

    assert [e["error"] for e in errors] == ["server busy", "server busy"], errors
    # The tool counts its failures; the gate, refusing before there is a call, counts none.
    counted = [e["attempt"] for e in errors if "attempt" in e]
    assert counted == [1, 2][: len(counted)]
    assert all(e["retryable"] and e["retry_after"] == 2 for e in errors)
    assert "too many" not in json.dumps(errors)
    assert moved["node"]["id"] == "n_card_age"


def _connections(database: str) -> int:
    with psycopg.connect(_admin_url(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [database]
        ).fetchone()
    return int(row[0]) if row else 0


SUPERVISOR_THREADS = 3


@postgres_only
def test_connections_stay_within_workers_times_pool_under_load(tmp_path: Path) -> None:
    """2 workers with a pool of 3, 60 clients at once: every call is answered, and the
    workers never hold more than 2 x 3 connections (one worker thread per connection
    before the pool; 41 per worker when this was found)."""
    workers, pool, clients = 2, 3, 60
    with fresh_database(tmp_path) as url:
        database = urlsplit(url).path.lstrip("/")
        server = start_server(
            database_url=url,
            flows_dir=copy_flows(tmp_path / "flows"),
            log=tmp_path / "server.log",
            workers=workers,
            env={"GUIDEPOST_DB_POOL_SIZE": str(pool), "GUIDEPOST_DB_POOL_TIMEOUT": "30"},
        )
        peak = 0
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, _connections(database))
                time.sleep(0.02)

        failures: list[Any] = []

        def client(number: int) -> None:
            try:
                for _ in range(3):
                    is_error, result = tool(
                        server, "guide_start", {"flow_id": "payment_failed", "ref": f"c{number}"}
                    )
                    if is_error:
                        failures.append(result)
            except Exception as exc:  # a refused or reset connection counts as a failure
                failures.append(repr(exc))

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            done.set()
            sampler.join()
            server.stop()

    assert failures == []
    # The supervisor's own threads (the ledger's sealer, the catalog's copier, the webhook
    # worker) hold one connection each at most, between their ticks none.
    assert 0 < peak <= workers * pool + SUPERVISOR_THREADS, peak
