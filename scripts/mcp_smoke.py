"""Smoke-test a running guidepost server over the real MCP protocol.

    python scripts/mcp_smoke.py [--url http://127.0.0.1:8127/mcp/] [--parallel] [--key KEY]

Lists the tools, lists the flows, then walks ``payment_failed`` to its end with
``mcp.Client`` (E01, an expired card, the retry fails, the order is collected
and verified), checking the status and the keys of every result, and reads
``guide_status`` at the end. With ``--parallel`` a second run (E02, balance too
low, the retry succeeds) is walked at the same time, one call each in turn, and
neither run may see the other's answers. ``--key`` (default: the GUIDEPOST_KEY
variable) is sent as ``Authorization: Bearer`` with every request, for a server
that needs agent keys.

Exits 0 when everything matched, 1 on any surprise, 2 when the server cannot be
reached.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

DEFAULT_URL = "http://127.0.0.1:8127/mcp/"
TOOLS = {
    "guide_flows",
    "guide_start",
    "guide_answer",
    "guide_status",
    "guide_back",
    "guide_close",
    "guide_draft",
}
STEP_KEYS = {"run_id", "status", "next", "node", "tell", "skipped", "ignored"}
STATUS_KEYS = {
    "advanced": set(),
    "completed": {"outcome"},
    "unmatched": {"attempt", "max_unmatched", "rejected"},
    "branched": {"branches", "common"},
    "stalled": {"reason", "handoff"},
}


class Surprise(Exception):
    """The server answered something the walk did not expect."""


@dataclass(frozen=True)
class Move:
    """One guide_answer and what it must lead to."""

    args: dict[str, Any]
    status: str
    node: str
    tell: tuple[str, ...] = ()
    outcome: str | None = None


@dataclass
class Walk:
    name: str
    moves: list[Move]
    path: list[str]
    values: dict[str, str]
    outcome: str
    run_id: str = ""
    node: str = ""
    done: int = field(default=0)


def card_walk() -> Walk:
    """E01, expired card, the retry fails, the order is collected and verified."""
    return Walk(
        name="A",
        moves=[
            Move({"choice": "E01"}, "advanced", "n_card_age"),
            Move({"choice": "expired"}, "advanced", "n_retry", tell=("n_update_card",)),
            Move({"choice": "failed"}, "advanced", "n_identity"),
            Move({"values": {"order_id": "A00118"}}, "advanced", "n_verify"),
            Move({"choice": "match"}, "completed", "n_ticket", outcome="escalated"),
        ],
        path=["n_error_code", "n_card_age", "n_update_card", "n_retry", "n_identity", "n_verify"],
        values={
            "n_error_code": "E01",
            "n_card_age": "expired",
            "n_retry": "failed",
            "order_id": "A00118",
            "n_verify": "match",
        },
        outcome="escalated",
    )


def balance_walk() -> Walk:
    """E02, the balance is short, the retry succeeds."""
    return Walk(
        name="B",
        moves=[
            Move({"choice": "E02"}, "advanced", "n_balance"),
            Move({"choice": "short"}, "advanced", "n_retry", tell=("n_topup",)),
            Move({"choice": "success"}, "completed", "n_resolved", outcome="resolved"),
        ],
        path=["n_error_code", "n_balance", "n_topup", "n_retry"],
        values={"n_error_code": "E02", "n_balance": "short", "n_retry": "success"},
        outcome="resolved",
    )


def say(message: str) -> None:
    print(message, flush=True)


def payload_of(tool: str, result: CallToolResult) -> dict[str, Any]:
    """The result's JSON object; checks it is one compact text block equal to the structure."""
    texts = [getattr(block, "text", None) for block in result.content]
    if len(texts) != 1 or not isinstance(texts[0], str):
        raise Surprise(f"{tool}: expected one text block, got {result.content!r}")
    try:
        payload = json.loads(texts[0])
    except json.JSONDecodeError as exc:
        raise Surprise(f"{tool}: the text block is not JSON: {exc}") from None
    if result.is_error:
        raise Surprise(f"{tool} failed: {texts[0]}")
    if not isinstance(payload, dict):
        raise Surprise(f"{tool}: expected a JSON object, got {texts[0][:200]}")
    if texts[0] != json.dumps(payload, ensure_ascii=False, separators=(",", ":")):
        raise Surprise(f"{tool}: the text block is not compact UTF-8 JSON")
    if result.structured_content != payload:
        raise Surprise(f"{tool}: structured content differs from the text block")
    return payload


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return payload_of(tool, await client.call_tool(tool, args))


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise Surprise(message)


