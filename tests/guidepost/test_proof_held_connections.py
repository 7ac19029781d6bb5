"""Proof (issue 11, point 7): a server holding 1,000 idle connections still answers a tool
call on a fresh one, while it still holds them (ADR 0028).

Idle connections are cut at the header deadline (ADR 0034); here that deadline is set far
beyond the test's own time-outs, so an answer cannot come from the idle connections
having been cut first: it must come while all of them are open.
"""

from __future__ import annotations

import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mcp_http import http_post, ok
from tests.support.servers import Server, copy_flows, fresh_database, start_server

pytestmark = pytest.mark.slow

IDLE = 1_000
# Far longer than any time-out below: no idle connection is cut during the test.
HEADER_TIMEOUT = "600"


@pytest.fixture
def enough_descriptors() -> Iterator[None]:
    """This process opens IDLE sockets at once: raise the soft limit if it is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = IDLE + 256
    if soft != resource.RLIM_INFINITY and soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.fail(f"the hard limit of open files ({hard}) is below {wanted}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def still_open(sock: socket.socket) -> bool:
    """Whether the server has neither closed nor reset ``sock`` (nothing to read yet)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def test_a_tool_call_on_a_fresh_connection_is_answered_while_1000_idle_connections_are_held(
    tmp_path: Path, enough_descriptors: None
) -> None:
    with fresh_database(tmp_path) as database_url:
        server: Server = start_server(
            database_url=database_url,
            flows_dir=copy_flows(tmp_path / "flows"),
            log=tmp_path / "server.log",
            env={"GUIDEPOST_HEADER_TIMEOUT": HEADER_TIMEOUT},
        )
        port = int(server.base.rsplit(":", 1)[1])
        idle: list[socket.socket] = []
        try:
            for _ in range(IDLE):
                idle.append(socket.create_connection(("127.0.0.1", port), timeout=10))
            # Each idle connection was accepted (not only queued) once the server has
            # answered a request that arrived after all of them.
            started = ok(server.base, "guide_start", {"flow_id": "refund_request"})
            answered = ok(
                server.base,
                "guide_answer",
                {"run_id": started["run_id"], "values": {"order_number": "A00118"}},
            )
            open_after = sum(still_open(sock) for sock in idle)
        finally:
            for sock in idle:
                sock.close()
            server.stop()

    assert answered["node"]["id"] == "n_reason"
    assert open_after == IDLE  # answered while every idle connection was held


def test_a_request_past_the_concurrency_limit_gets_server_busy_in_the_error_shape(
    tmp_path: Path,
) -> None:
    """The limit still bounds requests being served: with a limit of 1, a request whose
    body is still arriving is being served, and a second request gets 503 ``server busy``
    with ``Retry-After`` (idle connections alone never did, above)."""
    with fresh_database(tmp_path) as database_url:
        server = start_server(
            database_url=database_url,
            flows_dir=copy_flows(tmp_path / "flows"),
            log=tmp_path / "server.log",
            env={"GUIDEPOST_LIMIT_CONCURRENCY": "1", "GUIDEPOST_BODY_TIMEOUT": "600"},
        )
        port = int(server.base.rsplit(":", 1)[1])
        try:
            for _ in range(20):
                # A request just answered may still be finishing (its task outlives its
                # response for a moment), and the slow request is then the one refused:
                # each try sends a new slow request, then another request behind it.
                with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
                    slow.sendall(
                        b"POST /mcp/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        b"Content-Type: application/json\r\n"
                        b"Accept: application/json, text/event-stream\r\n"
                        b"Content-Length: 100\r\n\r\n{"
                    )
                    time.sleep(0.2)
                    response = http_post(server.url, json={}, timeout=20)
                if response.status_code == 503:
                    break
        finally:
            server.stop()

    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "2"
    body = response.json()
    assert (body["error"], body["retryable"], body["retry_after"]) == ("server busy", True, 2)
