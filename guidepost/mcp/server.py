"""The MCP SDK's low-level server, serving ``guidepost.mcp.tools``, the resources of
``guidepost.mcp.resources`` and one prompt over Streamable HTTP.

The low-level ``Server`` is used (not ``MCPServer``) so that input validation and
every error are ours: the error object, never the SDK's pydantic text (a failed tool
call carries it as its text; a failed resource read or prompt, as a JSON-RPC error's
``data``). The transport is stateless with JSON responses:
any worker or instance can answer any call, and the run id is the only state a client
carries.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.to_thread
import mcp.types as types
from django.conf import settings
from django.db import close_old_connections
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND

from access_app import request_ids
from access_app.callers import DEFAULT_LIMITS, Transport
from flowcore.common.errors import NotFound, Refusal, error_object
from flowcore.common.jsontext import compact_json
from flowcore.common.limits import MAX_REQUEST_BYTES
from flowcore.common.names import closest
from flowcore.common.text import shown
from guidepost.mcp.dispatch import Outcome, dispatch
from guidepost.mcp.gate import Gate, gate_context, mark_recorded, record_call_refused
from guidepost.mcp.resources import READ_RESOURCE, TEMPLATES, flows_page
from guidepost.mcp.tools import Tool, registry

# How an agent walks flows: sent on initialize, and offered as the one prompt.
INSTRUCTIONS = (
    "guidepost walks fixed procedures. Find a flow with guide_flows, start it with guide_start, "
    "then follow each result's `next`: deliver `tell` items in order, ask what `node` says in "
    "your own words, map the person's reply to one of the node's labels and send it with "
    "guide_answer. Never skip a step or invent one; when a result says stalled, hand over. "
    "To improve a procedure, read its YAML at guidepost://flows/{flow_id}, submit the edited "
    "text with guide_draft, and read guidepost://drafts/{draft_id} later to learn whether a "
    "person approved it."
)
PROMPT = types.Prompt(
    name="walk_flows",
    title="Walk guidepost's procedures",
    description="How to follow a procedure with guidepost's tools (the server's instructions).",
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
    peer = key_name = connection = ""
    key_limits = DEFAULT_LIMITS
    token_scopes = None
    headers: dict[str, str] = {}
    if request is not None:
        client = request.scope.get("client")
        if client:
            connection = f"{client[0]}:{client[1]}"
        gate = gate_context(request.scope)
        if gate is not None:
            peer, key_name, key_limits = gate.peer, gate.key_name, gate.key_limits
            token_scopes = gate.token_scopes
        headers = {k: v for k, v in request.headers.items() if k not in _PRIVATE_HEADERS}
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    return Transport(
        peer=peer,
        client_name=info.name if info else "",
        client_version=info.version if info else "",
        key_name=key_name,
        headers=headers,
        key_limits=key_limits,
        connection=connection,
        token_scopes=token_scopes,
    )


def _dispatch_in_thread(
    name: str, arguments: object, transport: Transport, tool: Tool | None = None
) -> Outcome:
    # MCP calls do not pass Django's request handler, so connection upkeep is ours; nor
    # is the SDK's task answering them the request's, so its id comes from the header.
    close_old_connections()
    request_id = request_ids.current.set(transport.headers.get(request_ids.HEADER, ""))
    try:
        return dispatch(name, arguments, transport, tool)
    finally:
        request_ids.current.reset(request_id)
        close_old_connections()


def _rpc_error(error: dict[str, Any], *, server_side: bool = False) -> MCPError:
    """A refusal of a request that is not a tool call, as a JSON-RPC error: the error
    object as ``data``, and in words as ``message`` for clients that show only
    that; "invalid params" when the request is at fault, else "internal error"."""
    return MCPError(
        code=INTERNAL_ERROR if server_side else INVALID_PARAMS,
        message=f"{error['error']}: {error['reason']}. {error['next']}",
        data=error,
    )


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
    of the database pool, so that a call never waits for a connection. More
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


async def _list_resources(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    try:
        return await anyio.to_thread.run_sync(
            flows_page, params.cursor if params else None, limiter=tool_limiter()
        )
    except Refusal as refusal:
        raise _rpc_error(dict(error_object(refusal))) from None


async def _list_resource_templates(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(resource_templates=TEMPLATES)


async def _read_resource(
    ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    outcome = await anyio.to_thread.run_sync(
        _dispatch_in_thread,
        READ_RESOURCE.name,
        {"uri": str(params.uri)},
        _transport(ctx),
        READ_RESOURCE,
        limiter=tool_limiter(),
    )
    if outcome.is_error:
        if ctx.request is not None:
            mark_recorded(ctx.request.scope)
        raise _rpc_error(outcome.payload, server_side=outcome.server_side)
    read = outcome.payload
    return types.ReadResourceResult(
        contents=[
            types.TextResourceContents(
                uri=read["uri"], mime_type=read["mimeType"], text=read["text"]
            )
        ]
    )


async def _list_prompts(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[PROMPT])


async def _get_prompt(
    ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    if params.name != PROMPT.name:
        refusal = NotFound(
            "prompt not found",
            f"there is no prompt named {shown(params.name)}",
            f"Get the prompt {PROMPT.name} (prompts/list lists it).",
            retryable=True,
            candidates=closest(params.name, [PROMPT.name]),
        )
        raise _rpc_error(dict(error_object(refusal)))
    return types.GetPromptResult(
        description=PROMPT.description,
        messages=[
            types.PromptMessage(
                role="user", content=types.TextContent(type="text", text=INSTRUCTIONS)
            )
        ],
    )


def _input_schema(name: str) -> dict[str, Any] | None:
    tool = registry.get(name)
    return tool.input_schema if tool else None


# The JSON-RPC methods this server answers (an unknown one's candidates come from here).
METHODS = (
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
)


class UnknownMethods:
    """Server middleware: a request for a method this server does not have is refused with
    the error object as the JSON-RPC error's ``data`` (``method not found``),
    and recorded in the audit trail like every other refusal."""

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        try:
            return await call_next(ctx)
        except MCPError as exc:
            if exc.error.code != METHOD_NOT_FOUND:
                raise
            refusal = Refusal(
                "method not found",
                f"this server has no JSON-RPC method {shown(ctx.method)}",
                "Use the methods of MCP this server offers: " + ", ".join(METHODS) + ".",
                candidates=closest(ctx.method, list(METHODS)),
            )
            if ctx.request is not None:
                tool = "rpc " + ctx.method[:64]
                await record_call_refused(ctx.request.scope, tool, refusal.error)
            error = dict(error_object(refusal))
            raise MCPError(
                code=METHOD_NOT_FOUND,
                message=f"{error['error']}: {error['reason']}. {error['next']}",
                data=error,
            ) from None


def build_server(version: str) -> Server[Any]:
    server = _build_server(version)
    server.middleware.append(UnknownMethods())
    return server


def _build_server(version: str) -> Server[Any]:
    return Server(
        "guidepost",
        version=version,
        instructions=INSTRUCTIONS,
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
        on_list_resources=_list_resources,
        on_list_resource_templates=_list_resource_templates,
        on_read_resource=_read_resource,
        on_list_prompts=_list_prompts,
        on_get_prompt=_get_prompt,
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
