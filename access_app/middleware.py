"""Django middleware of the guards and the audit trail, at the front of ``MIDDLEWARE``.

- ``audit_api``: one audit record (and access-log line) per request to the JSON API
  under /api/, whatever its answer: 200, 401, 403, 404, 405, 421, 422 ...; a refusal
  before the request had a caller (401, or 429 for an address over its budget of
  refusals) is summed with the others of its address and second.
- ``host_check``: the Host check of ``guards.check_host``, so that the pages, the API
  and /mcp accept exactly the same Host values and refuse the others the same way
  (400 for a malformed Host, 421 for a name this server does not serve).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from access_app import audit, guards
from access_app.callers import Caller
from access_app.web import error_response
from flowcore.common.errors import Refusal

View = Callable[[HttpRequest], HttpResponse]
API_PREFIX = "/api/"


def host_check(get_response: View) -> View:
    def middleware(request: HttpRequest) -> HttpResponse:
        try:
            guards.check_host(request.META.get("HTTP_HOST"), request.META.get("SERVER_NAME", ""))
        except Refusal as refusal:
            return error_response(refusal)
        return get_response(request)

    return middleware


def audit_api(get_response: View) -> View:
    def middleware(request: HttpRequest) -> HttpResponse:
        if not request.path.startswith(API_PREFIX):
            return get_response(request)
        started = time.monotonic()
        response = get_response(request)
        entry = _entry(request, response, started)
        if not entry.caller and response.status_code in (401, 429):
            audit.audit_refusal(entry)  # no caller yet: summed per address and second
        elif response.status_code == 503:
            audit.access_log(entry)  # the database is what failed: the line, not a record
        else:
            audit.audit_safely(entry)
        return response

    return middleware


def _entry(request: HttpRequest, response: HttpResponse, started: float) -> audit.Entry:
    caller = getattr(request, "auth", None)
    match = request.resolver_match
    route = "/" + match.route if match is not None and match.route else request.path
    run_id = match.kwargs.get("run_id", "") if match is not None else ""
    return audit.Entry(
        tool=f"{request.method} {route}",
        outcome=_outcome(response),
        status=response.status_code,
        duration_ms=(time.monotonic() - started) * 1000,
        key_name=caller.key_name if isinstance(caller, Caller) else "",
        caller=caller.key if isinstance(caller, Caller) else "",
        client=request.headers.get("User-Agent", ""),
        peer=request.META.get("REMOTE_ADDR", ""),
        run_id=run_id,
    )


def _outcome(response: HttpResponse) -> str:
    if response.status_code < 400:
        return "ok"
    if response.get("Content-Type", "").startswith("application/json"):
        try:
            error = json.loads(response.content).get("error")
        except (ValueError, AttributeError):
            error = None
        if isinstance(error, str) and error:
            return error
    return f"http {response.status_code}"
