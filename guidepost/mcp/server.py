"""The MCP SDK's low-level server, serving ``guidepost.mcp.tools`` over Streamable HTTP.

The low-level ``Server`` is used (not ``MCPServer``) so that input validation and
every error are ours: the error object of spec §7, never the SDK's pydantic text. The
transport is stateless with JSON responses: any worker or instance can answer
any call, and the run id is the only state a client carries.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.to_thread
import mcp.types as types
from django.conf import settings
from django.db import close_old_connections
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings

from access_app.callers import Transport
from flows_app.domain.jsontext import compact_json
from flows_app.domain.limits import MAX_REQUEST_BYTES
from guidepost.mcp.dispatch import Outcome, dispatch
from guidepost.mcp.gate import Gate, gate_context
from guidepost.mcp.tools import registry

INSTRUCTIONS = (
    "guidepost walks fixed procedures. Find a flow with guide_flows, start it with guide_start, "
    "then follow each result's `next`: deliver `tell` items in order, ask what `node` says in "
    "your own words, map the person's reply to one of the node's labels and send it with "
    "guide_answer. Never skip a step or invent one; when a result says stalled, hand over."
)


def _call_tool_result(outcome: Outcome) -> types.CallToolResult:
    text = types.TextContent(type="text", text=compact_json(outcome.payload))
    if outcome.is_error:
        return types.CallToolResult(content=[text], is_error=True)
    return types.CallToolResult(content=[text], structured_content=outcome.payload)


# Headers never handed to the tools: credentials.
_PRIVATE_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})


def _transport(ctx: ServerRequestContext[Any, Any]) -> Transport:
    """What the call's HTTP request established: the gate's key name and peer (a request
    that did not pass the gate is anonymous), and the client's name and version."""
    request = ctx.request
    peer = key_name = ""
    headers: dict[str, str] = {}
    if request is not None:
        gate = gate_context(request.scope)
        if gate is not None:
            peer, key_name = gate.peer, gate.key_name
        headers = {k: v for k, v in request.headers.items() if k not in _PRIVATE_HEADERS}
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    return Transport(
        peer=peer,
        client_name=info.name if info else "",
        client_version=info.version if info else "",
        key_name=key_name,
        headers=headers,
    )


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


_limiter: anyio.CapacityLimiter | None = None


def tool_limiter() -> anyio.CapacityLimiter:
    """The threads that run tool calls in this process: GUIDEPOST_TOOL_THREADS, the size
    of the database pool, so that a call never waits for a connection (ADR 0035). More
    calls wait here, in the event loop, for a thread."""
    global _limiter
    if _limiter is None:
        _limiter = anyio.CapacityLimiter(settings.GUIDEPOST_TOOL_THREADS)
    return _limiter


async def _call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    outcome = await anyio.to_thread.run_sync(
        _dispatch_in_thread, params.name, params.arguments, _transport(ctx), limiter=tool_limiter()
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


# Host and Origin are checked by our gate, the same way as for Django (guards.check_host):
# the SDK's own check would refuse a Host without a port that Django accepts. The SDK
# still refuses a POST that is not application/json.
NO_SDK_HOST_CHECK = TransportSecuritySettings(enable_dns_rebinding_protection=False)


def build_mcp_app(version: str) -> Gate:
    """A fresh server and Starlette app (the SDK's session manager runs once per instance),
    behind the gate (Host, Origin, agent keys, audit of refusals).

    ``version`` is what the server reports to clients (guidepost's own version).
    """
    app = build_server(version).streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        transport_security=NO_SDK_HOST_CHECK,
        max_request_body_size=MAX_REQUEST_BYTES,
    )
    return Gate(app)
