"""pydantic-ai's ``MCPToolset`` (built on fastmcp's client) against a guidepost server.

    uv run --isolated --no-project --with 'pydantic-ai-slim[mcp]==2.68.0' \\
        python probe_pydantic_ai.py MCP_URL

pydantic-ai 2.x replaced ``MCPServerStreamableHTTP`` with ``MCPToolset``. Tools are
called with ``direct_call_tool`` (what an agent run calls): a success returns the
structured content; an ``isError`` result raises ``ModelRetry`` whose message, our
error object as JSON, goes back to the model. See steps.py for the calls.

Then two agent runs with a scripted model (``FunctionModel``: no LLM) that calls
guide_status on unknown runs three times, once with the default
``tool_error_behavior="retry"`` and once with ``"failed"``: what becomes of an agent
whose tool call fails more often than its retry budget.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from steps import UNKNOWN_RUN, Called, key_headers, main, parsed

FAILED_CALLS = 3


class Adapter:
    def __init__(self, toolset: MCPToolset[Any]) -> None:
        self.toolset = toolset

    async def tools(self) -> list[str]:
        return sorted(tool.name for tool in await self.toolset.list_tools())

    async def call(self, name: str, args: dict[str, Any]) -> Called:
        try:
            result = await self.toolset.direct_call_tool(name, args)
        except ModelRetry as exc:
            return Called(payload=parsed(exc.message), is_error=True, surfaced="ModelRetry")
        # The structured content, as the model would get it; the text block is not shown.
        return Called(payload=result, is_error=False, surfaced="result")

    async def resources(self) -> list[str]:
        # An empty list when the server offers no resources capability.
        return [r.uri for r in await self.toolset.list_resources()]

    async def templates(self) -> list[str]:
        return [t.uri_template for t in await self.toolset.list_resource_templates()]

    async def read(self, uri: str) -> str:
        content = await self.toolset.read_resource(uri)
        if not isinstance(content, str):
            raise TypeError(f"expected the YAML text, got {type(content).__name__}")
        return content


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A model that calls guide_status FAILED_CALLS times, then says what it last saw."""
    calls = sum(isinstance(part, ToolCallPart) for m in messages for part in m.parts)
    if calls < FAILED_CALLS:
        return ModelResponse(parts=[ToolCallPart("guide_status", {"run_id": UNKNOWN_RUN})])
    return ModelResponse(parts=[TextPart(str(getattr(messages[-1].parts[-1], "content", "")))])


async def agent_runs(adapter: Adapter, report: dict[str, Any]) -> None:
    url = sys.argv[1]
    for behaviour in ("retry", "failed"):
        toolset = MCPToolset(url, headers=key_headers(), tool_error_behavior=behaviour)
        try:
            result = await Agent(FunctionModel(scripted), toolsets=[toolset]).run("walk")
            outcome = {"output": parsed(result.output)}
        except Exception as exc:  # noqa: BLE001 - the run's end is what is reported
            outcome = {"raised": type(exc).__name__}
        report[f"agent_{behaviour}"] = outcome


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[Adapter]:
    async with MCPToolset(url, headers=key_headers(), read_timeout=30) as toolset:
        yield Adapter(toolset)


if __name__ == "__main__":
    sys.exit(main(["pydantic-ai-slim", "fastmcp-slim", "mcp"], connect, agent_runs))