def check_step(label: str, result: dict[str, Any], status: str, extra: set[str]) -> None:
    expect(
        result.get("status") == status,
        f"{label}: status {result.get('status')!r}, expected {status!r}: {result}",
    )
    required = STATUS_KEYS[status] | {"run_id", "status", "next", "node"}
    missing = required - result.keys()
    foreign = result.keys() - STEP_KEYS - STATUS_KEYS[status] - extra
    expect(not missing, f"{label}: keys missing: {sorted(missing)}")
    expect(not foreign, f"{label}: unexpected keys: {sorted(foreign)}")
    expect(isinstance(result["next"], str) and bool(result["next"]), f"{label}: empty next")


async def check_catalog(client: Client) -> None:
    tools = {tool.name for tool in (await client.list_tools()).tools}
    expect(tools == TOOLS, f"tools/list: expected {sorted(TOOLS)}, got {sorted(tools)}")
    say(f"tools/list: {len(tools)} tools")
    overview = await call(client, "guide_flows", {})
    categories = {c.get("id"): c.get("count") for c in overview.get("categories", [])}
    expect(categories.get("payments", 0) >= 1, f"guide_flows: no payments flows: {overview}")
    payments = await call(client, "guide_flows", {"category": "payments"})
    flow_ids = {f.get("id") for f in payments.get("flows", [])}
    expect("payment_failed" in flow_ids, f"guide_flows: payment_failed not listed: {payments}")
    say(f"guide_flows: {len(categories)} categories; payments has {sorted(flow_ids)}")


async def begin(client: Client, walk: Walk) -> None:
    label = f"[{walk.name}] guide_start"
    result = await call(
        client, "guide_start", {"flow_id": "payment_failed", "ref": f"smoke-{walk.name}"}
    )
    check_step(label, result, "advanced", {"flow", "index"})
    expect(result["flow"].get("id") == "payment_failed", f"{label}: flow {result['flow']}")
    expect(result["node"].get("id") == "n_error_code", f"{label}: node {result['node']}")
    expect("n_error_code" in result["index"], f"{label}: index lacks n_error_code")
    walk.run_id, walk.node = result["run_id"], "n_error_code"
    say(f"{label} -> {walk.run_id} waits at n_error_code")


async def advance(client: Client, walk: Walk) -> None:
    move = walk.moves[walk.done]
    label = f"[{walk.name}] guide_answer {json.dumps(move.args, ensure_ascii=False)}"
    args = {"run_id": walk.run_id, "at": walk.node, **move.args}
    result = await call(client, "guide_answer", args)
    check_step(label, result, move.status, set())
    expect(result["run_id"] == walk.run_id, f"{label}: run_id {result['run_id']}")
    expect(
        result["node"].get("id") == move.node,
        f"{label}: node {result['node'].get('id')!r}, expected {move.node!r}",
    )
    tells = tuple(t.get("id") for t in result.get("tell", []))
    expect(tells == move.tell, f"{label}: tell {tells}, expected {move.tell}")
    if move.outcome is not None:
        expect(
            result.get("outcome") == move.outcome,
            f"{label}: outcome {result.get('outcome')!r}, expected {move.outcome!r}",
        )
    walk.node = move.node
    walk.done += 1
    shown = f" (outcome {move.outcome})" if move.outcome else ""
    say(f"{label} -> {move.status} at {move.node}{shown}")


