"""Live reload of the flows directory, against a real server on a copy of the flows.

An edited flow reaches new runs without a restart, while runs under way finish on the
version they started with; a file that no longer lints keeps its own last good
version live while every other file reloads, and the log says why once; every
worker process picks the change up.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from mcp import Client

from tests.support.servers import Server, fresh_database, start_server

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

REFUND = "refund_request"
ORDER = {"order_number": "A00118"}
# Polling is bounded: at most POLL_ROUNDS rounds, POLL_PAUSE seconds apart.
POLL_ROUNDS = 100
POLL_PAUSE = 0.1

OLD_REASON_SAY = "Ask why they want a refund for this order"
NEW_REASON_SAY = "Ask what went wrong with the order (edited)"
OLD_PHOTO_TELL = "Explain that they should reply to the order confirmation email"
NEW_PHOTO_TELL = "Explain that they should upload the photo under Orders in their account"
EDIT = {
    'version: "2024.3"': 'version: "2024.4"',
    f"say: {OLD_REASON_SAY}": f"say: {NEW_REASON_SAY}",
    OLD_PHOTO_TELL: NEW_PHOTO_TELL,
    # A new label: on the old version this answer goes the __other__ way.
    "      not_arrived: The parcel has not reached them\n": (
        "      not_arrived: The parcel has not reached them\n"
        "      price_dropped: The price went down after they ordered\n"
    ),
    "      not_arrived: n_tracking\n": (
        "      not_arrived: n_tracking\n      price_dropped: n_refund_method\n"
    ),
}
BROKEN_FLOW = """\
id: broken_flow
title: A flow whose tell points nowhere
category: payments
entry: n_start
nodes:
  - id: n_start
    kind: tell
    say: Say hello
    next: n_missing
  - id: n_end
    kind: end
    outcome: resolved
    say: Close
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def live(request: pytest.FixtureRequest, tmp_path: Path, flows_copy: Path) -> Iterator[Server]:
    """A real server on ``flows_copy``; ``workers`` by indirect parametrization (default 1)."""
    workers = getattr(request, "param", 1)
    with fresh_database(tmp_path) as database_url:
        server = start_server(
            database_url=database_url,
            flows_dir=flows_copy,
            log=tmp_path / "server.log",
            workers=workers,
        )
        try:
            yield server
        finally:
            server.stop()


def rewrite(path: Path, replacements: dict[str, str]) -> str:
    """Apply ``replacements`` to a flow file in one atomic rename; returns the old text."""
    old = path.read_text(encoding="utf-8")
    text = old
    for before, after in replacements.items():
        assert before in text, f"{before!r} not in {path.name}"
        text = text.replace(before, after)
    write(path, text)
    return old


def write(path: Path, text: str) -> None:
    # The catalog only looks at *.yaml, so the half-written temporary file is never read.
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    text = getattr(result.content[0], "text", "")
    assert not result.is_error, f"{tool} {arguments} failed: {text}"
    data: dict[str, Any] = json.loads(text)
    return data


async def payment_versions(client: Client) -> dict[str, Any]:
    listed = await call(client, "guide_flows", {"category": "payments"})
    return {flow["id"]: flow["version"] for flow in listed["flows"]}


async def eventually(probe: Callable[[], Awaitable[bool]]) -> bool:
    """Whether ``probe`` comes true within the polling bound."""
    for _ in range(POLL_ROUNDS):
        if await probe():
            return True
        await anyio.sleep(POLL_PAUSE)
    return False


