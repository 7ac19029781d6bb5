"""The gate in front of the MCP app: every HTTP request to /mcp passes it first.

In order, it refuses a request whose Host this server does not serve (400 malformed,
421 another name), whose Origin is another site's page (403), and whose agent key is
missing where one is needed, unknown or revoked (401, ``WWW-Authenticate: Bearer``):
the shared guards decide (``check_host``, ``check_origin``, ``authenticate_key``), and
each refusal is the error object (spec §7). A request let through carries the key's
name and the peer to the tools in ``scope["state"]`` (``GateContext``), where
``guidepost.mcp.server`` builds the call's ``Transport``.

Every response with a status of 400 or more is recorded in the audit trail: the MCP
app's (413 for a body over the limit, 400 for a bad content type, ...) before it is
sent, unless the dispatcher recorded it already (``mark_recorded``: a refused resource
read is a JSON-RPC error, answered 400 on the sessionless protocol); the gate's own
refusals, made before a request has a caller, summed per address and second (one record
with a count) and written once the second is over, so that a flood of bad keys costs a
record a second, not one a request. An address that has spent its budget of refusals
(``access_app.floods``) is answered 429 with no key lookup at all (ADR 0072). Tool calls
are answered 200 (a tool's error is a result) and are recorded by the dispatcher; other
accepted messages (initialize, tools/list) are not recorded.

Key lookups come from ``access_app.keyring``'s in-process cache when it has the answer,
else from the database on a worker thread: the event loop never waits on the database.
ADR 0032 (keys, revocation latency), ADR 0033 (audit).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from django.db import close_old_connections
from starlette.datastructures import Headers

from access_app import audit, floods, guards, keyring
from access_app.callers import DEFAULT_LIMITS, Limits
from access_app.selectors import KeyStatus
from access_app.web import challenge, http_status
from flows_app.domain.errors import Refusal, error_body

logger = logging.getLogger(__name__)

Scope = dict[str, Any]
Message = dict[str, Any]
STATE_KEY = "guidepost.gate"
RECORDED_KEY = "guidepost.recorded"


@dataclass(frozen=True)
class GateContext:
    """What the gate established about a request it let through."""

    key_name: str  # the agent key's name; "" for a request without a key
    peer: str  # the client's address (uvicorn resolves forwarded headers from trusted proxies)
    key_limits: Limits = DEFAULT_LIMITS  # the key's own limits, cached with it (keyring)


def gate_context(scope: Scope) -> GateContext | None:
    """The gate's context of a request, None for one that did not pass the gate."""
    state = scope.get("state")
    found = state.get(STATE_KEY) if isinstance(state, dict) else None
    return found if isinstance(found, GateContext) else None


def mark_recorded(scope: Scope) -> None:
    """Say that this request's call has its audit record, so an error status the MCP app
    answers it with is not recorded a second time."""
    scope.setdefault("state", {})[RECORDED_KEY] = True


