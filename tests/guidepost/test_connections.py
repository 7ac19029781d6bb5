"""What a real server does with hostile connections (ADR 0034) and with its workers'
supervisor dying (ADR 0035): GET /mcp/ gets 405, a request sent slowly is cut off at
its deadline, a body over 1 MiB gets 413, a rate-limited tool call is a tool error
over HTTP and the limit is shared by every worker, and SIGKILL of the supervisor
takes the workers with it so that a restart binds again."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.support.mcp_http import http_client, http_get, http_post
from tests.support.servers import (
    Server,
    copy_flows,
    free_port,
    fresh_database,
    serving,
    start_server,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

RPC_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}


def tool_call(name: str, arguments: dict[str, object]) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("connections")
    with serving(
        tmp,
        env={
            "GUIDEPOST_HEADER_TIMEOUT": "1",
            "GUIDEPOST_BODY_TIMEOUT": "1",
            "GUIDEPOST_RATE_BURST": "3",
            "GUIDEPOST_RATE_PER_SECOND": "0.01",
        },
    ) as running:
        yield running


def port_of(server: Server) -> int:
    return int(server.base.rsplit(":", 1)[1])


def closed_by_server(sock: socket.socket, deadline: float) -> bool:
    """Whether the server closes ``sock`` (EOF or reset) before ``deadline`` seconds."""
    sock.settimeout(deadline)
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def response_status(sock: socket.socket) -> int:
    """Read one whole response (headers, then Content-Length bytes); its status."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        rest += chunk
    return int(head.split(b" ", 2)[1])


def test_get_on_the_mcp_endpoint_is_405_not_an_open_stream(server: Server) -> None:
    for path in ("/mcp", "/mcp/"):
        response = http_get(server.base + path, headers={"Accept": "text/event-stream"}, timeout=5)
        assert response.status_code == 405, path
        assert response.headers["allow"] == "POST"
        assert response.json()["error"] == "method not allowed"
    assert httpx2.delete(server.url, timeout=5).status_code == 405


def test_headers_sent_too_slowly_are_cut_off(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", port_of(server))) as sock:
        sock.sendall(b"POST /mcp/ HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and then nothing
        assert closed_by_server(sock, 10)


def test_a_connection_that_sends_nothing_is_cut_off(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", port_of(server))) as sock:
        assert closed_by_server(sock, 10)


def test_a_body_sent_too_slowly_is_cut_off(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", port_of(server))) as sock:
        sock.sendall(
            b"POST /mcp/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{"
        )
        assert closed_by_server(sock, 10)


def test_a_request_sent_in_time_is_answered_on_a_kept_alive_connection(server: Server) -> None:
    """The deadlines only bound reading: two requests on one connection are both served,
    and a slow tool (here: none is slow) is never cut."""
    with http_client(timeout=10) as client:
        for _ in range(2):
            response = client.post(
                server.url,
                headers=RPC_HEADERS,
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
            )
            assert response.status_code == 200
        time.sleep(1.5)  # idle past the header deadline: an idle connection is not cut by it
        response = client.post(
            server.url,
            headers=RPC_HEADERS,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        )
        assert response.status_code == 200


def test_an_idle_kept_alive_connection_outlasts_the_clients_own_keep_alive(
    server: Server,
) -> None:
    """Issue 18: a client reusing its kept-alive connection just as the server closed it
    got a ReadError (the kernel resets a connection closed with a request unread). The
    server keeps an idle connection longer than clients keep theirs (httpx: 5 s), so the
    client lets go first; the header deadline starts with a request's first byte."""
    request = (
        b"POST /mcp/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n"
    )
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    request += b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    assert httpx2.Limits().keepalive_expiry == 5.0  # the MCP SDK's client keeps 5 s
    with socket.create_connection(("127.0.0.1", port_of(server))) as sock:
        sock.settimeout(10)
        sock.sendall(request)
        assert response_status(sock) == 200
        assert not closed_by_server(sock, 6.0)  # idle past httpx's 5 s and uvicorn's old 5 s
        sock.sendall(request)
        assert response_status(sock) == 200


def test_a_body_over_1_MiB_is_413(server: Server) -> None:
    body = json.dumps(tool_call("guide_draft", {"yaml": "x" * (1024 * 1024 + 10)}))
    response = http_post(server.url, headers=RPC_HEADERS, content=body, timeout=10)
    assert response.status_code == 413
    assert response.json() == {
        "error": "request too large",
        "reason": "the request body is over 1 MiB",
        "next": "Send a smaller body: a flow's YAML may be up to 256 KiB.",
        "retryable": False,
    }


def test_a_rate_limited_tool_call_is_a_tool_error_in_the_error_shape(server: Server) -> None:
    payloads = []
    with http_client(timeout=10) as client:
        for _ in range(4):
            response = client.post(
                server.url, headers=RPC_HEADERS, json=tool_call("guide_flows", {})
            )
            assert response.status_code == 200
            payloads.append(response.json()["result"])
    assert [p["isError"] for p in payloads] == [False, False, False, True]
    error = json.loads(payloads[3]["content"][0]["text"])
    assert (error["error"], error["retryable"]) == ("rate limited", True)
    assert error["retry_after"] > 90


# --- workers ------------------------------------------------------------------------------------


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_rate_limit_is_shared_by_every_worker(tmp_path: Path) -> None:
    """Two workers, a burst of 4: the fifth call is refused whichever worker takes it
    (per-process buckets would let up to 8 through)."""
    with fresh_database(tmp_path) as database_url:
        server = start_server(
            database_url=database_url,
            flows_dir=copy_flows(tmp_path / "flows"),
            log=tmp_path / "server.log",
            workers=2,
            env={"GUIDEPOST_RATE_BURST": "4", "GUIDEPOST_RATE_PER_SECOND": "0.01"},
        )
        try:
            results = []
            for _ in range(8):
                # A new connection each time, so the calls spread over both workers.
                with http_client(timeout=10) as client:
                    response = client.post(
                        server.url, headers=RPC_HEADERS, json=tool_call("guide_flows", {})
                    )
                    results.append(response.json()["result"]["isError"])
        finally:
            server.stop()
    assert results == [False] * 4 + [True] * 4


def test_workers_die_with_a_killed_supervisor_and_a_restart_binds_again(tmp_path: Path) -> None:
    port = free_port()
    with fresh_database(tmp_path) as database_url:
        flows = copy_flows(tmp_path / "flows")
        first = start_server(
            database_url=database_url,
            flows_dir=flows,
            log=tmp_path / "first.log",
            workers=2,
            port=port,
        )
        serving: set[int] = set()
        try:
            supervisor = first.process.pid
            serving = {pid for pid in children_of(supervisor) if alive(pid)}
            assert len(serving) >= 2, serving  # two workers (and perhaps a resource tracker)
            os.kill(supervisor, signal.SIGKILL)
            first.process.wait(timeout=10)

            wait_until(
                lambda: not any(alive(pid) for pid in serving),
                15,
                message=lambda: f"workers still alive: {[p for p in serving if alive(p)]}",
            )
            second = start_server(
                database_url=database_url,
                flows_dir=flows,
                log=tmp_path / "second.log",
                workers=2,
                port=port,
            )
            try:
                response = http_post(
                    second.url,
                    headers=RPC_HEADERS,
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                    timeout=10,
                )
                assert response.status_code == 200
                assert "Address already in use" not in second.output()
            finally:
                second.stop()
        finally:
            first.stop()
            for pid in serving:  # never leave an orphan behind, even when the test failed
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
