"""Host and Origin over real HTTP: /mcp, the pages and the API accept exactly the same
Host values and refuse the others the same way (ADR 0032). A Host is a name in
GUIDEPOST_ALLOWED_HOSTS with any port or none; a malformed one (``user@host``) is 400,
an unlisted name is 421. A browser Origin must be this machine's or a listed one.
"""

from __future__ import annotations

import socket

import httpx2
import pytest

from tests.support.mcp_http import RPC_HEADERS, http_client, http_refusal
from tests.support.servers import Server

pytestmark = pytest.mark.slow

TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def port_of(server: Server) -> str:
    return server.base.rsplit(":", 1)[1]


def requests(server: Server, host: str) -> dict[str, httpx2.Response]:
    """The same Host sent to /mcp, a page and the API."""
    with http_client(timeout=30) as http:
        return {
            "mcp": http.post(server.url, json=TOOLS_LIST, headers={**RPC_HEADERS, "Host": host}),
            "page": http.get(server.base + "/admin/login/", headers={"Host": host}),
            "api": http.get(server.base + "/api/runs", headers={"Host": host}),
        }


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:{port}", "127.0.0.1", "localhost", "localhost:{port}", "[::1]:{port}", "LOCALHOST"],
)
def test_a_listed_name_with_or_without_a_port_is_served_everywhere(
    server: Server, host: str
) -> None:
    answers = requests(server, host.format(port=port_of(server)))

    assert answers["mcp"].status_code == 200, answers["mcp"].text
    assert "tools" in answers["mcp"].json()["result"]
    assert answers["page"].status_code == 200
    http_refusal(answers["api"], 401, "not signed in")  # past the Host check: asks who


@pytest.mark.parametrize(
    "host", ["user@127.0.0.1:{port}", "127.0.0.1:{port}@evil.example", "127.0.0.1:port", "a b"]
)
def test_a_malformed_host_is_400_everywhere(server: Server, host: str) -> None:
    for where, answer in requests(server, host.format(port=port_of(server))).items():
        assert answer.status_code == 400, where
        http_refusal(answer, 400, "invalid host")


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.2:{port}"])
def test_a_name_this_server_does_not_serve_is_421_everywhere(server: Server, host: str) -> None:
    for where, answer in requests(server, host.format(port=port_of(server))).items():
        assert answer.status_code == 421, where
        http_refusal(answer, 421, "host not allowed")


def raw_http10(server: Server, request: bytes) -> bytes:
    host, port = server.base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), 10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_an_http10_request_without_a_host_is_judged_by_the_address_it_reached(
    server: Server,
) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'
    mcp = raw_http10(
        server,
        b"POST /mcp HTTP/1.0\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body,
    )
    page = raw_http10(server, b"GET /admin/login/ HTTP/1.0\r\n\r\n")

    assert mcp.startswith(b"HTTP/1.1 200"), mcp[:200]
    assert page.startswith(b"HTTP/1.1 200"), page[:200]


@pytest.mark.parametrize(
    "origin", ["http://localhost", "http://127.0.0.1:{port}", "https://localhost:8443"]
)
def test_this_machines_origins_may_call_mcp(server: Server, origin: str) -> None:
    with http_client(timeout=30) as http:
        answer = http.post(
            server.url,
            json=TOOLS_LIST,
            headers={**RPC_HEADERS, "Origin": origin.format(port=port_of(server))},
        )
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(
    "origin",
    [
        "null",
        "http://evil.example",
        "http://localhost.evil.example",
        "http://127.0.0.1@evil.example",
        "file://localhost",
    ],
)
def test_another_sites_origin_is_403(server: Server, origin: str) -> None:
    with http_client(timeout=30) as http:
        answer = http.post(server.url, json=TOOLS_LIST, headers={**RPC_HEADERS, "Origin": origin})
    http_refusal(answer, 403, "origin not allowed")