async def test_an_edited_flow_reaches_new_runs_while_runs_under_way_keep_their_version(
    live: Server, flows_copy: Path
) -> None:
    async with Client(live.url) as client:
        walked = await call(client, "guide_start", {"flow_id": REFUND, "values": ORDER})
        other = await call(client, "guide_start", {"flow_id": REFUND, "values": ORDER})
        assert walked["node"]["say"] == OLD_REASON_SAY

        rewrite(flows_copy / f"{REFUND}.yaml", EDIT)

        async def edited() -> bool:
            return (await payment_versions(client))[REFUND] == "2024.4"

        assert await eventually(edited), live.output()
        new = await call(client, "guide_start", {"flow_id": REFUND, "values": ORDER})
        assert new["flow"]["version"] == "2024.4"
        assert new["node"]["say"] == NEW_REASON_SAY
        assert "price_dropped" in new["node"]["accepts"]
        assert "price_dropped" in new["index"]["n_reason"]

        # The run under way still shows, and walks, the version it started on.
        status = await call(client, "guide_status", {"run_id": walked["run_id"]})
        assert status["flow"]["version"] == "2024.3"
        assert status["node"]["say"] == OLD_REASON_SAY
        assert "price_dropped" not in status["node"]["accepts"]
        run_id = walked["run_id"]
        await call(
            client, "guide_answer", {"run_id": run_id, "choice": "damaged", "at": "n_reason"}
        )
        told = await call(
            client, "guide_answer", {"run_id": run_id, "choice": "yes", "at": "n_photos"}
        )
        assert told["tell"][0]["say"].startswith(OLD_PHOTO_TELL)
        done = await call(
            client,
            "guide_answer",
            {
                "run_id": run_id,
                "choice": "original",
                "values": {"refund_amount": "50"},
                "at": "n_refund_method",
            },
        )
        assert (done["status"], done["outcome"]) == ("completed", "refunded")
        status = await call(client, "guide_status", {"run_id": run_id})
        assert (status["state"], status["flow"]["version"]) == ("completed", "2024.3")

        # The same new label takes each run down its own version's path.
        on_old = await call(
            client,
            "guide_answer",
            {"run_id": other["run_id"], "choice": "price_dropped", "at": "n_reason"},
        )
        assert (on_old["status"], on_old["outcome"]) == ("completed", "escalated")
        on_new = await call(
            client,
            "guide_answer",
            {"run_id": new["run_id"], "choice": "price_dropped", "at": "n_reason"},
        )
        assert (on_new["status"], on_new["node"]["id"]) == ("advanced", "n_refund_method")

        # And the new version's texts reach the agent along the way.
        newer = await call(client, "guide_start", {"flow_id": REFUND, "values": ORDER})
        await call(
            client,
            "guide_answer",
            {"run_id": newer["run_id"], "choice": "damaged", "at": "n_reason"},
        )
        told = await call(
            client, "guide_answer", {"run_id": newer["run_id"], "choice": "yes", "at": "n_photos"}
        )
        assert told["tell"][0]["say"].startswith(NEW_PHOTO_TELL)


def break_new_file(flows: Path) -> Callable[[], None]:
    path = flows / "broken_flow.yaml"
    write(path, BROKEN_FLOW)
    return path.unlink


def break_existing_file(flows: Path) -> Callable[[], None]:
    path = flows / f"{REFUND}.yaml"
    old = rewrite(
        path,
        {
            'version: "2024.3"': 'version: "2024.9"',
            "      not_arrived: n_tracking\n": "      not_arrived: n_tracking_typo\n",
        },
    )
    return lambda: write(path, old)


# What the log must say for each way of breaking a file, written out: the file, what
# happens to it, and its first error with file:line ("{file}" is the broken file). The
# one more error is the node the broken target no longer reaches (lint reports
# everything at once).
BROKEN_NEW_FILE_LOG = (
    "ERROR flows_app.catalog: {file} has lint errors; it is not served: "
    "error bad_target broken_flow/n_start/next: next 'n_missing' names no node: "
    "point it at an existing node id ({file}:9) (and 1 more error)"
)
BROKEN_EXISTING_FILE_LOG = (
    "ERROR flows_app.catalog: {file} has lint errors; its last good version stays live: "
    "error bad_target refund_request/n_reason/not_arrived: "
    "next 'not_arrived' goes to 'n_tracking_typo', which names no node "
    "(did you mean 'n_tracking_help'?): point it at an existing node id ({file}:36) "
    "(and 1 more error)"
)


@pytest.mark.parametrize(
    ("breaking", "broken_file", "logged"),
    [
        (break_new_file, "broken_flow.yaml", BROKEN_NEW_FILE_LOG),
        (break_existing_file, f"{REFUND}.yaml", BROKEN_EXISTING_FILE_LOG),
    ],
    ids=["new-file", "existing-file"],
)
async def test_a_file_that_no_longer_lints_keeps_the_last_good_flows_live_and_logs_why(
    live: Server,
    flows_copy: Path,
    breaking: Callable[[Path], Callable[[], None]],
    broken_file: str,
    logged: str,
) -> None:
    expected = logged.format(file=flows_copy.resolve() / broken_file)
    async with Client(live.url) as client:
        categories = await call(client, "guide_flows", {})
        versions = await payment_versions(client)

        repair = breaking(flows_copy)

        def why() -> list[str]:
            return [line for line in live.output().splitlines() if "has lint errors" in line]

        async def refused() -> bool:
            await call(client, "guide_flows", {})  # any call makes the server look
            return bool(why())

        assert await eventually(refused), live.output()
        [line] = why()  # logged once, not on every call
        # Then the id of the call that made the server look.
        assert line.rsplit(" request=", 1)[0].endswith(expected), line

        assert await call(client, "guide_flows", {}) == categories
        assert await payment_versions(client) == versions
        started = await call(client, "guide_start", {"flow_id": REFUND, "values": ORDER})
        assert started["flow"]["version"] == "2024.3"
        await call(
            client,
            "guide_answer",
            {"run_id": started["run_id"], "choice": "wrong_item", "at": "n_reason"},
        )
        done = await call(
            client,
            "guide_answer",
            {"run_id": started["run_id"], "choice": "credit", "at": "n_refund_method"},
        )
        assert (done["status"], done["outcome"]) == ("completed", "credited")

        # Once the directory lints again, the next change is served.
        repair()
        rewrite(flows_copy / f"{REFUND}.yaml", {'version: "2024.3"': 'version: "2024.6"'})

        async def recovered() -> bool:
            return (await payment_versions(client))[REFUND] == "2024.6"

        assert await eventually(recovered), live.output()
        assert "broken_flow" not in await payment_versions(client)


