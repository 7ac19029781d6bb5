"""The links webhooks carry name the address people reach the server at: with
``serve --port`` and no GUIDEPOST_PUBLIC_URL, the port serve listens on, in every body, in
every Slack line and in ``webhook test``'s message sent from another process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.mcp_http import ok
from tests.support.receiver import Receiver, receiving
from tests.support.servers import (
    copy_flows,
    fresh_database,
    guidepost_command,
    start_server,
)

pytestmark = pytest.mark.slow

PRIVATE = {"GUIDEPOST_WEBHOOK_ALLOW_PRIVATE": "1"}
STALLS = {"order_number": "A00118", "n_reason": "__unknown__"}


def subscribe(database_url: str, receiver: Receiver, *args: str) -> str:
    added = guidepost_command(database_url, "webhook", "add", receiver.url, *args, env=PRIVATE)
    assert added.returncode == 0, added.stderr
    return added.stdout.split(":")[0].removeprefix("subscription ")


def test_links_name_the_port_serve_listens_on(tmp_path: Path) -> None:
    flows = copy_flows(tmp_path / "flows")
    with fresh_database(tmp_path) as database_url, receiving() as receiver:
        standard = subscribe(database_url, receiver, "--events", "run.stalled")
        subscribe(database_url, receiver, "--events", "run.stalled", "--format", "slack")
        server = start_server(
            database_url=database_url,
            flows_dir=flows,
            log=tmp_path / "server.log",
            env={**PRIVATE, "GUIDEPOST_WEBHOOK_POLL": "0.1"},
        )
        try:
            assert not server.base.endswith(":8127")
            started = ok(
                server.base, "guide_start", {"flow_id": "refund_request", "values": STALLS}
            )
            tested = guidepost_command(database_url, "webhook", "test", standard)
            assert tested.returncode == 0, tested.stderr
            got = receiver.wait_for(3)
        finally:
            server.stop()
    bodies = {(r.json.get("type") or "slack"): r.json for r in got}
    run_page = f"{server.base}/r/{started['run_id']}"
    assert bodies["run.stalled"]["data"]["url"] == run_page
    assert bodies["slack"]["text"].endswith(" " + run_page)
    assert bodies["webhook.test"]["data"]["url"] == server.base + "/"
