"""What the people-facing HTTP interfaces share: the guards around a page, and the HTTP
status of a refusal. Pages (runs_app.views, flows_app.views) and the JSON API
(guidepost.api) use these; none of them checks access on its own.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from functools import wraps
from inspect import iscoroutinefunction
from typing import Any, Concatenate

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.utils.decorators import sync_and_async_middleware
from django.views.decorators.http import require_POST, require_safe
from ninja import Schema
from ninja.security import SessionAuth
from ninja.security.http import HttpAuthBase

from access_app import floods, guards, keyring
from access_app.agent_keys import bearer_token
from access_app.callers import Caller
from flowcore.common.errors import (
    BadRequest,
    InvalidInput,
    Misdirected,
    NotAuthenticated,
    NotFound,
    NotPermitted,
    RateLimited,
    Refusal,
    StepNotAllowed,
    Unavailable,
    error_body,
)
from flowcore.common.text import refuse_controls, shown

# The HTTP status of each kind of refusal; any other refusal is a conflict with the
# state of what it names.
_STATUS: tuple[tuple[type[Refusal], int], ...] = (
    (BadRequest, 400),
    (NotAuthenticated, 401),
    (NotPermitted, 403),
    (NotFound, 404),
    (InvalidInput, 422),
    (StepNotAllowed, 409),
    (Misdirected, 421),
    (RateLimited, 429),
    (Unavailable, 503),
)


def http_status(refusal: Refusal) -> int:
    for kind, status in _STATUS:
        if isinstance(refusal, kind):
            return status
    return 409


def challenge(refusal: Refusal, metadata: str = "") -> str:
    """The ``WWW-Authenticate`` value of a 401 (RFC 6750): which scheme, whether the key
    or token sent was refused, and where the Protected Resource Metadata that says how to
    get a token is (RFC 9728, section 5.1), when this server takes tokens.

    >>> challenge(NotAuthenticated("invalid token", "", ""), "https://h/.well-known/x")
    'Bearer realm="guidepost", error="invalid_token", resource_metadata="https://h/.well-known/x"'
    """
    said = 'Bearer realm="guidepost"'
    if refusal.error in ("invalid key", "key revoked", "invalid token"):
        said += ', error="invalid_token"'
    if metadata:
        said += f', resource_metadata="{metadata}"'
    return said


def error_response(refusal: Refusal, status: int | None = None) -> HttpResponse:
    """The error object as a JSON response (a 401 says how to authenticate; a
    429 or 503 when to come back)."""
    status = status or http_status(refusal)
    response = HttpResponse(error_body(refusal), status=status, content_type="application/json")
    if status == 401:
        response["WWW-Authenticate"] = challenge(refusal)
    if refusal.retry_after is not None:
        # HTTP's Retry-After is whole seconds: rounded up, so a client that waits it is let in.
        response["Retry-After"] = str(max(1, math.ceil(refusal.retry_after)))
    return response


def person(request: HttpRequest, action: str) -> Caller:
    """The guards, in order, for a person's request. Raises Refusal."""
    caller = guards.authenticate_person(request.user)
    guards.rate_limit(caller, action)
    guards.authorize(caller, action, {})
    return caller


type PageView[**P] = Callable[Concatenate[HttpRequest, Caller, P], HttpResponse]
type View[**P] = Callable[Concatenate[HttpRequest, P], HttpResponse]


def staff_page[**P](action: str) -> Callable[[PageView[P]], View[P]]:
    """A read-only HTML page for staff allowed ``action``: GET and HEAD only (405
    otherwise); anyone not signed in goes to the admin's login, a person without the
    permission gets 403, a refusal naming nothing that exists gets 404. The view gets
    the caller after the request."""
    return _staff_view(action, require_safe)


def staff_form[**P](action: str) -> Callable[[PageView[P]], View[P]]:
    """A form a page posts to (claim, answer, close), for staff allowed ``action``: POST
    only (405 otherwise), with Django's CSRF check, and otherwise as ``staff_page``. The
    view shows every other refusal itself, on its page."""
    return _staff_view(action, require_POST)


def _staff_view[**P](
    action: str, methods: Callable[[View[P]], View[P]]
) -> Callable[[PageView[P]], View[P]]:
    def decorate(view: PageView[P]) -> View[P]:
        @methods
        @wraps(view)
        def guarded(request: HttpRequest, /, *args: P.args, **kwargs: P.kwargs) -> HttpResponse:
            try:
                caller = person(request, action)
            except NotAuthenticated:
                return redirect_to_login(request.get_full_path())
            except RateLimited as refusal:
                return error_response(refusal)
            except NotPermitted as refusal:
                raise PermissionDenied(refusal.reason) from None
            try:
                return view(request, caller, *args, **kwargs)
            except NotPermitted as refusal:
                raise PermissionDenied(refusal.reason) from None
            except NotFound as refusal:
                raise PageNotFound(refusal) from None

        return guarded

    return decorate


