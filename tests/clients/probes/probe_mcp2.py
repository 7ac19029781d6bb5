"""The official Python MCP SDK 2.x (``mcp.Client``) against a guidepost server.

    python probe_mcp2.py MCP_URL [legacy]

Runs in the project's own environment (mcp 2.x is its dependency). Without a
second argument the client negotiates as it does by default (``mode="auto"``: the
2026-07-28 protocol, no ``initialize``); with ``legacy`` it uses the initialize
handshake of the protocols before it. See steps.py for the calls.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent, TextResourceContents
from steps import Called, from_result, key_headers, main

MODE = sys.argv.pop() if sys.argv[-1] == "legacy" else "auto"


class Adapter:
    def __init__(self, client: Client) -> None:
        self.client = client

    async def tools(self) -> list[str]:
        return sorted(tool.name for tool in (await self.client.list_tools()).tools)

    async def call(self, name: str, args: dict[str, Any]) -> Called:
        result = await self.client.call_tool(name, args)
        return from_result(
            [b.text for b in result.content if isinstance(b, TextContent)],
            result.is_error,
            result.structured_content,
        )

    async def resources(self) -> list[str]:
        return [str(r.uri) for r in (await self.client.list_resources()).resources]

    async def templates(self) -> list[str]:
        listed = await self.client.list_resource_templates()
        return [t.uri_template for t in listed.resource_templates]

    async def read(self, uri: str) -> str:
        contents = (await self.client.read_resource(uri)).contents
        return "".join(c.text for c in contents if isinstance(c, TextResourceContents))


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[Adapter]:
    # The SDK sends extra headers through the httpx2 client it is given.
    async with (
        httpx2.AsyncClient(headers=key_headers(), timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=MODE) as client,
    ):
        yield Adapter(client)


if __name__ == "__main__":
    sys.exit(main(["mcp"], connect))
