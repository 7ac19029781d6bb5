"""The MCP SDK's low-level server, serving ``runs_app.mcp.tools`` over Streamable HTTP.

The low-level ``Server`` is used (not ``MCPServer``) so that input validation and
every error are ours: contract-shaped, never the SDK's pydantic text. The
transport is stateless with JSON responses: any worker or instance can answer
any call, and the run id is the only state a client carries.
"""

from __future__ import annotations

import json
from typing import Any

import anyio.to_thread
import mcp.types as types
from django.conf import settings
from django.db import close_old_connections
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette

from runs_app.callers import Transport
from runs_app.mcp.dispatch import Outcome, dispatch
from runs_app.mcp.tools import registry

INSTRUCTIONS = (
    "guidepost walks fixed procedures. Find a flow with guide_flows, start it with guide_start, "
    "then follow each result's `next`: deliver `tell` items in order, ask what `node` says in "
    "your own words, map the person's reply to one of the node's labels and send it with "
    "guide_answer. Never skip a step or invent one; when a result says stalled, hand over."
)
# A draft may hold 256 KiB of YAML; JSON escaping can grow it, so allow some room.
MAX_REQUEST_BYTES = 1024 * 1024


def compact_json(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def _call_tool_result(outcome: Outcome) -> types.CallToolResult:
    text = types.TextContent(type="text", text=compact_json(outcome.payload))
    if outcome.is_error:
        return types.CallToolResult(content=[text], is_error=True)
    return types.CallToolResult(content=[text], structured_content=outcome.payload)


def _transport(ctx: ServerRequestContext[Any, Any]) -> Transport:
    request = ctx.request
    peer = ""
    headers: dict[str, str] = {}
    if request is not None:
        client = getattr(request, "client", None)
        peer = client.host if client else ""
        headers = dict(request.headers)
    params = ctx.session.client_params
    name = params.client_info.name if params is not None and params.client_info else ""
    return Transport(peer=peer, client_name=name, headers=headers)


def _dispatch_in_thread(name: str, arguments: object, transport: Transport) -> Outcome:
    # MCP calls do not pass Django's request handler, so connection upkeep is ours.
    close_old_connections()
    try:
        return dispatch(name, arguments, transport)
    finally:
        close_old_connections()


async def _list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name=tool.name,
                title=tool.title,
                description=tool.description,
                input_schema=tool.input_schema,
                output_schema=tool.output_schema,
                annotations=types.ToolAnnotations(
                    title=tool.title,
                    read_only_hint=tool.read_only,
                    destructive_hint=tool.destructive,
                    idempotent_hint=tool.read_only or tool.name == "guide_close",
                    open_world_hint=False,
                ),
            )
            for tool in registry.all()
        ]
    )


async def _call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    outcome = await anyio.to_thread.run_sync(
        _dispatch_in_thread, params.name, params.arguments, _transport(ctx)
    )
    return _call_tool_result(outcome)


def _input_schema(name: str) -> dict[str, Any] | None:
    tool = registry.get(name)
    return tool.input_schema if tool else None


def build_server(version: str) -> Server[Any]:
    return Server(
        "guidepost",
        version=version,
        instructions=INSTRUCTIONS,
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
        get_tool_input_schema=_input_schema,
    )


def transport_security() -> TransportSecuritySettings:
    """Host and Origin checks (DNS rebinding): loopback plus the configured hosts."""
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    for host in settings.ALLOWED_HOSTS:
        if host not in ("127.0.0.1", "localhost", "[::1]", "*"):
            hosts += [host, f"{host}:*"]
    origins += settings.GUIDEPOST_ALLOWED_ORIGINS
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def build_mcp_app(version: str) -> Starlette:
    """A fresh server and Starlette app (the SDK's session manager runs once per instance).

    ``version`` is what the server reports to clients (guidepost's own version).
    """
    return build_server(version).streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        transport_security=transport_security(),
        max_request_body_size=MAX_REQUEST_BYTES,
    )
