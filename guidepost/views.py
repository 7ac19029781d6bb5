"""Project-wide views: /mcp reaching Django (only outside ``serve``, whose ASGI router answers
/mcp first: the answer names the command that serves MCP), and the refusals Django answers
itself (an unknown /api/ path, a database that cannot be reached)."""

from __future__ import annotations

import logging
import sys

from django.http import Http404, HttpRequest, HttpResponse
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt

from access_app.faults import fault_refusal
from access_app.web import error_response
from flowcore.common.errors import NotFound, internal_error
from flowcore.common.text import shown

logger = logging.getLogger(__name__)
API_PREFIX = "/api/"

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


# --- refusals Django answers itself -------------------------------------------------------------


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404: under /api/ the error object (``not found``); a page, Django's."""
    if request.path.startswith(API_PREFIX):
        return error_response(
            NotFound(
                "not found",
                f"nothing is at {shown(request.path)}",
                "See /api/ for the API's sections and /api/docs for its reference.",
            )
        )
    return defaults.page_not_found(request, exception or Http404())


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: a database that cannot be reached is ``server busy`` (503, retryable,
    ``Retry-After``) wherever the request was (its session and sign-in included); any other
    failure is ``internal error`` in the error object under /api/, Django's page elsewhere."""
    failure = sys.exception()
    fault = fault_refusal(failure) if failure is not None else None
    if fault is not None:
        return error_response(fault)
    if request.path.startswith(API_PREFIX):
        return error_response(internal_error(), status=500)
    return defaults.server_error(request)