class Gate:
    """ASGI middleware: Host, Origin and agent key checks, and the audit of refusals."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        headers = Headers(scope=scope)
        client = scope.get("client")
        server = scope.get("server")
        peer = str(client[0]) if client else ""
        local = str(server[0]) if server else ""
        record = _Record(scope, headers, peer, started)
        try:
            guards.check_host(headers.get("host"), local)
            guards.check_origin(headers.get("origin"))
            key = await _authenticate(headers.get("authorization"), local, peer)
        except Refusal as refusal:
            status = http_status(refusal)
            record.refused(status, refusal.error)
            await _refuse(send, refusal, status)
            return
        key_name = key.name if key is not None else ""
        record.key_name = key_name
        scope.setdefault("state", {})[STATE_KEY] = GateContext(
            key_name=key_name, peer=peer, key_limits=key.limits if key else DEFAULT_LIMITS
        )
        try:
            await self.app(scope, receive, record.watch(send))
        except Exception:
            await record.write(500, "http 500")  # the server answers 500 and logs why
            raise


async def _authenticate(authorization: str | None, local: str, peer: str) -> KeyStatus | None:
    """The key, from this process's cache on the event loop, else from the database on a
    thread; an address that has spent its budget of refusals (``access_app.floods``) gets
    no database lookup, and its refusals become 429."""
    exposed = guards.exposed(local)
    try:
        return floods.authenticated(
            peer,
            functools.partial(
                guards.authenticate_key,
                authorization,
                exposed=exposed,
                find=keyring.cached,
                any_key=keyring.any_key_cached,
            ),
        )
    except keyring.NotCached:
        pass
    floods.refuse_address_over_budget(peer, authorization)
    checked = functools.partial(_authenticate_in_thread, authorization, exposed)
    return await anyio.to_thread.run_sync(floods.authenticated, peer, checked)


def _authenticate_in_thread(authorization: str | None, exposed: bool) -> KeyStatus | None:
    close_old_connections()
    try:
        return guards.authenticate_key(
            authorization, exposed=exposed, find=keyring.lookup, any_key=keyring.any_key
        )
    finally:
        close_old_connections()


async def _refuse(send: Any, refusal: Refusal, status: int) -> None:
    body = error_body(refusal)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if status == 401:
        headers.append((b"www-authenticate", challenge(refusal).encode()))
    if refusal.retry_after is not None:
        headers.append((b"retry-after", str(max(1, math.ceil(refusal.retry_after))).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _Record:
    """The audit record of one request refused at the HTTP level."""

    def __init__(self, scope: Scope, headers: Headers, peer: str, started: float) -> None:
        self.scope = scope
        self.tool = f"{scope.get('method', '')} {scope.get('path', '')}"
        self.client = headers.get("user-agent", "")
        self.peer = peer
        self.started = started
        self.key_name = ""

    def entry(self, status: int, outcome: str) -> audit.Entry:
        return audit.Entry(
            tool=self.tool,
            outcome=outcome,
            status=status,
            duration_ms=(time.monotonic() - self.started) * 1000,
            key_name=self.key_name,
            caller=f"key:{self.key_name}" if self.key_name else "",
            client=audit.clean(self.client, 200),
            peer=self.peer,
        )

    async def write(self, status: int, outcome: str) -> None:
        await anyio.to_thread.run_sync(_audit_in_thread, self.entry(status, outcome))

    def refused(self, status: int, outcome: str) -> None:
        """A request refused before it had a caller: summed with the others of its address
        and second, written within about a second (a flood is a record a second)."""
        audit.audit_refusal(self.entry(status, outcome))
        _flush_later()

    def watch(self, send: Any) -> Any:
        """``send`` that holds back an error response (status 400 or more) until its body is
        complete, records it, then sends it: a client that has the answer finds the record."""
        held: list[Message] = []
        status = 0

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            if status < 400:
                await send(message)
                return
            held.append(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                if not self.scope.get("state", {}).get(RECORDED_KEY):
                    await self.write(status, f"http {status}")
                for item in held:
                    await send(item)
                held.clear()

        return watched


_flush_scheduled = False


def _flush_later() -> None:
    """Write the summed refusals once their second is over, on a thread (never on the
    event loop), and again while some are pending."""
    global _flush_scheduled
    if _flush_scheduled:
        return
    _flush_scheduled = True
    loop = asyncio.get_running_loop()
    loop.call_later(1.0, lambda: loop.create_task(_flush()))


async def _flush() -> None:
    global _flush_scheduled
    try:
        await anyio.to_thread.run_sync(_flush_in_thread)
    finally:
        _flush_scheduled = False
        if audit.refusal_summaries.pending():
            _flush_later()


def _flush_in_thread() -> None:
    close_old_connections()
    try:
        audit.audit_summaries_flush()
    finally:
        close_old_connections()


def _audit_in_thread(entry: audit.Entry) -> None:
    close_old_connections()
    try:
        audit.audit_safely(entry)
    finally:
        close_old_connections()
