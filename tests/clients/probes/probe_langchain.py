"""langchain-mcp-adapters (``MultiServerMCPClient`` and its LangChain tools) against a
guidepost server.

    uv run --isolated --no-project --with langchain-mcp-adapters==0.3.2 --with mcp==1.30.0 \\
        python probe_langchain.py MCP_URL [session]

0.3.2 pins ``mcp<2``. Tools are invoked as an agent's tool call would be (a
``ToolMessage`` comes back: ``status="error"`` for an ``isError`` result). Without a
second argument the tools come from ``MultiServerMCPClient.get_tools()``, which opens
a new MCP session for every call; with ``session`` they come from
``load_mcp_tools(session)`` on one session kept open (the cheaper way). Resources are
listed through an MCP session and read with ``load_mcp_resources``. See steps.py for
the calls.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.resources import load_mcp_resources
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp import ClientSession
from steps import Called, from_result, key_headers, main

SERVER = "guidepost"
ONE_SESSION = sys.argv.pop() == "session" if len(sys.argv) == 3 else False


class Adapter:
    def __init__(self, client: MultiServerMCPClient, session: ClientSession | None) -> None:
        self.client = client
        self.session = session
        self.langchain_tools: dict[str, Any] = {}

    @asynccontextmanager
    async def mcp_session(self) -> AsyncIterator[ClientSession]:
        if self.session is not None:
            yield self.session
        else:
            async with self.client.session(SERVER) as session:
                yield session

    async def tools(self) -> list[str]:
        if self.session is not None:
            listed = await load_mcp_tools(self.session)
        else:
            listed = await self.client.get_tools()
        self.langchain_tools = {t.name: t for t in listed}
        return sorted(self.langchain_tools)

    async def call(self, name: str, args: dict[str, Any]) -> Called:
        call = {"type": "tool_call", "id": f"call-{name}", "name": name, "args": args}
        message = await self.langchain_tools[name].ainvoke(call)
        blocks = message.content
        texts = (
            [blocks]
            if isinstance(blocks, str)
            else [b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        )
        return from_result(
            texts,
            message.status == "error",
            (message.artifact or {}).get("structured_content"),
            surfaced=f"ToolMessage status={message.status}",
        )

    async def resources(self) -> list[str]:
        # load_mcp_resources() without uris lists and reads every resource: the list
        # alone is the MCP session's.
        async with self.mcp_session() as session:
            return [str(r.uri) for r in (await session.list_resources()).resources]

    async def templates(self) -> list[str]:
        async with self.mcp_session() as session:
            listed = await session.list_resource_templates()
            return [t.uriTemplate for t in listed.resourceTemplates]

    async def read(self, uri: str) -> str:
        async with self.mcp_session() as session:
            blobs = await load_mcp_resources(session, uris=uri)
        return "".join(blob.as_string() for blob in blobs)


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[Adapter]:
    connection = {"url": url, "transport": "streamable_http", "headers": key_headers()}
    client = MultiServerMCPClient({SERVER: connection})
    if not ONE_SESSION:
        yield Adapter(client, None)
        return
    async with client.session(SERVER) as session:
        yield Adapter(client, session)


if __name__ == "__main__":
    sys.exit(main(["langchain-mcp-adapters", "langchain-core", "mcp"], connect))