async def finish(client: Client, walk: Walk) -> None:
    label = f"[{walk.name}] guide_status"
    status = await call(client, "guide_status", {"run_id": walk.run_id})
    required = {
        "run_id",
        "flow",
        "state",
        "node",
        "path",
        "values",
        "started_at",
        "updated_at",
        "next",
        "outcome",
        "ref",
    }
    missing = required - status.keys()
    expect(not missing, f"{label}: keys missing: {sorted(missing)}")
    expect(status["state"] == "completed", f"{label}: state {status['state']!r}")
    expect(status["outcome"] == walk.outcome, f"{label}: outcome {status['outcome']!r}")
    expect(status["ref"] == f"smoke-{walk.name}", f"{label}: ref {status['ref']!r}")
    path = [entry.get("id") for entry in status["path"]]
    expect(path == walk.path, f"{label}: path {path}, expected {walk.path}")
    expect(
        status["values"] == walk.values,
        f"{label}: values {status['values']}, expected {walk.values}",
    )
    say(f"{label} -> completed, outcome {walk.outcome}, {len(path)} nodes on the path")


async def connect(stack: AsyncExitStack, url: str, key: str) -> Client:
    """A client of ``url``, sending ``key`` (if any) with every request."""
    if not key:
        return await stack.enter_async_context(Client(url))
    http = await stack.enter_async_context(
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30)
    )
    return await stack.enter_async_context(Client(streamable_http_client(url, http_client=http)))


def key_refused(url: str, key: str) -> str:
    """Why the server refuses this key (or the lack of one), from one plain request; ""
    when it does not. (The MCP client reports a 401 only as "an error response".)"""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
        **({"Authorization": f"Bearer {key}"} if key else {}),
    }
    answer = httpx2.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers=headers,
        timeout=30,
        follow_redirects=True,
    )
    if answer.status_code != 401:
        return ""
    error = answer.json().get("error", "401")
    hint = "" if key else "; pass --key or set GUIDEPOST_KEY (guidepost-mcp createkey NAME)"
    return f"{error}{hint}"


async def smoke(url: str, parallel: bool, key: str = "") -> None:
    walks = [card_walk(), balance_walk()] if parallel else [card_walk()]
    async with AsyncExitStack() as stack:
        # One client per run, as two agents would have.
        clients = [await connect(stack, url, key) for _ in walks]
        await check_catalog(clients[0])
        for client, walk in zip(clients, walks, strict=True):
            await begin(client, walk)
        # One call per run in turn, so the runs' calls interleave.
        while any(walk.done < len(walk.moves) for walk in walks):
            for client, walk in zip(clients, walks, strict=True):
                if walk.done < len(walk.moves):
                    await advance(client, walk)
        for client, walk in zip(clients, walks, strict=True):
            await finish(client, walk)


def unreachable(exc: BaseException) -> httpx2.TransportError | None:
    """The connection failure inside ``exc`` (task groups wrap it), if that is what it is."""
    if isinstance(exc, httpx2.TransportError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = unreachable(inner)
            if found is not None:
                return found
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL, help=f"MCP endpoint (default {DEFAULT_URL})")
    parser.add_argument("--parallel", action="store_true", help="walk two runs interleaved")
    parser.add_argument(
        "--key",
        default=os.environ.get("GUIDEPOST_KEY", ""),
        help="agent key to send (default: $GUIDEPOST_KEY)",
    )
    args = parser.parse_args(argv)
    try:
        refused = key_refused(args.url, args.key)
        if refused:
            print(f"smoke: {args.url} refused the key: {refused}", file=sys.stderr)
            return 1
        anyio.run(smoke, args.url, args.parallel, args.key)
    except Surprise as exc:
        print(f"smoke: FAILED: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # connection failures arrive wrapped in task-group exceptions
        cause = unreachable(exc)
        if cause is not None:
            print(
                f"smoke: cannot reach {args.url}: {str(cause) or type(cause).__name__}. "
                "Is the server running (guidepost-mcp serve)?",
                file=sys.stderr,
            )
            return 2
        print(f"smoke: FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    say("smoke: OK" + (" (two interleaved runs)" if args.parallel else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
