"""Project-wide views: the sign-in, which lands each person where they work, /mcp reaching
Django (only outside ``serve``, whose ASGI router answers /mcp first: the answer names the
command that serves MCP), and the refusals Django answers itself (an unknown page or /api/
path, a database that cannot be reached)."""

from __future__ import annotations

import logging
import sys
from typing import Any, Protocol

from django.contrib import admin
from django.contrib.auth import REDIRECT_FIELD_NAME
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from access_app import oauth
from access_app.callers import RUNS_VIEW
from access_app.faults import fault_refusal
from access_app.web import PageNotFound, error_response
from flowcore.common.errors import NotFound, internal_error
from flowcore.common.jsontext import compact_json
from flowcore.common.text import shown
from flows_app.admin_review import APPROVE_PERMISSION

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


@login_not_required
@require_safe
def protected_resource_metadata(request: HttpRequest) -> HttpResponse:
    """This server's OAuth Protected Resource Metadata (RFC 9728), which tells an agent's
    client where to get a token; not found when the server takes no tokens. Any page may
    read it: browser-based clients fetch it from their own origin."""
    config = oauth.config()
    if config is None:
        raise PageNotFound(
            NotFound(
                "not found",
                "this server takes no OAuth access tokens (GUIDEPOST_OAUTH_ISSUER is not set)",
                "Send an agent key: Authorization: Bearer <key>.",
            )
        )
    document = oauth.resource_metadata(request.scheme or "http", request.get_host(), config)
    response = HttpResponse(compact_json(document), content_type="application/json")
    response["Access-Control-Allow-Origin"] = "*"
    return response


# --- signing in ---------------------------------------------------------------------------------


class Person(Protocol):
    is_superuser: bool

    def has_perm(self, perm: str, obj: Any = None) -> bool: ...


def landing(user: Person) -> str:
    """Where a person lands after signing in when they asked for no page: support leads
    on the drafts they review, ops on the inbox, administrators (and anyone else) on the
    admin's index."""
    if user.is_superuser:
        return reverse("admin:index")
    if user.has_perm(APPROVE_PERMISSION):
        return reverse("admin:flows_app_draft_changelist")
    if user.has_perm(RUNS_VIEW):
        return reverse("runs")
    return reverse("admin:index")


@login_not_required
def sign_in(request: HttpRequest) -> HttpResponse:
    """The admin's sign-in. Sent to no page in particular (the admin's index is where its
    form goes by default), a person lands where they work instead."""
    asked = request.POST.get(REDIRECT_FIELD_NAME) or request.GET.get(REDIRECT_FIELD_NAME)
    response = admin.site.login(request)
    anywhere = asked in (None, "", reverse("admin:index"))
    if anywhere and response.status_code == 302 and request.user.is_authenticated:
        return HttpResponseRedirect(landing(request.user))
    return response


# --- refusals Django answers itself -------------------------------------------------------------

# The page of each thing a page's "not found" names, for its candidates.
_PAGE_OF = {"run not found": "run", "flow not found": "flow"}


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404: under /api/ the error object (``not found``); elsewhere a page with the
    site's navigation that says what was not found and links the closest names."""
    if request.path.startswith(API_PREFIX):
        return error_response(
            NotFound(
                "not found",
                f"nothing is at {shown(request.path)}",
                "See /api/ for the API's sections and /api/docs for its reference.",
            )
        )
    refusal = exception.refusal if isinstance(exception, PageNotFound) else None
    page = _PAGE_OF.get(refusal.error, "") if refusal is not None else ""
    ctx = {
        "signed_in": refusal is not None,  # a staff page's: the guards found the person
        "what": refusal.error if refusal is not None else "page not found",
        "reason": refusal.reason if refusal is not None else f"nothing is at {shown(request.path)}",
        "candidates": [
            (name, reverse(page, args=[name]) if page else "")
            for name in (refusal.candidates if refusal is not None else ())
        ],
    }
    return render(request, "guidepost/not_found.html", ctx, status=404)


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
