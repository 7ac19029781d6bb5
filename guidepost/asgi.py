"""The ASGI application: the MCP endpoint at /mcp (and /mcp/), Django for everything else.

Django's ASGI handler refuses lifespan events, and the MCP SDK's Streamable HTTP
app needs its lifespan to run its task group, so this small router owns the
lifespan and hands it to the MCP app. The MCP app sits behind its gate (Host,
Origin, agent keys: ``guidepost.mcp.gate``); Django checks the same for its pages and
the API in its middleware.
"""

from __future__ import annotations

import json
import os
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "guidepost.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_app = get_asgi_application()  # sets Django up before the tools import models

from django.conf import settings  # noqa: E402
from django.core.exceptions import ImproperlyConfigured  # noqa: E402

from flows_app.domain.access import auth_mode_problem  # noqa: E402
from guidepost import __version__  # noqa: E402
from guidepost.mcp.server import build_mcp_app  # noqa: E402
from guidepost.startup import die_with_supervisor  # noqa: E402

Scope = dict[str, Any]

# The stateless transport serves POST only. The SDK would answer a GET with an event
# stream held open for ever (nothing is ever sent on it): a few thousand of them exhaust
# the process. Streamable HTTP lets a server answer 405 instead (ADR 0034).
_METHOD_NOT_ALLOWED = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": "Method Not Allowed: this server is stateless and takes POST only",
        },
    }
).encode()


async def method_not_allowed(send: Any) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 405,
            "headers": [
                (b"content-type", b"application/json"),
                (b"allow", b"POST"),
                (b"content-length", str(len(_METHOD_NOT_ALLOWED)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": _METHOD_NOT_ALLOWED})


class Router:
    def __init__(self, django: Any, mcp: Any, prefix: str = "/mcp") -> None:
        self.django = django
        self.mcp = mcp
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            die_with_supervisor()  # a worker of `serve --workers N` ends with its supervisor
            await self.mcp(scope, receive, send)
            return
        path = scope.get("path", "")
        if path in (self.prefix, self.prefix + "/"):
            if scope.get("method") != "POST":
                await method_not_allowed(send)
                return
            # Serve both spellings without a redirect round trip.
            scope = dict(scope, path=self.prefix, raw_path=self.prefix.encode())
            await self.mcp(scope, receive, send)
            return
        await self.django(scope, receive, send)


def build_application() -> Router:
    problem = auth_mode_problem(settings.GUIDEPOST_AUTH, settings.GUIDEPOST_HOST)
    if problem:
        raise ImproperlyConfigured(problem)
    return Router(django_app, build_mcp_app(__version__))


application = build_application()
