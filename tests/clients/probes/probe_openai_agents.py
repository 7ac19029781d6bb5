"""openai-agents' ``MCPServerStreamableHttp`` against a guidepost server.

    uv run --isolated --no-project --with openai-agents==0.24.0 \\
        python probe_openai_agents.py MCP_URL

The steps call the server object's ``call_tool`` (``isError`` on the result). Then,
as an agent would see them: the tools converted to function tools with strict
schemas asked for (``convert_schemas_to_strict=True``, which falls back to a
non-strict schema where the conversion fails), and what the model receives from
a failed call. See steps.py for the calls.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from agents.mcp import MCPServerStreamableHttp, MCPUtil
from agents.tool_context import ToolContext
from mcp.types import TextContent, TextResourceContents
from steps import UNKNOWN_RUN, Called, from_result, key_headers, main


class Adapter:
    def __init__(self, server: MCPServerStreamableHttp) -> None:
        self.server = server

    async def tools(self) -> list[str]:
        return sorted(tool.name for tool in await self.server.list_tools())

    async def call(self, name: str, args: dict[str, Any]) -> Called:
        result = await self.server.call_tool(name, args)
        return from_result(
            [b.text for b in result.content if isinstance(b, TextContent)],
            result.is_error,
            result.structured_content,
        )

    async def resources(self) -> list[str]:
        return [str(r.uri) for r in (await self.server.list_resources()).resources]

    async def templates(self) -> list[str]:
        listed = await self.server.list_resource_templates()
        return [t.uri_template for t in listed.resource_templates]

    async def read(self, uri: str) -> str:
        contents = (await self.server.read_resource(uri)).contents
        return "".join(c.text for c in contents if isinstance(c, TextResourceContents))


async def as_agent_tools(adapter: Adapter, report: dict[str, Any]) -> None:
    """Strict conversion per tool, and the failed call as the model would receive it."""
    server = adapter.server
    tools = {tool.name: tool for tool in await server.list_tools()}
    converted = {
        name: MCPUtil.to_function_tool(tool, server, convert_schemas_to_strict=True)
        for name, tool in tools.items()
    }
    report["strict"] = {name: tool.strict_json_schema for name, tool in sorted(converted.items())}
    report["strict_required"] = {
        name: tool.params_json_schema.get("required", [])
        for name, tool in sorted(converted.items())
        if tool.strict_json_schema
    }
    arguments = json.dumps({"run_id": UNKNOWN_RUN})
    context = ToolContext(
        context=None, tool_name="guide_status", tool_call_id="call-1", tool_arguments=arguments
    )
    seen = await converted["guide_status"].on_invoke_tool(context, arguments)
    report["model_sees_error"] = seen
    # guide_flows as the model receives it: the text block as the server wrote it (the
    # default), or, with use_structured_content, the structured content re-serialized by
    # the library (json.dumps: every non-ASCII character escaped).
    flows = ToolContext(
        context=None, tool_name="guide_flows", tool_call_id="call-2", tool_arguments="{}"
    )
    report["model_sees_flows"] = {}
    for structured in (False, True):
        server.use_structured_content = structured
        output = await converted["guide_flows"].on_invoke_tool(flows, "{}")
        text = output if isinstance(output, str) else output["text"]
        report["model_sees_flows"]["structured" if structured else "text"] = text
    server.use_structured_content = False


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[Adapter]:
    params = {"url": url, "headers": key_headers(), "timeout": 30}
    async with MCPServerStreamableHttp(
        params, cache_tools_list=True, client_session_timeout_seconds=30
    ) as server:
        yield Adapter(server)


if __name__ == "__main__":
    sys.exit(main(["openai-agents", "mcp"], connect, as_agent_tools))
