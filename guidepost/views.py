"""/mcp reaching Django: only outside ``serve`` (whose ASGI router answers /mcp first), so
the answer names the command that serves MCP."""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

logger = logging.getLogger(__name__)

MCP_IS_ELSEWHERE = (
    "MCP is not served by this server. Start guidepost with `guidepost-mcp serve` "
    "(or `python3 scripts/dev.py serve`): it serves MCP at /mcp/ and the admin. "
    "`manage.py runserver` serves the admin only.\n"
)


@csrf_exempt
def mcp_elsewhere(request: HttpRequest) -> HttpResponse:
    """/mcp reached Django: the process is not `serve` (its router answers /mcp first)."""
    logger.warning(
        "%s %s: this server does not serve MCP; use `guidepost-mcp serve`",
        request.method,
        request.path,
    )
    return HttpResponse(MCP_IS_ELSEWHERE, status=404, content_type="text/plain; charset=utf-8")
