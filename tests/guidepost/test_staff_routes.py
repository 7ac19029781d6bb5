"""Every staff page and API route asks for the permission this table says, and no other
(issue 18: a run page that named the wrong permission showed every keyless run to staff
outside the Ops group, and no test looked at that page).

The routes are walked from ``guidepost.urls`` (ninja's routes included, as the API's
URL patterns): a route missing from ``EXPECTED`` fails, so a new page must say here who
may open it. For a route that needs a permission, four people ask: nobody signed in, a
staff member without permissions, one holding only the *other* permission, and one
holding exactly the permission the table names. Only the last is served.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from access_app.callers import Caller
from access_app.guards import ACTION_PERMISSIONS
from runs_app import agent_steps

pytestmark = pytest.mark.django_db

RUNS, FLOWS, RESOLVE = "runs.view", "flows.view", "runs.resolve"
STAFF = "any staff member"  # signed in and staff, no permission needed
PUBLIC = "anyone"
ADMIN = "the admin's own permissions"  # Django's admin checks each model's permissions

# Every route of guidepost.urls, as Django joins its pattern, and who may open it.
EXPECTED: dict[str, str] = {
    "": RUNS,
    "r/<str:run_id>": RUNS,
    "r/<str:run_id>/live": RUNS,
    # A person and a stalled run (spec §5.9): POST only, and reading the run too.
    "r/<str:run_id>/claim": RESOLVE,
    "r/<str:run_id>/resolve": RESOLVE,
    "r/<str:run_id>/close": RESOLVE,
    "f/": FLOWS,
    "f/<str:flow_id>": FLOWS,
    "diagram.css": PUBLIC,
    "api/": PUBLIC,  # the API's index: its sections and how to sign in (ADR 0074)
    "api/openapi.json": STAFF,
    "api/docs": STAFF,
    "api/runs": RUNS,
    "api/runs/<run_id>": RUNS,
    "api/runs/<run_id>/resolve": RESOLVE,
    "api/flows": FLOWS,
    "api/flows/<flow_id>": FLOWS,
    "api/flows/<flow_id>/versions": FLOWS,
    "api/flows/<flow_id>/usage": FLOWS,
    "^admin/runs_app/(?P<page>(agentkey|auditrecord)/.*)$": PUBLIC,  # a permanent redirect
    "admin/login/": PUBLIC,  # the admin's sign-in, landing people where they work
    "admin/": ADMIN,
    "^mcp/?$": PUBLIC,  # names the command that serves MCP
    "favicon.ico": PUBLIC,
    # Where an MCP client learns how to get an access token (RFC 9728, ADR 0114).
    "^\\.well-known/oauth-protected-resource(?:/mcp/?)?$": PUBLIC,
    # Not staff's either: its own guard, an address or the metrics token (ADR 0082,
    # tests/guidepost/test_metrics.py).
    "metrics": "the metrics' allowed addresses or token",
}
OTHER = {RUNS: FLOWS, FLOWS: RUNS}


def routes(patterns: list[Any], prefix: str = "") -> Iterator[str]:
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver) and route != "admin/":
            yield from routes(pattern.url_patterns, route)
        else:
            assert isinstance(pattern, URLPattern | URLResolver)
            yield route


# ninja adds a root of its own at api/, after the API's index there: never reached.
ROUTES = list(dict.fromkeys(routes(get_resolver().url_patterns)))


def test_every_route_is_in_the_table_and_the_table_names_only_routes() -> None:
    assert sorted(ROUTES) == sorted(EXPECTED)


def address(route: str, run_id: str) -> str:
    path = (
        route.replace("<str:run_id>", run_id)
        .replace("<run_id>", run_id)
        .replace("<str:flow_id>", "refund_request")
        .replace("<flow_id>", "refund_request")
    )
    return "/" + path


def person(*permissions: str) -> Client:
    user = User.objects.create_user(f"staff-{len(permissions)}-{'-'.join(permissions)}")
    user.is_staff = True
    user.save()
    for action in permissions:
        app_label, codename = ACTION_PERMISSIONS[action].split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def keyless_run() -> str:
    """A run started without a key: what a staff member outside Ops must not read."""
    caller = Caller(key="anon:127.0.0.1:someone", address="127.0.0.1")
    started = agent_steps.run_start(caller=caller, flow_id="refund_request", values=None, ref=None)
    return str(started["run_id"])


NEEDS_PERMISSION = [route for route in ROUTES if EXPECTED.get(route) in (RUNS, FLOWS)]


@pytest.mark.parametrize("route", NEEDS_PERMISSION)
def test_a_route_serves_only_the_permission_the_table_names(route: str, keyless_run: str) -> None:
    url = address(route, keyless_run)
    needed = EXPECTED[route]
    api = url.startswith("/api/") or url.endswith("/live")

    anonymous = Client().get(url)
    assert anonymous.status_code == (401 if api else 302), url
    for client in (person(), person(OTHER[needed])):
        refused = client.get(url)
        assert refused.status_code == 403, (url, refused.status_code)
    served = person(needed).get(url)
    assert served.status_code == 200, (url, served.status_code)


@pytest.mark.parametrize("route", [r for r in ROUTES if EXPECTED.get(r) == STAFF])
def test_a_staff_route_serves_any_staff_member_and_nobody_else(route: str) -> None:
    url = address(route, "r_none")

    assert Client().get(url).status_code in (302, 401)
    assert person().get(url).status_code == 200


POSTED = [route for route in ROUTES if EXPECTED.get(route) == RESOLVE]


def post(client: Client, url: str) -> Any:
    if url.startswith("/api/"):
        body = {"values": {"order_number": "A00118"}, "note": "checked"}
        return client.post(url, data=json.dumps(body), content_type="application/json")
    return client.post(url, {"action": "claim", "note": "checked", "reason": "gone"})


@pytest.mark.parametrize("route", POSTED)
def test_a_route_that_acts_on_a_stalled_run_serves_only_people_who_may_resolve_runs(
    route: str, keyless_run: str
) -> None:
    url = address(route, keyless_run)
    api = url.startswith("/api/")

    anonymous = post(Client(), url)
    assert anonymous.status_code == (401 if api else 302), url
    for client in (person(), person(RUNS), person(FLOWS)):
        refused = post(client, url)
        assert refused.status_code == 403, (url, refused.status_code)
    allowed = person(RUNS, RESOLVE)
    assert allowed.get(url).status_code == 405
    # Served: the run is active, so the service refuses it (409) or the form reports it.
    served = post(allowed, url)
    assert served.status_code in (303, 409), (url, served.status_code)
