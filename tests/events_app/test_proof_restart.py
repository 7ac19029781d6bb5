"""Proof (issue 22, point 5): an event committed with its step is delivered even when the
server is killed (SIGKILL) before it was delivered: the outbox row, or the claimed
delivery, waits in the database, and the restarted server's worker delivers it. Real
server, real MCP call, real receiver verifying the signature; the webhook is added with
``guidepost-mcp webhook add``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runs_app.test_proof_crash import kill
from tests.support.mcp_http import ok
from tests.support.paths import REPO
from tests.support.receiver import Receiver, receiving
from tests.support.servers import (
    Server,
    copy_flows,
    django_eval,
    free_port,
    fresh_database,
    guidepost_command,
    start_server,
)

pytestmark = pytest.mark.slow

PRIVATE = {"GUIDEPOST_WEBHOOK_ALLOW_PRIVATE": "1"}
STALLS = {"order_number": "A00118", "n_reason": "__unknown__"}
DELIVERED = """
from events_app.models import Delivery
result = list(Delivery.objects.values_list("state", "attempts"))
"""


def subscribe(database_url: str, receiver: Receiver) -> None:
    # webhook and worker migrate the database first, as createkey does.
    added = guidepost_command(
        database_url, "webhook", "add", receiver.url, "--events", "run.stalled", env=PRIVATE
    )
    assert added.returncode == 0, added.stderr
    receiver.secret = added.stdout.strip().splitlines()[-1]
    assert receiver.secret.startswith("whsec_")


def serve(database_url: str, flows: Path, log: Path, port: int, **env: str) -> Server:
    return start_server(
        database_url=database_url,
        flows_dir=flows,
        log=log,
        port=port,
        env={**PRIVATE, "GUIDEPOST_WEBHOOK_LEASE": "1", **env},
    )


def test_an_event_committed_before_the_worker_saw_it_is_delivered_after_a_restart(
    tmp_path: Path,
) -> None:
    flows, port = copy_flows(tmp_path / "flows"), free_port()
    with fresh_database(tmp_path) as database_url, receiving() as receiver:
        subscribe(database_url, receiver)
        # The worker looks once at start-up, then not for a minute: the step commits and
        # the server dies before any delivery is made.
        server = serve(database_url, flows, tmp_path / "a.log", port, GUIDEPOST_WEBHOOK_POLL="60")
        run_id = ok(server.base, "guide_start", {"flow_id": "refund_request", "values": STALLS})[
            "run_id"
        ]
        kill(server)
        assert receiver.received == []
        server = serve(database_url, flows, tmp_path / "b.log", port, GUIDEPOST_WEBHOOK_POLL="0.1")
        try:
            [got] = receiver.wait_for(1)
        finally:
            server.stop()
        assert got.verified
        assert (got.json["type"], got.json["data"]["run_id"]) == ("run.stalled", run_id)
        assert django_eval(database_url, DELIVERED) == [["delivered", 1]]


def test_a_delivery_cut_off_by_a_kill_is_delivered_after_a_restart_with_the_same_id(
    tmp_path: Path,
) -> None:
    flows, port = copy_flows(tmp_path / "flows"), free_port()
    with fresh_database(tmp_path) as database_url, receiving(hold=30.0) as receiver:
        subscribe(database_url, receiver)
        server = serve(database_url, flows, tmp_path / "a.log", port, GUIDEPOST_WEBHOOK_POLL="0.1")
        ok(server.base, "guide_start", {"flow_id": "refund_request", "values": STALLS})
        receiver.wait_for(1)  # the try is under way: the receiver holds it
        kill(server)
        server = serve(database_url, flows, tmp_path / "b.log", port, GUIDEPOST_WEBHOOK_POLL="0.1")
        try:
            first, second = receiver.wait_for(2)
        finally:
            server.stop()
        assert first.webhook_id == second.webhook_id and second.verified
        assert django_eval(database_url, DELIVERED) == [["delivered", 1]]


def test_the_worker_command_delivers_alone_and_stops_on_sigterm(tmp_path: Path) -> None:
    # Empty: `webhook` and `worker` migrate it first.
    with fresh_database(tmp_path, empty=True) as database_url, receiving() as receiver:
        subscribe(database_url, receiver)
        queued = guidepost_command(database_url, "webhook", "test", "1", env=PRIVATE)
        assert queued.returncode == 0, queued.stderr
        worker = subprocess.Popen(
            [sys.executable, "-m", "guidepost.cli", "worker"],
            cwd=REPO,
            env={
                **os.environ,
                "DATABASE_URL": database_url,
                **PRIVATE,
                "GUIDEPOST_WEBHOOK_POLL": "0.1",
            },
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            [got] = receiver.wait_for(1, timeout=60)
        finally:
            worker.terminate()
            out, _ = worker.communicate(timeout=30)
        assert got.verified and got.json["type"] == "webhook.test"
        assert worker.returncode == 0
        assert out.splitlines()[-1] == "guidepost: webhook worker stopped"
