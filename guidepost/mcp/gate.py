"""The gate in front of the MCP app: every HTTP request to /mcp passes it first.

Through the shared guards it refuses, as the error object, a request whose Host this
server does not serve (400, 421), whose Origin is another site's page (403), or whose
agent key is missing where one is needed, unknown or revoked (401); a request let through
carries the key's name and the peer to the tools (``GateContext``). Every response with a
status of 400 or more is recorded in the audit trail (tool calls, answered 200, are the
dispatcher's to record), the gate's own refusals summed per address and second, so a
flood of bad keys costs a record a second. Keys come from ``access_app.keyring``'s
in-process cache when it has them, else from the database on a worker thread: the event
loop never waits on the database.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from django.conf import settings
from django.db import close_old_connections
from starlette.datastructures import Headers

from access_app import audit, floods, guards, keyring, oauth
from access_app.agent_keys import bearer_token
from access_app.callers import DEFAULT_LIMITS, OAUTH, Limits
from access_app.faults import fault_refusal
from access_app.selectors import KeyStatus
from access_app.web import challenge, http_status
from flowcore.common.errors import Refusal, error_body, error_object, internal_error
from flowcore.common.jsontext import compact_json
from flowcore.common.limits import MAX_REQUEST_BYTES

logger = logging.getLogger(__name__)

Scope = dict[str, Any]
Message = dict[str, Any]
STATE_KEY = "guidepost.gate"
RECORDED_KEY = "guidepost.recorded"


@dataclass(frozen=True)
class GateContext:
    """What the gate established about a request it let through."""

    # The agent key's name ("oauth:SUBJECT" for an access token); "" for no credential
    key_name: str
    peer: str  # the client's address (uvicorn resolves forwarded headers from trusted proxies)
    key_limits: Limits = DEFAULT_LIMITS  # the key's own limits, cached with it (keyring)
    token_scopes: frozenset[str] | None = None  # an access token's; None for a key


def gate_context(scope: Scope) -> GateContext | None:
    state = scope.get("state")
    found = state.get(STATE_KEY) if isinstance(state, dict) else None
    return found if isinstance(found, GateContext) else None


def mark_recorded(scope: Scope) -> None:
    """Say that this request's call has its audit record, so an error status the MCP app
    answers it with is not recorded a second time."""
    scope.setdefault("state", {})[RECORDED_KEY] = True


async def record_call_refused(scope: Scope, tool: str, outcome: str) -> None:
    """Record a JSON-RPC request the MCP app refused (an unknown method) as the gate
    records the others, with the caller the gate established, and mark it recorded."""
    context = gate_context(scope)
    headers = Headers(scope=scope)
    record = _Record(scope, headers, context.peer if context else "", time.monotonic())
    record.tool = tool
    record.key_name = context.key_name if context else ""
    mark_recorded(scope)
    await record.write(200, outcome)


async def refuse_before_a_caller(scope: Scope, send: Any, refusal: Refusal, status: int) -> None:
    """Answer a request no caller is known for yet with ``refusal``, and record it (summed
    with the others of its address and second), as the gate does its own refusals."""
    client = scope.get("client")
    peer = str(client[0]) if client else ""
    record = _Record(scope, Headers(scope=scope), peer, time.monotonic())
    record.refused(status, refusal.error)
    await _refuse(send, refusal, status)


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
        metadata = ""
        try:
            guards.check_host(headers.get("host"), local)
            guards.check_origin(headers.get("origin"))
            if scope.get("method") != "POST":
                # The stateless transport serves POST only. The SDK would answer a GET with
                # an event stream held open for ever (nothing is ever sent on it): a few
                # thousand of them exhaust the process.
                raise method_not_allowed(str(scope.get("method", "")))
            if settings.GUIDEPOST_OAUTH_ISSUER:
                metadata = oauth.metadata_url(
                    scope.get("scheme", "http"), headers.get("host") or local
                )
            credential = await _authenticate(headers.get("authorization"), local, peer)
        except Refusal as refusal:
            status = 405 if refusal.error == "method not allowed" else http_status(refusal)
            record.refused(status, refusal.error)
            await _refuse(send, refusal, status, metadata)
            return
        except Exception as exc:
            # The key could not be looked up: its database cannot be reached (``server
            # busy``, retryable), or something unforeseen (``internal error``).
            failed = fault_refusal(exc) or internal_error()
            status = http_status(failed) if failed.error != "internal error" else 500
            if status == 500:
                logger.exception("the key of a request could not be checked")
            else:
                logger.warning("the key of a request could not be checked: %s", failed.error)
            record.refused(status, failed.error)
            await _refuse(send, failed, status)
            return
        if isinstance(credential, oauth.Principal):
            context = GateContext(
                key_name=OAUTH + credential.subject, peer=peer, token_scopes=credential.scopes
            )
        elif credential is not None:
            context = GateContext(key_name=credential.name, peer=peer, key_limits=credential.limits)
        else:
            context = GateContext(key_name="", peer=peer)
        record.key_name = context.key_name
        scope.setdefault("state", {})[STATE_KEY] = context
        watched = record.watch(send)
        try:
            await self.app(scope, receive, watched)
        except Exception as exc:
            failure = fault_refusal(exc) or internal_error()
            if failure.error == "internal error":
                logger.exception("an MCP request failed")
            if record.started_response:
                raise  # too late for an answer of ours: the server closes the connection
            await watched.refuse(failure, 500 if failure.error == "internal error" else 503)


def method_not_allowed(method: str) -> Refusal:
    return Refusal(
        "method not allowed",
        f"this server is stateless and takes POST only at /mcp, not {method[:16]}",
        "Send each JSON-RPC message as a POST, as MCP's Streamable HTTP transport does.",
    )


async def _authenticate(
    authorization: str | None, local: str, peer: str
) -> KeyStatus | oauth.Principal | None:
    """The key or access token, from this process's cache on the event loop, else from the
    database or the token's issuer on a thread; an address that has spent its budget of
    refusals (``access_app.floods``) gets no lookup, and its refusals become 429."""
    token = bearer_token(authorization)
    if token is not None and oauth.is_access_token(token):
        try:
            return floods.authenticated(peer, functools.partial(oauth.verify, token, fetch=False))
        except oauth.NeedsFetch:
            pass
        floods.refuse_address_over_budget(peer, authorization)
        fetched = functools.partial(oauth.verify, token, fetch=True)
        return await anyio.to_thread.run_sync(floods.authenticated, peer, fetched)
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


async def _refuse(send: Any, refusal: Refusal, status: int, metadata: str = "") -> None:
    body = error_body(refusal)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if status == 401:
        headers.append((b"www-authenticate", challenge(refusal, metadata).encode()))
    if status == 405:
        headers.append((b"allow", b"POST"))
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

    started_response = False

    def watch(self, send: Any) -> _Watched:
        """``send`` that holds back an error response (status 400 or more) until its body is
        complete, answers it in the error shape (``shaped``), records it, then sends it: a
        client that has the answer finds the record."""
        return _Watched(self, send)


class _Watched:
    def __init__(self, record: _Record, send: Any) -> None:
        self.record = record
        self.send = send
        self.held: list[Message] = []
        self.status = 0

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            self.record.started_response = True
        if self.status < 400:
            await self.send(message)
            return
        self.held.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            start, *parts = self.held
            self.held.clear()
            body = b"".join(part.get("body", b"") for part in parts)
            if self.record.scope.get("state", {}).get(RECORDED_KEY):
                # The dispatcher answered and recorded it (a refused resource read).
                await self.send(start)
                await self.send({"type": "http.response.body", "body": body})
                return
            refusal, body = shaped(self.status, body)
            await self.record.write(self.status, refusal.error)
            await self._send(start, body)

    async def refuse(self, refusal: Refusal, status: int) -> None:
        """Answer ``refusal`` ourselves (the app failed before it answered)."""
        self.status = status
        if status == 503:  # the database is what failed: the access log has the line
            audit.access_log(self.record.entry(status, refusal.error))
        else:
            await self.record.write(status, refusal.error)
        start = {"type": "http.response.start", "status": status, "headers": []}
        await self._send(start, error_body(refusal), retry_after=refusal.retry_after)

    async def _send(self, start: Message, body: bytes, retry_after: float | None = None) -> None:
        headers = [
            (name, value)
            for name, value in start.get("headers", [])
            if name.lower() not in (b"content-type", b"content-length")
        ]
        headers += [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        if retry_after is not None:
            headers.append((b"retry-after", str(max(1, math.ceil(retry_after))).encode()))
        await self.send(dict(start, headers=headers))
        await self.send({"type": "http.response.body", "body": body})


def shaped(status: int, body: bytes) -> tuple[Refusal, bytes]:
    """The refusal an error response of the MCP SDK stands for, and its body in the error
    shape: a refusal of the HTTP request itself (a body that is not JSON-RPC, a wrong
    Content-Type, a body over 1 MiB) becomes the error object; a JSON-RPC error answering
    one request (it has an ``id``) stays one, with the error object as its ``data`` (as
    refused resource reads have it)."""
    try:
        message = json.loads(body)
    except ValueError:
        message = None
    said = body.decode("utf-8", "replace")
    rpc_error = None
    if isinstance(message, dict) and isinstance(message.get("error"), dict):
        rpc_error = message["error"]
        said = str(rpc_error.get("message", ""))
    refusal = sdk_refusal(status, said)
    if rpc_error is None or message is None or message.get("id") is None:
        return refusal, error_body(refusal)
    if not (isinstance(rpc_error.get("data"), dict) and "error" in rpc_error["data"]):
        rpc_error["data"] = dict(error_object(refusal))
    return refusal, compact_json(message).encode()


def request_too_large() -> Refusal:
    return Refusal(
        "request too large",
        f"the request body is over {MAX_REQUEST_BYTES // (1024 * 1024)} MiB",
        "Send a smaller body: a flow's YAML may be up to 256 KiB.",
    )


def sdk_refusal(status: int, said: str) -> Refusal:
    """The error object for an error status the MCP SDK answered with, ``said`` being its
    own words (the first line is kept: a validation error's details are the SDK's)."""
    words = said.strip().splitlines()[0][:160] if said.strip() else f"HTTP {status}"
    if words.startswith("Validation error"):
        words = "the body is not a JSON-RPC 2.0 request, notification or response"
    if status == 413:
        return request_too_large()
    if status == 406:
        return Refusal(
            "not acceptable",
            words,
            "Send Accept: application/json, text/event-stream, as MCP clients do.",
            retryable=True,
        )
    if status >= 500:
        return internal_error()
    return Refusal(
        "invalid request",
        words,
        "Send one JSON-RPC 2.0 message as a POST body with Content-Type: application/json, "
        "as an MCP client does.",
        retryable=True,
    )


def _audit_in_thread(entry: audit.Entry) -> None:
    close_old_connections()
    try:
        audit.audit_safely(entry)
    finally:
        close_old_connections()
