"""Tool calls as raw JSON-RPC POSTs over real HTTP, each on a fresh connection (so calls
to a server with several workers land on any of them), with the headers a test chooses:
an agent key, a Host, an Origin, a forwarded address; and the HTTP clients tests make.
"""

from __future__ import annotations

import json
import ssl
from typing import Any

import httpx2

RPC_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}
ERROR_KEYS = {"error", "reason", "next", "retryable"}

# Tests reach their servers over plain HTTP on loopback. httpx still makes a TLS context
# for each client (about 30 ms of CPU: the CA bundle is read each time), and many tests
# make a client a call: every client made here shares this one.
TLS = ssl.create_default_context()


def http_client(**options: Any) -> httpx2.Client:
    """A client of its own (its own connections), with the shared TLS context."""
    return httpx2.Client(verify=TLS, **options)


def async_http_client(**options: Any) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(verify=TLS, **options)


def http_get(url: str, *, cookies: dict[str, str] | None = None, **options: Any) -> httpx2.Response:
    """One GET on a connection of its own."""
    with http_client(cookies=cookies) as http:
        return http.get(url, **options)


def http_post(url: str, **options: Any) -> httpx2.Response:
    """One POST on a connection of its own."""
    with http_client() as http:
        return http.post(url, **options)


def bearer(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def post(
    base: str,
    tool: str,
    args: dict[str, Any],
    *,
    key: str | None = None,
    headers: dict[str, str] | None = None,
    path: str = "/mcp/",
) -> httpx2.Response:
    """One ``tools/call`` (no session: the server is stateless)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool}}
    body["params"]["arguments"] = args
    with http_client(timeout=30) as http:
        return http.post(
            base + path, json=body, headers={**RPC_HEADERS, **bearer(key), **(headers or {})}
        )


def outcome(response: httpx2.Response) -> tuple[bool, dict[str, Any]]:
    """(is_error, the JSON object) of a tool call answered 200."""
    assert response.status_code == 200, (response.status_code, response.text)
    result = response.json()["result"]
    payload = json.loads(result["content"][0]["text"])
    return bool(result.get("isError")), payload


def ok(base: str, tool: str, args: dict[str, Any], **kw: Any) -> dict[str, Any]:
    is_error, payload = outcome(post(base, tool, args, **kw))
    assert not is_error, payload
    return payload


def fail(base: str, tool: str, args: dict[str, Any], **kw: Any) -> dict[str, Any]:
    is_error, payload = outcome(post(base, tool, args, **kw))
    assert is_error, payload
    return payload


def http_refusal(response: httpx2.Response, status: int, error: str) -> dict[str, Any]:
    """An HTTP-level refusal: ``status``, and the error object (spec §7) with ``error``."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert ERROR_KEYS <= body.keys(), body
    assert body["error"] == error, body
    assert body["retryable"] is False
    return dict(body)
