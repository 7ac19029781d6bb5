"""Two server processes sharing one PostgreSQL database continue each other's runs.

Every call of a walk goes to the other server than the call before, once with a
2026-07-28 ``mcp.Client`` and once with a 2025-11-25 ``ClientSession``: no session
errors, and the run's step log is complete, contiguous and verified.
(reliability.md, target 7.)
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from tests.runs_app.test_concurrency import assert_contiguous_and_verified, stored_steps
from tests.support.mcp_http import async_http_client
from tests.support.servers import Server, copy_flows, fresh_database, start_server, uses_postgres

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not uses_postgres(),
        reason="two server processes share one database only on PostgreSQL "
        "(set DATABASE_URL=postgres://...; the .ci/run PostgreSQL pass runs this)",
    ),
]

CallTool = Callable[[str, dict[str, Any]], Awaitable[CallToolResult]]

# payment_failed, walked through an unknown code, an unmatched answer, a back, a
# collect filled in two calls and a rejected slot value: 11 steps.
WALK: list[tuple[str, dict[str, Any], str, str | None]] = [
    # (tool, arguments besides run_id, expected status, node the run waits at afterwards)
    ("guide_answer", {"choice": "E07", "at": "n_error_code"}, "advanced", "n_symptom"),
    ("guide_answer", {"choice": "smoke", "at": "n_symptom"}, "unmatched", "n_symptom"),
    ("guide_answer", {"choice": "frozen", "at": "n_symptom"}, "advanced", "n_charged"),
    ("guide_answer", {"choice": "not_charged", "at": "n_charged"}, "advanced", "n_retry"),
    ("guide_back", {"to": "n_charged"}, "advanced", "n_charged"),
    ("guide_answer", {"choice": "charged", "at": "n_charged"}, "advanced", "n_identity"),
    ("guide_answer", {"values": {"phone": "0312345678"}, "at": "n_identity"}, "advanced",
     "n_identity"),
    ("guide_answer", {"values": {"order_id": "B12"}, "at": "n_identity"}, "unmatched",
     "n_identity"),
    ("guide_answer", {"values": {"order_id": "A00118"}, "at": "n_identity"}, "advanced",
     "n_verify"),
    ("guide_answer", {"choice": "match", "at": "n_verify"}, "completed", "n_ticket"),
]  # fmt: skip


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def two_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server, str]]:
    """Two servers on different ports, one database; started one after the other (each
    migrates at start: the first finds it empty)."""
    tmp_path = tmp_path_factory.mktemp("two_servers")
    with fresh_database(tmp_path, empty=True) as database_url:
        servers: list[Server] = []
        try:
            for name in ("a", "b"):
                servers.append(
                    start_server(
                        database_url=database_url,
                        flows_dir=copy_flows(tmp_path / f"flows_{name}"),
                        log=tmp_path / f"server_{name}.log",
                    )
                )
            yield servers[0], servers[1], database_url
        finally:
            for server in servers:
                server.stop()


@asynccontextmanager
async def modern_clients(urls: list[str]) -> AsyncIterator[list[CallTool]]:
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Client(url)) for url in urls]
        assert {c.protocol_version for c in clients} == {"2026-07-28"}
        yield [c.call_tool for c in clients]


@asynccontextmanager
async def legacy_sessions(urls: list[str]) -> AsyncIterator[list[CallTool]]:
    async with AsyncExitStack() as stack:
        sessions = []
        for url in urls:
            http = await stack.enter_async_context(async_http_client())
            read, write = await stack.enter_async_context(
                streamable_http_client(url, http_client=http)
            )
            session = await stack.enter_async_context(ClientSession(read, write))
            initialized = await session.initialize()
            assert initialized.protocol_version == "2025-11-25"
            sessions.append(session)
        yield [s.call_tool for s in sessions]


@asynccontextmanager
async def modern_then_legacy(urls: list[str]) -> AsyncIterator[list[CallTool]]:
    """A 2026-07-28 client on the first server, a 2025-11-25 session on the second."""
    async with modern_clients(urls[:1]) as modern, legacy_sessions(urls[1:]) as legacy:
        yield [*modern, *legacy]


def payload(result: CallToolResult, tool: str) -> dict[str, Any]:
    text = getattr(result.content[0], "text", "")
    assert not result.is_error, f"{tool} failed: {text}"
    data: dict[str, Any] = json.loads(text)
    assert result.structured_content == data
    return data


async def walk_alternating(callers: list[CallTool]) -> str:
    """Start a run on one server and send every further call to the other one in turn."""
    turn = 0

    async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        nonlocal turn
        caller = callers[turn % len(callers)]
        turn += 1
        return payload(await caller(tool, arguments), tool)

    started = await call("guide_start", {"flow_id": "payment_failed", "ref": "two-servers"})
    assert started["node"]["id"] == "n_error_code"
    run_id = started["run_id"]
    for tool, arguments, status, node in WALK:
        result = await call(tool, {"run_id": run_id, **arguments})
        assert (result["status"], result["node"]["id"]) == (status, node), result
    assert result["outcome"] == "escalated"

    # Both servers see the same finished run.
    for _ in callers:
        status_now = await call("guide_status", {"run_id": run_id})
        assert (status_now["state"], status_now["outcome"]) == ("completed", "escalated")
        assert status_now["values"] == {
            "n_error_code": "E07",
            "n_symptom": "frozen",
            "n_charged": "charged",
            "phone": "0312345678",
            "order_id": "A00118",
            "n_verify": "match",
        }
    return str(run_id)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "connect",
    [modern_clients, legacy_sessions, modern_then_legacy],
    ids=["2026-07-28", "2025-11-25", "both-eras"],
)
async def test_two_servers_on_one_database_continue_each_others_runs(
    two_servers: tuple[Server, Server, str],
    connect: Callable[[list[str]], Any],
) -> None:
    first, second, database_url = two_servers

    async with connect([first.url, second.url]) as callers:
        run_id = await walk_alternating(callers)

    report = await anyio.to_thread.run_sync(stored_steps, database_url, [run_id])
    assert_contiguous_and_verified(report)
    stored = report[run_id]
    assert stored["seqs"] == list(range(1, len(WALK) + 2))
    assert [tool for tool, _, _ in stored["steps"]] == ["guide_start"] + [t for t, *_ in WALK]
    for server in (first, second):
        assert "Traceback" not in server.output()
