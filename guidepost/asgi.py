"""The ASGI application: the MCP endpoint at /mcp (and /mcp/), Django for everything else.

Django's ASGI handler refuses lifespan events, and the MCP SDK's Streamable HTTP
app needs its lifespan to run its task group, so this small router owns the
lifespan and hands it to the MCP app. The MCP app sits behind its gate (Host,
Origin, agent keys, methods: ``guidepost.mcp.gate``); Django checks the same for its
pages and the API in its middleware. The health endpoints (/healthz, /readyz:
``guidepost.health``) are answered here, before either; a process that is draining
(``guidepost.startup.drain``, on SIGTERM) refuses new requests here with ``server busy``
and counts the ones it is still answering.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import anyio.to_thread
from starlette.datastructures import Headers

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "guidepost.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_app = get_asgi_application()  # sets Django up before the tools import models

from django.conf import settings  # noqa: E402
from django.core.exceptions import ImproperlyConfigured  # noqa: E402

from access_app import audit, oauth, request_ids  # noqa: E402
from access_app.agent_keys import auth_mode_problem  # noqa: E402
from flowcore.common.limits import MAX_REQUEST_BYTES  # noqa: E402
from guidepost import __version__, health, tracing  # noqa: E402
from guidepost.connections import refuse_busy  # noqa: E402
from guidepost.loops import start_refusals  # noqa: E402
from guidepost.mcp.gate import refuse_before_a_caller, request_too_large  # noqa: E402
from guidepost.mcp.server import build_mcp_app  # noqa: E402
from guidepost.startup import counted_in_flight, die_with_supervisor, draining  # noqa: E402

Scope = dict[str, Any]


class Router:
    def __init__(self, django: Any, mcp: Any, prefix: str = "/mcp") -> None:
        self.django = django
        self.mcp = mcp
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            die_with_supervisor()  # a worker of `serve --workers N` ends with its supervisor
            # Served, not merely imported (pytest imports this module for its doctests).
            stop = start_refusals()
            tracing.start()
            await self.mcp(scope, receive, _written_at_shutdown(send, stop))
            return
        path = scope.get("path", "")
        if scope["type"] == "http" and path in health.PATHS:
            await health.answer(scope, send)  # before anything else: no Host, key or limit
            return
        if scope["type"] == "http":
            scope, send = with_request_id(scope, send)
        if draining():
            # SIGTERM: the calls under way are answered; a new one goes elsewhere.
            await refuse_busy(send, "this instance is shutting down")
            return
        with counted_in_flight():
            if path in (self.prefix, self.prefix + "/"):
                # Serve both spellings without a redirect round trip. Any method goes to
                # the gate, which answers all but POST with 405 (and records it).
                scope = dict(scope, path=self.prefix, raw_path=self.prefix.encode())
                await self.mcp(scope, receive, send)
                return
            if scope["type"] == "http":
                bounded = await bounded_body(scope, receive, send)
                if bounded is None:
                    return
                receive = bounded
            await self.django(scope, receive, send)


def with_request_id(scope: Scope, send: Any) -> tuple[Scope, Any]:
    """The request under its id (``access_app.request_ids``): the header the application
    reads replaced by it, ``current`` set for the code that answers, and the response's
    ``X-Request-ID`` saying it."""
    given = [value for name, value in scope["headers"] if name == b"x-request-id"]
    request_id = request_ids.request_id_for(given[0].decode("latin-1") if given else None)
    request_ids.current.set(request_id)
    stamped = (b"x-request-id", request_id.encode("ascii"))
    headers = [(name, value) for name, value in scope["headers"] if name != b"x-request-id"]
    scope = dict(scope, headers=[*headers, stamped])

    async def send_with_id(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = dict(message, headers=[*message.get("headers", ()), stamped])
        await send(message)

    return scope, send_with_id


async def bounded_body(scope: Scope, receive: Any, send: Any) -> Any:
    """``receive`` for a request whose body is within ``MAX_REQUEST_BYTES``, or None when it
    is not and 413 ``request too large`` was answered and recorded. Django reads a whole
    body before a view or a middleware sees it (and parses up to 2.5 MiB of it), so the
    bound is kept here: a declared length is judged before a byte is read, and a body
    sent in chunks is read up to the bound, then handed on as it came."""
    declared = Headers(scope=scope).get("content-length")
    if declared is not None:
        if declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
            await refuse_before_a_caller(scope, send, request_too_large(), 413)
            return None
        return receive
    messages, size = [], 0
    while True:
        message = await receive()
        messages.append(message)
        size += len(message.get("body", b""))
        if size > MAX_REQUEST_BYTES:
            await refuse_before_a_caller(scope, send, request_too_large(), 413)
            return None
        if message["type"] != "http.request" or not message.get("more_body"):
            break

    async def replay() -> Any:
        return messages.pop(0) if messages else await receive()

    return replay


def _written_at_shutdown(send: Any, writer: threading.Event) -> Any:
    """The lifespan's ``send``: before its shutdown is reported done, the loop writing
    refusals stops and those summed in the last second are written, and the spans not yet
    exported are (the process would otherwise end with them)."""

    async def forward(message: dict[str, Any]) -> None:
        if message["type"] in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
            writer.set()
            await anyio.to_thread.run_sync(audit.write_pending_refusals)
            await anyio.to_thread.run_sync(tracing.stop)
        await send(message)

    return forward


def build_application() -> Router:
    problem = auth_mode_problem(settings.GUIDEPOST_AUTH, settings.GUIDEPOST_HOST)
    problem = problem or oauth.settings_problem()
    if problem:
        raise ImproperlyConfigured(problem)
    return Router(django_app, build_mcp_app(__version__))


application = build_application()