async def test_one_broken_file_keeps_its_last_good_version_while_every_other_file_reloads(
    live: Server, flows_copy: Path
) -> None:
    async with Client(live.url) as client:
        assert (await payment_versions(client)) == {"payment_failed": "3", REFUND: "2024.3"}
        refund = flows_copy / f"{REFUND}.yaml"
        rewrite(refund, {"      not_arrived: n_tracking\n": "      not_arrived: n_tracking_typo\n"})
        rewrite(flows_copy / "payment_failed.yaml", {"version: 3": "version: 4"})
        (flows_copy / "vpn_cannot_connect.yaml").unlink()

        async def others_reloaded() -> bool:
            return (await payment_versions(client))["payment_failed"] == "4"

        assert await eventually(others_reloaded), live.output()
        assert (await payment_versions(client))[REFUND] == "2024.3"
        it = await call(client, "guide_flows", {"category": "it"})
        assert it["flows"] == []  # the deleted file's flow left
        started = await call(client, "guide_start", {"flow_id": REFUND, "values": ORDER})
        assert started["flow"]["version"] == "2024.3"

        # Another change elsewhere reloads again, without logging the broken file twice.
        rewrite(flows_copy / "payment_failed.yaml", {"version: 4": "version: 5"})

        async def reloaded_again() -> bool:
            return (await payment_versions(client))["payment_failed"] == "5"

        assert await eventually(reloaded_again), live.output()
    logged = [line for line in live.output().splitlines() if str(refund) in line]
    assert len(logged) == 1, logged
    assert "last good version stays live" in logged[0]
    assert f"({refund}:" in logged[0]  # the finding carries file:line


def reloads(server: Server) -> int:
    return server.output().count("flows reloaded from")


def worker_pids(server: Server) -> list[int]:
    """The uvicorn worker processes under the server's supervisor (Linux /proc)."""
    pid = server.process.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [
        int(child)
        for child in children
        if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()
    ]


def connections_per_worker(server: Server) -> dict[int, int]:
    """How many open connections to the server's port each worker process holds."""
    port = urlsplit(server.base).port
    established: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
                established.add(f"socket:[{inode}]")
    held: dict[int, int] = {}
    for pid in worker_pids(server):
        held[pid] = 0
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                held[pid] += os.readlink(fd) in established
            except OSError:  # closed while we looked
                continue
    return held


async def versions_seen_by_both_workers(server: Server, clients: int) -> set[str] | None:
    """refund_request's listed version as ``clients`` fresh connections see it, or None
    unless those connections were answered by two different worker processes."""
    async with AsyncExitStack() as stack:
        connected = [await stack.enter_async_context(Client(server.url)) for _ in range(clients)]
        listed = await asyncio.gather(*(payment_versions(c) for c in connected))
        held = await anyio.to_thread.run_sync(connections_per_worker, server)
    if len(held) != 2 or not all(held.values()):
        return None
    return {str(versions[REFUND]) for versions in listed}


@pytest.mark.parametrize("live", [2], indirect=True)
async def test_every_worker_process_serves_the_edited_flow(live: Server, flows_copy: Path) -> None:
    # Both workers are up and have loaded the flows before the edit.
    async def both_serve_the_original() -> bool:
        return await versions_seen_by_both_workers(live, 8) == {"2024.3"}

    assert await eventually(both_serve_the_original), live.output()

    rewrite(flows_copy / f"{REFUND}.yaml", {'version: "2024.3"': 'version: "2024.4"'})

    async def both_serve_the_edit() -> bool:
        return await versions_seen_by_both_workers(live, 8) == {"2024.4"}

    assert await eventually(both_serve_the_edit), live.output()
    assert reloads(live) == 2, live.output()  # one reload per worker
