"""The threads a served process runs MCP calls on (ADR 0035, 0094): on SQLite a process's
calls reach the database one at a time, in the writer's lane; on PostgreSQL they run on
GUIDEPOST_TOOL_THREADS threads at once; and a draft waiting for its judging holds up no
other call on either. Each pass checks its own database's rule."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import anyio
import anyio.to_thread
import pytest
from django.conf import settings

from guidepost.mcp import server
from guidepost.mcp.resources import READ_RESOURCE
from guidepost.mcp.tools import Tool, registry
from tests.support.servers import uses_postgres

STEP_TOOLS = ("guide_start", "guide_answer", "guide_back", "guide_status", "guide_close")


@pytest.fixture(autouse=True)
def fresh_limiters(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # Each test runs its own event loop; the server builds its limiters in the first one.
    monkeypatch.setattr(server, "_limiter", None)
    monkeypatch.setattr(server, "_writer_lane", None)
    yield


def tool(name: str) -> Tool:
    found = registry.get(name)
    assert found is not None, name
    return found


def run_calls(calls: list[tuple[Tool | None, Callable[[], None]]]) -> None:
    """Run each call's function in a thread as the server runs a call of its tool."""

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for called, work in calls:
                group.start_soon(_in_thread, called, work)

    anyio.run(main)


async def _in_thread(called: Tool | None, work: Callable[[], None]) -> None:
    await anyio.to_thread.run_sync(work, limiter=server.call_limiter(called))


class Overlap:
    """How many of the calls given ``work`` were running at once, at most."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.inside = 0
        self.most = 0

    def work(self, hold: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            with self._lock:
                self.inside += 1
                self.most = max(self.most, self.inside)
            try:
                hold()
            finally:
                with self._lock:
                    self.inside -= 1

        return run


@pytest.mark.skipif(uses_postgres(), reason="SQLite's rule (the SQLite pass)")
def test_on_sqlite_a_processs_calls_reach_the_database_one_at_a_time() -> None:
    overlap = Overlap()
    held = threading.Event()  # never set: each call holds its thread for 20 ms
    called: list[Tool | None] = [*(tool(n) for n in STEP_TOOLS), READ_RESOURCE, None]
    run_calls([(t, overlap.work(lambda: held.wait(0.02))) for t in called * 2])
    assert overlap.most == 1


@pytest.mark.skipif(not uses_postgres(), reason="PostgreSQL's rule (the PostgreSQL pass)")
def test_on_postgresql_calls_run_on_the_pools_threads_at_once() -> None:
    assert settings.GUIDEPOST_TOOL_THREADS >= 2
    overlap = Overlap()
    together = threading.Barrier(2, timeout=10)  # passes only with two calls inside at once
    run_calls([(tool(n), overlap.work(together.wait)) for n in ("guide_answer", "guide_status")])
    assert overlap.most == 2


def test_a_draft_waiting_for_its_judging_holds_up_no_other_call() -> None:
    judged = threading.Event()
    answered = threading.Event()

    def draft() -> None:  # the judging ends only once the other call has been answered
        judged.wait(5)
        assert answered.is_set()

    def answer() -> None:
        answered.set()
        judged.set()

    run_calls([(tool("guide_draft"), draft), (tool("guide_answer"), answer)])
    assert answered.is_set()
