"""PostgreSQL that cannot be reached is ``server busy`` wherever a request meets it (issue 18
point 3, spec §7): the MCP gate's key check, a tool call, the API, a page, the admin. Each
is answered with the error object (503, retryable, ``retry_after`` and ``Retry-After``)
within the database pool's time-out, never a plain-text 500 after it; /readyz says
``not ready`` and /healthz still answers. ADR 0074.

The database is cut with a TCP proxy between the server and PostgreSQL
(``tests.support.tcp_proxy``): new connections are refused, open ones reset.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest

from tests.support.mcp_http import ERROR_KEYS, bearer, http_client, http_get, ok, post
from tests.support.servers import (
    Server,
    copy_flows,
    django_eval,
    fresh_database,
    guidepost_command,
    start_server,
    uses_postgres,
)
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow
postgres_only = pytest.mark.skipif(
    not uses_postgres(), reason="a PostgreSQL outage (the PostgreSQL pass)"
)


POOL_TIMEOUT = 3.0

SESSION = """
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
user = User.objects.create_superuser("lead", password=None)
session = SessionStore()
session[SESSION_KEY] = str(user.pk)
session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[-1]
session[HASH_SESSION_KEY] = user.get_session_auth_hash()
session.create()
result = session.session_key
"""


@pytest.fixture
def behind_proxy(tmp_path: Path) -> Iterator[tuple[Server, TcpProxy, str, str]]:
    """A server whose PostgreSQL is reached through a proxy; its key and a staff session."""
    with fresh_database(tmp_path) as database_url:
        parts = urlsplit(database_url)
        proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
        url = proxy.url(database_url)
        server = start_server(
            database_url=url,
            flows_dir=copy_flows(tmp_path / "flows"),
            log=tmp_path / "server.log",
            env={"GUIDEPOST_DB_POOL_TIMEOUT": str(POOL_TIMEOUT)},
        )
        try:
            created = guidepost_command(database_url, "createkey", "outage")
            assert created.returncode == 0, created.stderr
            session = django_eval(database_url, SESSION)
            yield server, proxy, created.stdout.splitlines()[-1], session
        finally:
            proxy.cut()
            server.stop()


def busy(response: httpx2.Response) -> None:
    assert response.status_code == 503, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert ERROR_KEYS <= body.keys()
    assert (body["error"], body["retryable"]) == ("server busy", True), body
    assert body["retry_after"] > 0
    assert int(response.headers["retry-after"]) >= 1


def timed(call: Callable[[], httpx2.Response]) -> tuple[httpx2.Response, float]:
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


@postgres_only
def test_every_request_that_meets_a_database_down_is_server_busy_within_the_pools_time_out(
    behind_proxy: tuple[Server, TcpProxy, str, str],
) -> None:
    server, proxy, key, session = behind_proxy
    cookies = {"sessionid": session}
    ok(server.base, "guide_flows", {}, key=key)
    with http_client(timeout=30, cookies=cookies) as http:
        assert http.get(server.base + "/").status_code == 200

    proxy.cut()
    time.sleep(1.5)  # every process forgets the key it checked (ADR 0032: 1 s)

    def get(path: str, **kw: object) -> Callable[[], httpx2.Response]:
        return lambda: http_get(server.base + path, timeout=30, **kw)  # type: ignore[arg-type]

    requests = {
        "a tool call (its key checked)": lambda: post(server.base, "guide_flows", {}, key=key),
        "the API with a key": get("/api/runs", headers=bearer(key)),
        "the API with a session": get("/api/runs", cookies=cookies),
        "a page": get("/", cookies=cookies),
        "the admin": get("/admin/", cookies=cookies),
    }
    for what, call in requests.items():
        response, seconds = timed(call)
        busy(response)
        # One wait for the pool, not two (an audit record written first would be a second).
        assert seconds < POOL_TIMEOUT + 2.5, (what, seconds)

    ready, seconds = timed(get("/readyz"))
    assert ready.status_code == 503 and ready.json()["error"] == "not ready"
    assert seconds < POOL_TIMEOUT
    assert http_get(server.base + "/healthz", timeout=10).status_code == 200
    assert "Traceback" not in server.output()


@postgres_only
def test_a_keyless_tool_call_on_a_database_down_is_a_server_busy_tool_error(
    behind_proxy: tuple[Server, TcpProxy, str, str],
) -> None:
    """Without a key the gate needs no lookup... but a server with a key refuses keyless
    calls only after looking keys up: the answer is still ``server busy``."""
    server, proxy, _, _ = behind_proxy
    proxy.cut()
    time.sleep(1.5)
    busy(post(server.base, "guide_flows", {}))
