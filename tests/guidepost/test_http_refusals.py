"""Every refusal a real server makes at the HTTP level is the error object of spec §7 with
its status, and is recorded (issue 18 point 3); the API speaks JSON (issue 21 point 9);
the health endpoints answer anyone (issue 21 point 12); a refused page request is one
log line, not a traceback (issue 21 point 10). ADRs 0074, 0075, 0076.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.support.mcp_http import ERROR_KEYS, RPC_HEADERS, bearer, http_client
from tests.support.servers import Server, django_eval, guidepost_command, serving
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

TOOLS_LIST = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}).encode()


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    """A server that needs keys (it has one, ``refusals``)."""
    tmp = tmp_path_factory.mktemp("refusals")
    with serving(tmp) as running:
        database_url = running.database_url
        done = guidepost_command(database_url, "createkey", "refusals")
        assert done.returncode == 0, done.stderr
        yield running, done.stdout.splitlines()[-1]


def request(server: Server, method: str, path: str, **kw: Any) -> httpx2.Response:
    with http_client(timeout=30) as http:
        return http.request(method, server.base + path, **kw)


def error_object(response: httpx2.Response, status: int, error: str) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/json", response.headers
    body: dict[str, Any] = response.json()
    assert ERROR_KEYS <= body.keys() <= ERROR_KEYS | {"retry_after", "candidates"}, body
    assert body["error"] == error, body
    assert len(body["reason"]) <= 300
    return body


BIG = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "x": "x" * (1024 * 1024)})
MCP_REFUSALS = {
    "GET": ("GET", {}, b"", 405, "method not allowed"),
    "DELETE": ("DELETE", {}, b"", 405, "method not allowed"),
    "PUT": ("PUT", RPC_HEADERS, TOOLS_LIST, 405, "method not allowed"),
    "over 1 MiB": ("POST", RPC_HEADERS, BIG.encode(), 413, "request too large"),
    "not JSON": ("POST", RPC_HEADERS, b"{", 400, "invalid request"),
    "not JSON-RPC": ("POST", RPC_HEADERS, b'{"x": 1}', 400, "invalid request"),
    "text/plain": (
        "POST",
        {**RPC_HEADERS, "Content-Type": "text/plain"},
        TOOLS_LIST,
        400,
        "invalid request",
    ),
    "Accept: text/html": (
        "POST",
        {**RPC_HEADERS, "Accept": "text/html"},
        TOOLS_LIST,
        406,
        "not acceptable",
    ),
}


@pytest.mark.parametrize("case", MCP_REFUSALS, ids=list(MCP_REFUSALS))
def test_every_refusal_at_mcp_is_the_error_object_with_its_status(
    keyed: tuple[Server, str], case: str
) -> None:
    server, key = keyed
    method, headers, body, status, error = MCP_REFUSALS[case]
    response = request(server, method, "/mcp/", headers={**headers, **bearer(key)}, content=body)
    error_object(response, status, error)
    if status == 405:
        assert response.headers["allow"] == "POST"


def records(server: Server) -> list[tuple[str, str, int, int]]:
    code = (
        "from access_app.models import AuditRecord\n"
        "result = list(AuditRecord.objects.order_by('id')"
        ".values_list('tool', 'outcome', 'status', 'count'))"
    )
    return [tuple(row) for row in django_eval(server.database_url, code)]


def test_an_unknown_json_rpc_method_is_a_json_rpc_error_carrying_the_error_object(
    keyed: tuple[Server, str],
) -> None:
    server, key = keyed
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/lsit"}
    response = request(server, "POST", "/mcp/", headers={**RPC_HEADERS, **bearer(key)}, json=body)

    answer = response.json()
    assert (answer["id"], answer["error"]["code"]) == (3, -32601)
    data = answer["error"]["data"]
    assert (data["error"], data["retryable"]) == ("method not found", False)
    assert data["candidates"][0] == "tools/list"
    assert ("rpc tools/lsit", "method not found", 200, 1) in records(server)


def test_a_405_and_a_413_at_mcp_are_recorded_with_their_words(keyed: tuple[Server, str]) -> None:
    server, key = keyed
    before = len(records(server))
    request(server, "PATCH", "/mcp/", headers=bearer(key))
    request(server, "POST", "/mcp/", headers={**RPC_HEADERS, **bearer(key)}, content=BIG)

    expected = {("PATCH /mcp", "method not allowed", 405), ("POST /mcp", "request too large", 413)}
    # A refusal before a caller is known is written within about a second.
    wait_until(
        lambda: expected <= {row[:3] for row in records(server)[before:]},
        timeout=10,
        interval=0.2,
        message=lambda: f"{expected} not all among {records(server)[before:]}",
    )


def test_the_api_answers_its_index_to_anyone(keyed: tuple[Server, str]) -> None:
    server, _ = keyed
    response = request(server, "GET", "/api/")

    assert response.status_code == 200
    index = response.json()
    assert [s["path"] for s in index["sections"]] == ["/api/runs", "/api/flows", "/api/docs"]
    assert any("/admin/login/" in way for way in index["sign_in"])
    assert any("Bearer" in way for way in index["sign_in"])


@pytest.mark.parametrize("path", ["/api/nothing", "/api/runs/r1/steps", "/api/flows/a/b/c"])
def test_an_unknown_api_path_is_the_error_object(keyed: tuple[Server, str], path: str) -> None:
    server, key = keyed
    response = request(server, "GET", path, headers=bearer(key))
    body = error_object(response, 404, "not found")
    assert "/api/" in body["next"]


def test_the_apis_401_names_both_ways_in(keyed: tuple[Server, str]) -> None:
    server, _ = keyed
    body = error_object(request(server, "GET", "/api/runs"), 401, "not signed in")
    assert "/admin/login/" in body["next"] and "Bearer" in body["next"]


@pytest.mark.parametrize("host", ["127.0.0.1", "10.1.2.3:8127", "evil.example"])
def test_healthz_and_readyz_answer_anyone_whatever_the_host(
    keyed: tuple[Server, str], host: str
) -> None:
    """A probe names the instance by its address: no Host check, no key, nothing else said."""
    server, _ = keyed
    health = request(server, "GET", "/healthz", headers={"Host": host})
    ready = request(server, "GET", "/readyz", headers={"Host": host})

    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert (ready.status_code, ready.json()["status"]) == (200, "ready")
    # Only when each background loop last ticked: no version, no database, no path.
    assert set(ready.json()) == {"status", "loops"}
    assert {"sealer", "catalog", "webhooks", "refusals"} <= set(ready.json()["loops"])
    assert request(server, "HEAD", "/readyz").status_code == 200


def test_health_endpoints_answer_get_and_head_only(keyed: tuple[Server, str]) -> None:
    server, _ = keyed
    for path in ("/healthz", "/readyz"):
        response = request(server, "POST", path)
        error_object(response, 405, "method not allowed")
        assert response.headers["allow"] == "GET, HEAD"


def test_health_endpoints_are_not_rate_limited_or_recorded(keyed: tuple[Server, str]) -> None:
    server, _ = keyed
    before = len(records(server))
    with http_client(timeout=30) as http:
        statuses = {http.get(server.base + "/readyz").status_code for _ in range(200)}
    assert statuses == {200}
    assert not [row for row in records(server)[before:] if "z" in row[0]]


# --- quiet logs ----------------------------------------------------------------------------------

SESSION = """
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
user = User.objects.create_user("nopermit", is_staff=True)
session = SessionStore()
session[SESSION_KEY] = str(user.pk)
session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[-1]
session[HASH_SESSION_KEY] = user.get_session_auth_hash()
session.create()
result = session.session_key
"""


# The lines that may speak of a page request: those of Django's loggers (its own line for a
# 403 or a 404 would double ours), uvicorn's and the views', and any line that is no record's
# first (a traceback's, a message's second line). Not the agents' access log
# (guidepost.access): it is about MCP and API calls, and the refusals of earlier tests in the
# module reach it a second later, summed.
ABOUT_PAGES = r"^\S+ \S+ \w+ (django|uvicorn|guidepost\.views)(\.[\w.]+)?: |^(?!\d{4}-\d\d-\d\d )"


def test_a_refused_page_request_is_one_log_line_saying_who_what_and_why(
    keyed: tuple[Server, str],
) -> None:
    server, _ = keyed
    session = django_eval(server.database_url, SESSION)
    cookies = {"sessionid": session}
    lines_before = len(server.output().splitlines())
    refused = [
        ("GET", "/", 403),  # the runs page: staff, but not in the Ops group
        ("GET", "/f/refund_request", 403),
        ("GET", "/admin/access_app/agentkey/", 403),  # the admin's own permission
        ("GET", "/no/such/page", 404),
        ("POST", "/f/", 403),  # no CSRF token
    ]
    with http_client(timeout=30, cookies=cookies) as http:
        for method, path, status in refused:
            assert http.request(method, server.base + path).status_code == status, path

    def new_lines() -> list[str]:
        return server.output().splitlines()[lines_before:]

    wait_until(
        lambda: len([line for line in new_lines() if "refused" in line]) >= len(refused),
        timeout=5,
        message=lambda: "\n".join(new_lines()),
    )
    new = new_lines()
    assert "Traceback" not in "\n".join(new)
    for method, path, status in refused:
        [line] = [line for line in new if f"refused {method} {path}:" in line]
        assert f": {status} " in line, line
        # Refused before anyone asked who (a 404, a CSRF check), the person is not looked up.
        who = "user nopermit" if path != "/f/" and status == 403 else "a session not looked at,"
        assert f"({who} from 127.0.0.1)" in line, line
    # One line each, nothing else about them.
    about_pages = [line for line in new if re.search(ABOUT_PAGES, line)]
    assert len(about_pages) == len(refused), "\n".join(new)


# --- every body bound answers 413 in the error shape ----------------------------------------

MIB = 1024 * 1024


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("path", "size"),
    [("/api/runs/r_none/resolve", 10 * MIB), ("/api/runs/r_none/resolve", 2 * MIB)],
    ids=["10 MiB", "2 MiB"],
)
def test_a_body_over_the_bound_at_the_api_is_413_in_the_error_shape_unread(
    keyed: tuple[Server, str], path: str, size: int
) -> None:
    """A person's answer with 10 MiB was a 500 `internal error`, and 1 to 2.5 MiB bodies
    were read and parsed: the bound is judged from the declared length, before a byte of
    the body is read (the server answers while the client is still sending)."""
    server, key = keyed
    with socket.create_connection(("127.0.0.1", int(server.base.rsplit(":", 1)[1]))) as sock:
        sock.settimeout(10)
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {size}\r\n\r\n".encode()
            + b"{" * 1024
        )
        answer = read_response(sock)
    status, body = answer
    assert status == 413
    assert json.loads(body) == {
        "error": "request too large",
        "reason": "the request body is over 1 MiB",
        "next": "Send a smaller body: a flow's YAML may be up to 256 KiB.",
        "retryable": False,
    }


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += sock.recv(65536)
    return int(head.split()[1]), body


@pytest.mark.hostile
def test_a_chunked_body_over_the_bound_is_413_and_recorded_and_one_under_it_goes_on(
    keyed: tuple[Server, str],
) -> None:
    server, key = keyed
    before = len(records(server))

    def chunks(size: int) -> Iterator[bytes]:
        for _ in range(size // 65536):
            yield b" " * 65536

    over = request(
        server, "POST", "/api/runs/r_none/resolve", headers=bearer(key), content=chunks(2 * MIB)
    )
    error_object(over, 413, "request too large")
    under = request(
        server,
        "POST",
        "/api/runs/r_none/resolve",
        headers={**bearer(key), "Content-Type": "application/json"},
        content=iter([b'{"note": "', b"x" * 1000, b'"}']),
    )
    assert under.status_code != 413 and under.json()["error"] != "request too large"

    expected = ("POST /api/runs/r_none/resolve", "request too large", 413)
    # A refusal before a caller is known is written within about a second.
    wait_until(
        lambda: expected in {row[:3] for row in records(server)[before:]},
        timeout=10,
        interval=0.2,
        message=lambda: f"{expected} not among {records(server)[before:]}",
    )


@pytest.mark.hostile
def test_a_body_over_the_bound_at_the_admin_is_413_too(keyed: tuple[Server, str]) -> None:
    server, _ = keyed
    response = request(server, "POST", "/admin/login/", content=b"x" * (MIB + 1))
    error_object(response, 413, "request too large")