class PageNotFound(Http404):
    """A page's refusal of what does not exist, kept whole so that the 404 page can offer
    its candidates ("did you mean …")."""

    def __init__(self, refusal: NotFound) -> None:
        super().__init__(refusal.reason)
        self.refusal = refusal


def staff_json[**P](action: str) -> Callable[[PageView[P]], View[P]]:
    """Like ``staff_page`` for a page's JSON companion (the live updates): every refusal,
    not being signed in included, is the error object with its status."""

    def decorate(view: PageView[P]) -> View[P]:
        @require_safe
        @wraps(view)
        def endpoint(request: HttpRequest, /, *args: P.args, **kwargs: P.kwargs) -> HttpResponse:
            try:
                caller = person(request, action)
                return view(request, caller, *args, **kwargs)
            except Refusal as refusal:
                return error_response(refusal)

        return endpoint

    return decorate


# --- the JSON API -------------------------------------------------------------------------------


class ErrorOut(Schema):
    """The error object of spec §7 (section 7)."""

    error: str
    reason: str
    next: str
    retryable: bool
    candidates: list[str] | None = None
    attempt: int | None = None
    repeated: bool | None = None
    retry_after: float | None = None


# What every endpoint of the API may answer besides its own result.
ERRORS: dict[int, type[Schema]] = {
    400: ErrorOut,
    401: ErrorOut,
    403: ErrorOut,
    404: ErrorOut,
    422: ErrorOut,
    429: ErrorOut,
    503: ErrorOut,
}


class StaffSession(SessionAuth):
    """The JSON API's session sign-in: a staff member signed in to the admin. Returns the
    caller (ninja stores it as ``request.auth``), or None so the next way of signing in
    in the API's list is tried; when none succeeds the API answers 401."""

    def authenticate(self, request: HttpRequest, key: str | None) -> Caller | None:
        try:
            return guards.authenticate_person(request.user)
        except NotAuthenticated:
            return None


class AgentKeyAuth(HttpAuthBase):
    """The JSON API's agent keys: ``Authorization: Bearer <key>``. Returns the key's caller;
    None when the request sends no key (the next way of signing in is tried); an unknown
    or revoked key is refused at once (401), whatever else the request carries."""

    openapi_scheme = "bearer"

    def __call__(self, request: HttpRequest) -> Caller | None:
        header = request.headers.get("Authorization")
        if bearer_token(header) is None:
            return None
        peer = request.META.get("REMOTE_ADDR", "")
        check = functools.partial(guards.authenticate_key, header, exposed=True)
        try:  # as the MCP gate does: a spent budget of refusals gets no database lookup
            key = floods.authenticated(
                peer, lambda: check(find=keyring.cached, any_key=keyring.any_key_cached)
            )
        except keyring.NotCached:
            floods.refuse_address_over_budget(peer, header)
            key = floods.authenticated(
                peer, lambda: check(find=keyring.lookup, any_key=keyring.any_key)
            )
        return guards.key_caller(key.name, key.limits) if key is not None else None


def api_caller(request: HttpRequest, action: str) -> Caller:
    """The rest of the guards for an API call whose caller the API's auth found.
    Raises Refusal."""
    caller = request.auth  # type: ignore[attr-defined]  # set by ninja's auth
    if not isinstance(caller, Caller):
        raise guards.api_not_signed_in()
    guards.rate_limit(caller, action)
    guards.authorize(caller, action, {})
    return caller


# --- every request ------------------------------------------------------------------------------


@sync_and_async_middleware
def refuse_control_characters(get_response: Any) -> Any:
    """Answer 400 (the error object) to a request whose path or query string
    holds a control character: PostgreSQL cannot even compare a NUL, and no id, filter
    or page number needs one. Form fields are Django's: they refuse NUL themselves."""

    def refusal(request: HttpRequest) -> HttpResponse | None:
        texts = [("the path", request.path)]
        texts += [(f"the parameter {shown(k)}", v) for k, vs in request.GET.lists() for v in vs]
        texts += [("a parameter name", k) for k in request.GET]
        for what, text in texts:
            try:
                refuse_controls(what, text)
            except InvalidInput as refused:
                return error_response(refused, status=400)
        return None

    if iscoroutinefunction(get_response):

        async def middleware(request: HttpRequest) -> HttpResponse:
            return refusal(request) or await get_response(request)

    else:

        def middleware(request: HttpRequest) -> HttpResponse:  # type: ignore[misc]
            return refusal(request) or get_response(request)

    return middleware
