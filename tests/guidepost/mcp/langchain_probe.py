"""Drive a guidepost server through langchain-mcp-adapters, the agent ecosystem's client.

    uv run --isolated --no-project --with langchain-mcp-adapters==0.3.2 --with 'mcp<2' \\
        python tests/guidepost/mcp/langchain_probe.py http://127.0.0.1:PORT/mcp/

langchain-mcp-adapters 0.3.2 pins ``mcp<2``, so this runs in its own environment
(never imported by the test suite). It lists the tools through
``MultiServerMCPClient``, then calls guide_flows, guide_start and guide_answer
(one good call, one error) through the LangChain tools, and prints one JSON
object for the test to assert on. Any surprise exits non-zero.
"""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import version
from typing import Any

from langchain_mcp_adapters.client import MultiServerMCPClient

TOOLS = [
    "guide_answer",
    "guide_back",
    "guide_close",
    "guide_draft",
    "guide_flows",
    "guide_start",
    "guide_status",
]


class Surprise(Exception):
    pass


def text_of(message: Any) -> str:
    """The one text block of a ToolMessage's content."""
    blocks = message.content
    if isinstance(blocks, str):
        return blocks
    texts = [b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    if len(texts) != 1:
        raise Surprise(f"{message.name}: expected one text block, got {blocks!r}")
    return str(texts[0])


async def invoke(tools: dict[str, Any], name: str, args: dict[str, Any]) -> tuple[str, Any]:
    """Call a tool as an agent's tool call would; returns (status, parsed JSON)."""
    call = {"type": "tool_call", "id": f"call-{name}", "name": name, "args": args}
    message = await tools[name].ainvoke(call)
    payload = json.loads(text_of(message))
    if message.status == "success":
        structured = (message.artifact or {}).get("structured_content")
        if structured != payload:
            raise Surprise(f"{name}: structured content differs from the text: {structured!r}")
    return message.status, payload


async def probe(url: str) -> dict[str, Any]:
    client = MultiServerMCPClient({"guidepost": {"url": url, "transport": "streamable_http"}})
    tools = {tool.name: tool for tool in await client.get_tools()}
    if sorted(tools) != TOOLS:
        raise Surprise(f"tools: expected {TOOLS}, got {sorted(tools)}")
    report: dict[str, Any] = {
        "versions": {p: version(p) for p in ("mcp", "langchain-mcp-adapters")},
        "tools": sorted(tools),
        "answer_schema": tools["guide_answer"].args_schema,
    }

    status, flows = await invoke(tools, "guide_flows", {"category": "payments"})
    if status != "success":
        raise Surprise(f"guide_flows failed: {flows}")
    report["flows"] = [f["id"] for f in flows["flows"]]

    status, started = await invoke(tools, "guide_start", {"flow_id": "payment_failed"})
    if status != "success":
        raise Surprise(f"guide_start failed: {started}")
    report["start"] = {k: started[k] for k in ("status", "node", "flow")}
    run_id = started["run_id"]

    args = {"run_id": run_id, "choice": "E01", "at": "n_error_code"}
    status, answered = await invoke(tools, "guide_answer", args)
    if status != "success":
        raise Surprise(f"guide_answer failed: {answered}")
    report["answer"] = {"status": answered["status"], "node": answered["node"]["id"]}

    status, error = await invoke(tools, "guide_answer", {"run_id": run_id, "choice": 7})
    report["error"] = {"status": status, "payload": error}
    return report


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: langchain_probe.py MCP_URL", file=sys.stderr)
        return 2
    try:
        report = asyncio.run(probe(sys.argv[1]))
    except Surprise as exc:
        print(f"probe: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
