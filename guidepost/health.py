"""Health endpoints for load balancers and orchestrators, answered by the ASGI router before
Django, the MCP gate or the rate limit see the request:

- ``GET /healthz``: the process answers. Nothing else is looked at (no database): 200
  ``{"status": "ok"}``.
- ``GET /readyz``: this process can serve calls: its database answers a query on a new
  connection within ``READY_TIMEOUT`` seconds, every migration is applied, the flows
  catalog is loaded, and no background loop is overdue; 200 ``{"status": "ready",
  "loops": {...}}`` (each loop's last tick and interval), else 503 with the error object
  (``not ready``, ``retry_after``). A process that is draining
  (``guidepost.startup.drain``: SIGTERM) is not ready, so a load balancer sends it nothing
  new while it finishes its calls.

Both are unauthenticated, take no Host or Origin check (a probe may name the instance by
its address), are neither rate-limited nor audited, and say nothing a stranger could use:
no version, no database name, no error text from the driver. A successful check is kept
for ``READY_CACHE`` seconds and only one check runs at a time, so a probe every 100 ms
costs one query a second; migrations, once found applied, are not looked at again.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread
from django.db import DEFAULT_DB_ALIAS, close_old_connections, connections
from django.db.migrations.executor import MigrationExecutor

from access_app.faults import fault_kind
from flowcore.common.errors import Refusal, error_body
from flows_app.catalog import current_catalog
from guidepost.loops import heartbeats
from guidepost.startup import draining

HEALTH = "/healthz"
READY = "/readyz"
PATHS = frozenset({HEALTH, READY})
# Seconds a readiness check may take before the answer is "not ready": less than a load
# balancer's probe time-out (nginx, Kubernetes: 1 to 5 s), far less than the pool's wait.
READY_TIMEOUT = 2.0
READY_CACHE = 1.0
RETRY_AFTER = 2

_OK = json.dumps({"status": "ok"}).encode()


def not_ready(reason: str) -> Refusal:
    return Refusal(
        "not ready",
        reason,
        "Send calls to another instance, or call again after retry_after seconds.",
        retryable=True,
        retry_after=RETRY_AFTER,
    )


def method_not_allowed(path: str) -> Refusal:
    return Refusal(
        "method not allowed",
        f"{path} answers GET and HEAD only",
        f"Send GET {path}.",
    )


class Readiness:
    """The readiness check of one process: one at a time, a success kept briefly."""

    def __init__(self) -> None:
        self._ready_at = -READY_CACHE
        self._migrated = False
        self._running: asyncio.Task[str | None] | None = None
        # Each background loop's last tick, as the last check found it: {loop: {...}}.
        self.loops: dict[str, dict[str, object]] = {}

    async def problem(self) -> str | None:
        """None when ready, else why not (one sentence, nothing internal)."""
        if draining():
            return "this instance is shutting down: it finishes the calls under way and stops"
        if time.monotonic() - self._ready_at < READY_CACHE:
            return None
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(anyio.to_thread.run_sync(self._check))
        try:
            problem = await asyncio.wait_for(asyncio.shield(self._running), READY_TIMEOUT)
        except TimeoutError:
            return f"the database did not answer within {READY_TIMEOUT:g} seconds"
        if problem is None:
            self._ready_at = time.monotonic()
        return problem

    def _check(self) -> str | None:
        """On a worker thread: the database, the migrations, the catalog."""
        close_old_connections()
        # A connection of the check's own, closed after it: a worker thread keeps its
        # SQLite connection open, and that one answers SELECT 1 whatever became of the
        # file, while every new connection fails (its directory moved, a volume gone).
        connection = connections.create_connection(DEFAULT_DB_ALIAS)
        try:
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT 1")
                    cursor.fetchone()
                if not self._migrated:
                    executor = MigrationExecutor(connection)
                    targets = executor.loader.graph.leaf_nodes()
                    if executor.migration_plan(targets):
                        return "the database lacks migrations: run guidepost-mcp serve or migrate"
                    self._migrated = True
            except Exception as exc:
                kind = fault_kind(exc) or "failed"
                return f"the database cannot be used ({kind})"
            finally:
                connection.close()
            try:
                current_catalog()
            except Exception:
                return "the flows catalog cannot be loaded"
            return self._loops_problem()
        finally:
            close_old_connections()

    def _loops_problem(self) -> str | None:
        """Why a background loop keeps this instance from being ready: it has not ticked
        for several of its intervals (its work, sealing or delivering, is not being done)."""
        now = time.time()
        beats = heartbeats()
        self.loops = {
            beat.loop: {"last_tick": _utc(beat.last_tick), "interval": beat.interval}
            for beat in beats
        }
        late = [beat for beat in beats if beat.overdue(now)]
        if late:
            return "background work is overdue: " + ", ".join(
                f"the {beat.loop} loop has not ticked since {_utc(beat.last_tick)}" for beat in late
            )
        return None


def _utc(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


readiness = Readiness()


async def answer(scope: dict[str, Any], send: Any) -> None:
    path = scope.get("path", "")
    method = scope.get("method", "GET")
    if method not in ("GET", "HEAD"):
        await _send(send, 405, error_body(method_not_allowed(path)), method, allow=True)
        return
    if path == HEALTH:
        await _send(send, 200, _OK, method)
        return
    problem = await readiness.problem()
    if problem is None:
        ready = json.dumps({"status": "ready", "loops": readiness.loops}).encode()
        await _send(send, 200, ready, method)
        return
    await _send(send, 503, error_body(not_ready(problem)), method, retry_after=RETRY_AFTER)


async def _send(
    send: Any,
    status: int,
    body: bytes,
    method: str,
    *,
    allow: bool = False,
    retry_after: int | None = None,
) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
    ]
    if allow:
        headers.append((b"allow", b"GET, HEAD"))
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
