"""fastmcp's ``Client`` against a guidepost server.

    uv run --isolated --no-project --with fastmcp==4.2.3 python probe_fastmcp.py MCP_URL

``Client.call_tool`` raises ``ToolError`` (its message: our error object's text) on
an ``isError`` result; a successful result's structured content is validated and
converted through the tool's output schema into ``data``. See steps.py for the calls.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.exceptions import ToolError
from mcp.types import TextContent, TextResourceContents
from steps import Called, from_result, key_headers, main, parsed


class Adapter:
    def __init__(self, client: Client[Any]) -> None:
        self.client = client
        self.data: dict[str, Any] = {}

    async def tools(self) -> list[str]:
        return sorted(tool.name for tool in await self.client.list_tools())

    async def call(self, name: str, args: dict[str, Any]) -> Called:
        try:
            result = await self.client.call_tool(name, args)
        except ToolError as exc:
            return Called(payload=parsed(str(exc)), is_error=True, surfaced="ToolError")
        node = getattr(result.data, "node", None)
        self.data[name] = {
            "type": type(result.data).__name__,
            "node_none": sorted(k for k, v in vars(node).items() if v is None) if node else [],
        }
        return from_result(
            [b.text for b in result.content if isinstance(b, TextContent)],
            result.is_error,
            result.structured_content,
        )

    async def resources(self) -> list[str]:
        return [str(r.uri) for r in await self.client.list_resources()]

    async def templates(self) -> list[str]:
        return [t.uri_template for t in await self.client.list_resource_templates()]

    async def read(self, uri: str) -> str:
        contents = await self.client.read_resource(uri)
        return "".join(c.text for c in contents if isinstance(c, TextResourceContents))


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[Adapter]:
    # Client(url, auth=key) sends the same Bearer header; headers= takes any header.
    transport = StreamableHttpTransport(url, headers=key_headers())
    async with Client(transport, timeout=30) as client:
        yield Adapter(client)


async def data(adapter: Adapter, report: dict[str, Any]) -> None:
    """What ``result.data`` (the output-schema conversion) made of each result."""
    report["data"] = adapter.data


if __name__ == "__main__":
    sys.exit(main(["fastmcp", "mcp"], connect, data))
