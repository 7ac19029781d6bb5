"""An approved draft reaches every worker of a running server within its poll interval,
no restart.

The whole path is real: an agent submits the draft over MCP, a person approves it
with ``guidepost-mcp approve`` (another process, same database and flows directory),
and a ``serve --workers 2`` with the default poll interval serves the new version
from both workers while a run started before finishes on the old one.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.flows_app.test_flow_reload import call, payment_versions, versions_seen_by_both_workers
from tests.support import forks
from tests.support.drafting import REFUND, REFUND_CHANGE
from tests.support.servers import Server, fresh_database, start_server

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

ORDER = {"order_number": "A00118"}
# The server's poll interval of the flows directory (the default), in seconds.
POLL_SECONDS = 0.5
# Probing is bounded: at most this many rounds of PROBE_PAUSE seconds.
PROBE_ROUNDS = 200
PROBE_PAUSE = 0.02


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def database_url(tmp_path: Path) -> Iterator[str]:
    with fresh_database(tmp_path) as url:
        yield url


@pytest.fixture
def two_workers(tmp_path: Path, flows_copy: Path, database_url: str) -> Iterator[Server]:
    server = start_server(
        database_url=database_url,
        flows_dir=flows_copy,
        log=tmp_path / "server.log",
        workers=2,
        # The default poll interval, not the tests' faster one.
        env={"GUIDEPOST_FLOWS_POLL_MS": str(int(POLL_SECONDS * 1000))},
    )
    try:
        yield server
    finally:
        server.stop()


def approve(database_url: str, flows: Path, ref: str) -> subprocess.CompletedProcess[str]:
    return forks.run(
        ["-m", "guidepost.cli", "approve", ref, "--flows", str(flows)]
        # The change fails a scenario of the live tests (tests/refund_request.yaml).
        + ["--as", "maria", "--break-tests"],
        env={**os.environ, "DATABASE_URL": database_url},
    )


async def test_an_approved_draft_is_served_by_every_worker_once_a_poll_interval_has_passed(
    two_workers: Server, flows_copy: Path, database_url: str
) -> None:
    for _ in range(PROBE_ROUNDS):
        if await versions_seen_by_both_workers(two_workers, 8) == {"2024.3"}:
            break
    else:
        pytest.fail("both workers never served the original flow\n" + two_workers.output())

    async with Client(two_workers.url) as client:
        before = await call(client, "guide_start", {"flow_id": REFUND, "values": ORDER})
        drafted = await call(client, "guide_draft", {"yaml": REFUND_CHANGE})
        assert drafted["ok"] is True
        assert (await payment_versions(client))[REFUND] == "2024.3"  # a draft is not live

        approved = await anyio.to_thread.run_sync(
            approve, database_url, flows_copy, drafted["draft_id"]
        )
        assert approved.returncode == 0, approved.stderr
        assert approved.stdout.startswith(f"approved {drafted['draft_id']}: {REFUND} is live")
        # A worker looks at the flows directory on the first request after each poll
        # interval: once one interval has passed since the approval, no worker may serve
        # the old version (a promise of at most two intervals, 1 s by default, however
        # slow the machine; no clock is compared with a bound).
        await anyio.sleep(POLL_SECONDS)
        for _ in range(PROBE_ROUNDS):
            seen = await versions_seen_by_both_workers(two_workers, 8)
            if seen is not None:
                break
            await anyio.sleep(PROBE_PAUSE)
        else:
            pytest.fail("no probe reached both workers\n" + two_workers.output())
        assert seen == {"2024.4"}, two_workers.output()

        new = await call(client, "guide_start", {"flow_id": REFUND, "values": ORDER})
        assert new["flow"]["version"] == "2024.4"
        assert "price_dropped" in new["node"]["accepts"]
        # The run started before keeps its version: the new label is not one of its labels.
        run_id = before["run_id"]
        old = await call(client, "guide_answer", {"run_id": run_id, "choice": "price_dropped"})
        assert (old["status"], old["outcome"]) == ("completed", "escalated")
        status = await call(client, "guide_status", {"run_id": run_id})
        assert (status["state"], status["flow"]["version"]) == ("completed", "2024.3")
        on_new = await call(
            client, "guide_answer", {"run_id": new["run_id"], "choice": "price_dropped"}
        )
        assert (on_new["status"], on_new["outcome"]) == ("completed", "price_matched")
