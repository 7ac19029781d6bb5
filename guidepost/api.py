"""The one JSON API (django-ninja) under /api/: the runs and flows routers, staff sign-in,
OpenAPI at /api/openapi.json and interactive docs at /api/docs (served from the
django-ninja package's own static files: no CDN).

Every failure is the error object: refusals through ``error_object``, and
ninja's own errors (not signed in, bad parameters, anything unexpected) turned into
refusals first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI, Schema, Swagger
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.renderers import JSONRenderer

from access_app import floods, guards
from access_app.faults import fault_refusal
from access_app.web import AgentKeyAuth, StaffSession, error_response
from flowcore.common.errors import (
    InvalidInput,
    NotAuthenticated,
    NotFound,
    NotPermitted,
    Refusal,
    internal_error,
)
from flows_app.api import router as flows_router
from guidepost import __version__
from runs_app.api import router as runs_router

logger = logging.getLogger(__name__)


class Utf8Renderer(JSONRenderer):
    """JSON with UTF-8 characters as they are, as the MCP results are (no ``\\u`` escapes)."""

    json_dumps_params = {"ensure_ascii": False}


def docs_access(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The schema and the docs are for staff too: the docs page sends others to the
    login, the schema answers them 401 like every endpoint."""

    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            guards.authenticate_person(request.user)
        except NotAuthenticated as refusal:
            if request.path.endswith(".json"):
                return error_response(refusal)
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return guarded


api = NinjaAPI(
    title="guidepost",
    version=__version__,
    description="Read-only access to runs and flows, for people and tools watching them.",
    urls_namespace="api",
    renderer=Utf8Renderer(),
    # Ways of signing in, tried in order: the admin's session (staff), an agent key
    # (Authorization: Bearer; its own runs only). Neither: 401 with WWW-Authenticate.
    auth=[StaffSession(), AgentKeyAuth()],
    # Swagger UI's default validator badge calls an outside service; this machine has none.
    docs=Swagger(settings={"validatorUrl": None}),
    docs_decorator=docs_access,
)
api.add_router("/", runs_router)
api.add_router("/", flows_router)


class SectionOut(Schema):
    path: str
    what: str
    who: str


class IndexOut(Schema):
    api: str
    sections: list[SectionOut]
    sign_in: list[str]
    next: str


INDEX = IndexOut(
    api="guidepost: read-only access to runs and flows",
    sections=[
        SectionOut(
            path="/api/runs",
            what="runs, newest first, filtered by flow, state, key or ref; "
            "/api/runs/{run_id}: one run with its steps",
            who="staff with the Ops group's permission; an agent key reads its own runs",
        ),
        SectionOut(
            path="/api/flows",
            what="the live flows; /api/flows/{flow_id}: one flow, with /versions and /usage",
            who="staff with the Ops group's permission",
        ),
        SectionOut(
            path="/api/docs",
            what="the API's reference (interactive); /api/openapi.json: its schema",
            who="staff",
        ),
    ],
    sign_in=[
        "a staff session: sign in at /admin/login/",
        "an agent key: send Authorization: Bearer <key>",
    ],
    next="Call a section's path with one of the ways of signing in.",
)


@api.get("/", auth=None, response=IndexOut, summary="The API's sections")
def index(request: HttpRequest) -> IndexOut:
    """What the API holds and how to sign in; open to anyone (it says nothing more)."""
    return INDEX


@api.exception_handler(Refusal)
def refused(request: HttpRequest, refusal: Refusal) -> HttpResponse:
    return error_response(refusal)


@api.exception_handler(AuthenticationError)
def not_signed_in(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    # Charged to the address's budget of refusals, as a bad key is.
    return refused(
        request, floods.refused(request.META.get("REMOTE_ADDR", ""), guards.api_not_signed_in())
    )


@api.exception_handler(HttpError)
def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    # ninja's own refusals, e.g. a failed CSRF check on a session call
    refusal = NotPermitted("request refused", exc.message, "Sign in again and retry.")
    return error_response(refusal, status=exc.status_code)


@api.exception_handler(ValidationError)
def invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    first = exc.errors[0] if exc.errors else {}
    where = ".".join(str(part) for part in first.get("loc", ()) if part not in ("query", "path"))
    return refused(
        request,
        InvalidInput(
            "invalid arguments",
            f"{where}: {first.get('msg', 'invalid')}" if where else str(first.get("msg")),
            "Fix the parameter as the API docs (/api/docs) describe, and call again.",
        ),
    )


@api.exception_handler(Http404)
def not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return refused(request, NotFound("not found", "nothing is at this address", "See /api/docs."))


@api.exception_handler(Exception)
def failed(request: HttpRequest, exc: Exception) -> HttpResponse:
    fault = fault_refusal(exc)  # the database busy or unwritable: 503, honestly retryable
    if fault is not None:
        logger.warning("API call refused: %s %s: %s", request.method, request.path, fault.error)
        return error_response(fault)
    logger.exception("API call failed: %s %s", request.method, request.path)
    return error_response(internal_error(), status=500)
