"""The floor: a bare server of the same MCP SDK, transport settings and uvicorn options as
guidepost, with one trivial tool. What the SDK and the HTTP stack cost a tool call, with
nothing of ours in it.

    python -m bench.floor_server --port 8200 [--workers 2] [--hop anyio|executor]
        [--store DATABASE_URL]

``--hop`` answers the tool from a worker thread, as guidepost answers its tools: what the
hand-over to a thread and back costs a call, alone (``python -m bench.hop_bench``), through
anyio's worker threads (guidepost's) or asyncio's ``run_in_executor`` on a pool of four.

``--store`` makes the tool record a step as guidepost's ``guide_answer`` does, on
guidepost's own tables at ``DATABASE_URL`` through the bare driver (``bench.floor_store``),
from anyio's worker threads: what any server that records each step durably pays a call,
with none of guidepost's code on the path.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import socket
from typing import Any

import anyio.to_thread
import mcp.types as types
import uvicorn
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings

TOOL = "ping"


async def _list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[types.Tool(name=TOOL, input_schema={"type": "object", "properties": {}})]
    )


def _result(payload: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text='{"ok":true}')], structured_content=payload
    )


async def _call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    return _result({"ok": True})


async def _call_tool_in_thread(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    return _result(await anyio.to_thread.run_sync(dict, {"ok": True}))


_EXECUTOR = concurrent.futures.ThreadPoolExecutor(4)  # its threads start with the first call


async def _call_tool_in_executor(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    loop = asyncio.get_running_loop()
    return _result(await loop.run_in_executor(_EXECUTOR, dict, {"ok": True}))


HOPS = {"": _call_tool, "anyio": _call_tool_in_thread, "executor": _call_tool_in_executor}


def _store_tool(url: str) -> Any:
    from bench.floor_store import Store
    from flowcore.common.jsontext import compact_json

    store = Store(url)
    limiter = anyio.CapacityLimiter(8)  # guidepost's GUIDEPOST_TOOL_THREADS

    async def _call_tool_storing(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        payload = await anyio.to_thread.run_sync(store.step, limiter=limiter)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=compact_json(payload))],
            structured_content=payload,
        )

    return _call_tool_storing


def app() -> Any:
    """The ASGI app (a factory: every worker builds its own)."""
    store = os.environ.get("FLOOR_STORE", "")
    call = _store_tool(store) if store else HOPS[os.environ.get("FLOOR_HOP", "")]
    server: Server[Any] = Server("floor", on_list_tools=_list_tools, on_call_tool=call)
    return server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--hop", choices=["anyio", "executor"], help="answer from a worker thread, handed over so"
    )
    parser.add_argument("--store", metavar="DATABASE_URL", help="record a step on each call")
    options = parser.parse_args()
    if options.hop:
        os.environ["FLOOR_HOP"] = options.hop  # read by app() in every worker
    if options.store:
        os.environ["FLOOR_STORE"] = options.store  # read by app() in every worker
        os.environ["DATABASE_URL"] = options.store  # prepare() migrates it
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "guidepost.settings")
    import django

    django.setup()  # guidepost's protocol reads its deadlines from the settings
    if options.store:
        from django.db import connections

        from bench.floor_store import prepare

        prepare(options.store)
        connections.close_all()
    from guidepost.management.commands.serve import uvicorn_options

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", options.port))
    config = uvicorn.Config(
        "bench.floor_server:app", factory=True, **uvicorn_options(options.workers)
    )
    if options.workers > 1:
        from uvicorn.supervisors import Multiprocess

        Multiprocess(config, sockets=[sock]).run()
    else:
        uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
