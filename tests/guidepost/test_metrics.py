"""``GET /metrics`` (ADR 0082): Prometheus' text format, summed across the workers of a real
``serve --workers 2``, with what the database says computed at scrape time; readable only
from the allowed addresses or with the metrics token.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client as DjangoClient
from prometheus_client.parser import text_string_to_metric_families

from access_app.callers import Transport
from guidepost.mcp.dispatch import dispatch
from tests.flows_app.test_flow_reload import worker_pids
from tests.support.mcp_http import ERROR_KEYS, http_get, ok, post
from tests.support.receiver import receiving
from tests.support.servers import Server, fresh_database, guidepost_command, start_server
from tests.support.waiting import wait_until

CALLS = 24


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape: (name, sorted labels) -> value."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(scrape: dict[Any, float], name: str, **labels: str) -> float | None:
    return scrape.get((name, tuple(sorted(labels.items()))))


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory, request: Any) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("metrics")
    from tests.support.servers import copy_flows

    with fresh_database(root) as database_url:
        server = start_server(
            database_url=database_url,
            flows_dir=copy_flows(root / "flows"),
            log=root / "server.log",
            workers=2,
            # The webhook test's receiver listens on loopback, and its subscription counts
            # from the next call (not up to GUIDEPOST_EVENTS_CACHE later).
            env={
                "GUIDEPOST_WEBHOOK_ALLOW_PRIVATE": "1",
                "GUIDEPOST_WEBHOOK_POLL": "0.2",
                "GUIDEPOST_EVENTS_CACHE": "0",
            },
        )
        try:
            yield server
        finally:
            server.stop()


def scrape(server: Server, **headers: str) -> dict[Any, float]:
    response = http_get(server.base + "/metrics", headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return samples(response.text)


def metrics_dir(server: Server) -> Path:
    [pid, *_] = worker_pids(server)
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    [entry] = [e for e in environ if e.startswith(b"PROMETHEUS_MULTIPROC_DIR=")]
    return Path(entry.split(b"=", 1)[1].decode())


@pytest.mark.slow
def test_tool_calls_and_steps_are_summed_across_both_workers(two_workers: Server) -> None:
    for _ in range(CALLS):
        ok(two_workers.base, "guide_flows", {})
    started = [
        ok(two_workers.base, "guide_start", {"flow_id": "refund_request"})["run_id"]
        for _ in range(4)
    ]
    ok(two_workers.base, "guide_answer", {"run_id": started[0], "choice": "__unknown__"})
    post(two_workers.base, "guide_status", {"run_id": "r_nothing"})

    # Both workers answered some of the calls: each wrote its own counter file.
    directory = metrics_dir(two_workers)
    pids = worker_pids(two_workers)
    assert len(pids) == 2
    counted_by = {p for p in pids if (directory / f"counter_{p}.db").exists()}
    assert counted_by == set(pids), sorted(p.name for p in directory.iterdir())

    # Whichever worker answers the scrape, it reports the sum.
    for _ in range(4):
        found = scrape(two_workers)
        assert value(found, "guidepost_tool_calls_total", tool="guide_flows", outcome="ok") == CALLS
        assert value(found, "guidepost_tool_calls_total", tool="guide_start", outcome="ok") == 4
        assert (
            value(found, "guidepost_tool_calls_total", tool="guide_status", outcome="run not found")
            == 1
        )
        assert value(found, "guidepost_step_seconds_count", tool="guide_start") == 4
        assert value(found, "guidepost_step_seconds_count", tool="guide_answer") == 1
        assert "guidepost_step_seconds_count" not in {
            name for name, labels in found if dict(labels).get("tool") == "guide_flows"
        }


@pytest.mark.slow
def test_runs_by_flow_and_state_and_stalled_runs_come_from_the_database(
    two_workers: Server,
) -> None:
    run_id = ok(two_workers.base, "guide_start", {"flow_id": "identity_check"})["run_id"]
    before = scrape(two_workers)
    active = value(before, "guidepost_runs", flow="identity_check", state="active")
    assert active is not None and active >= 1

    stalled = ok(two_workers.base, "guide_answer", {"run_id": run_id, "choice": "__unknown__"})
    assert stalled["status"] == "stalled", stalled
    after = scrape(two_workers)

    # A pair with no runs has no series.
    assert (value(after, "guidepost_runs", flow="identity_check", state="active") or 0) == (
        active - 1
    )
    assert value(after, "guidepost_runs", flow="identity_check", state="stalled") == 1
    waiting = value(after, "guidepost_stalled_runs_waiting")
    assert waiting is not None and waiting >= 1
    oldest = value(after, "guidepost_stalled_oldest_wait_seconds")
    assert oldest is not None and oldest >= 0


@pytest.mark.slow
def test_webhook_deliveries_and_rate_limit_refusals_exist_at_zero(two_workers: Server) -> None:
    found = scrape(two_workers)
    for result in ("delivered", "failed", "gave up"):
        assert value(found, "guidepost_webhook_deliveries_total", result=result) == 0
    assert value(found, "guidepost_rate_limit_refusals_total", scope="calls") == 0


@pytest.mark.slow
def test_a_webhook_the_supervisor_delivers_is_counted_in_the_workers_scrape(
    two_workers: Server,
) -> None:
    """With --workers N the webhook worker runs in the supervisor, which never serves
    /metrics: its counts reached no scrape while it counted in its own memory."""
    with receiving() as receiver:
        added = guidepost_command(
            two_workers.database_url,
            "webhook",
            "add",
            receiver.url,
            "--events",
            "run.stalled",
            env={"GUIDEPOST_WEBHOOK_ALLOW_PRIVATE": "1"},
        )
        assert added.returncode == 0, added.stderr
        run_id = ok(two_workers.base, "guide_start", {"flow_id": "identity_check"})["run_id"]
        ok(two_workers.base, "guide_answer", {"run_id": run_id, "choice": "__unknown__"})
        receiver.wait_for(1)
    counted = wait_until(
        lambda: value(
            scrape(two_workers), "guidepost_webhook_deliveries_total", result="delivered"
        ),
        15,
        message="no delivery counted in /metrics",
    )
    assert counted >= 1


@pytest.mark.slow
def test_the_metrics_directory_is_removed_when_serve_ends(tmp_path: Path) -> None:
    from tests.support.servers import copy_flows

    with fresh_database(tmp_path) as database_url:
        server = start_server(
            database_url=database_url,
            flows_dir=copy_flows(tmp_path / "flows"),
            log=tmp_path / "server.log",
            workers=2,
        )
        try:
            directory = metrics_dir(server)
            assert directory.is_dir()
        finally:
            server.stop()
    assert not directory.exists()


# --- who may read them (in process: the address is the test client's REMOTE_ADDR) -------------


@pytest.mark.django_db
def test_a_caller_outside_the_allowed_addresses_is_refused_with_the_error_object() -> None:
    response = DjangoClient(REMOTE_ADDR="10.0.0.5").get("/metrics")

    assert response.status_code == 403
    assert set(response.json()) >= ERROR_KEYS
    assert response.json()["error"] == "permission denied"


@pytest.mark.django_db
def test_loopback_reads_the_metrics_by_default() -> None:
    response = DjangoClient().get("/metrics")

    assert response.status_code == 200
    assert b"guidepost_tool_calls_total" in response.content or b"guidepost_tool_calls" in (
        response.content
    )


@pytest.mark.django_db
def test_the_metrics_token_lets_any_address_in_and_a_wrong_one_is_401(settings: Any) -> None:
    settings.GUIDEPOST_METRICS_TOKEN = "scrape-7f3a"
    elsewhere = DjangoClient(REMOTE_ADDR="10.0.0.5")

    assert elsewhere.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-7f3a").status_code == 200
    wrong = elsewhere.get("/metrics", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid key"
    assert wrong["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.django_db
def test_an_allowed_network_reads_the_metrics_and_loopback_no_longer_does(settings: Any) -> None:
    settings.GUIDEPOST_METRICS_ALLOW = ["10.0.0.0/8"]

    assert DjangoClient(REMOTE_ADDR="10.0.0.5").get("/metrics").status_code == 200
    assert DjangoClient().get("/metrics").status_code == 403


@pytest.mark.django_db
def test_a_rate_limit_refusal_is_counted(settings: Any) -> None:
    settings.GUIDEPOST_RATE_BURST = 1
    settings.GUIDEPOST_RATE_PER_SECOND = 0.001
    agent = Transport(peer="192.0.2.77")
    before = samples(DjangoClient().get("/metrics").content.decode())

    dispatch("guide_flows", {}, agent)
    refused = dispatch("guide_flows", {}, agent)

    assert refused.payload["error"] == "rate limited"
    after = samples(DjangoClient().get("/metrics").content.decode())
    name = "guidepost_rate_limit_refusals_total"
    assert value(after, name, scope="calls") == (value(before, name, scope="calls") or 0) + 1
    tool_calls = "guidepost_tool_calls_total"
    limited = {"tool": "guide_flows", "outcome": "rate limited"}
    assert value(after, tool_calls, **limited) == (value(before, tool_calls, **limited) or 0) + 1


def test_the_multiprocess_directory_is_not_set_outside_serve() -> None:
    # In a test process, values live in memory and the default registry is read.
    assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ
