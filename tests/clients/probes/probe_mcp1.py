"""The official Python MCP SDK 1.x (``ClientSession``) against a guidepost server.

    uv run --isolated --no-project --with mcp==1.30.0 python probe_mcp1.py MCP_URL

See steps.py for the calls.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.types import TextContent, TextResourceContents
from steps import Called, from_result, key_headers, main


class Adapter:
    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def tools(self) -> list[str]:
        return sorted(tool.name for tool in (await self.session.list_tools()).tools)

    async def call(self, name: str, args: dict[str, Any]) -> Called:
        result = await self.session.call_tool(name, args)
        return from_result(
            [b.text for b in result.content if isinstance(b, TextContent)],
            result.isError,
            result.structuredContent,
        )

    async def resources(self) -> list[str]:
        return [str(r.uri) for r in (await self.session.list_resources()).resources]

    async def templates(self) -> list[str]:
        listed = await self.session.list_resource_templates()
        return [t.uriTemplate for t in listed.resourceTemplates]

    async def read(self, uri: str) -> str:
        from pydantic import AnyUrl

        contents = (await self.session.read_resource(AnyUrl(uri))).contents
        return "".join(c.text for c in contents if isinstance(c, TextResourceContents))


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[Adapter]:
    async with (
        streamablehttp_client(url, headers=key_headers(), timeout=30) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield Adapter(session)


if __name__ == "__main__":
    sys.exit(main(["mcp"], connect))
