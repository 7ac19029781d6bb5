"""Every request has an id, and JSON logs (GUIDEPOST_LOG_FORMAT=json) carry it: a server
with JSON logs, read as a log collector reads its output, line by line."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.mcp_http import http_get, ok, post
from tests.support.servers import Server, free_port, guidepost_command, serving
from tests.support.waiting import wait_until

NEW_ID = re.compile(r"[0-9a-f]{32}")
ENV = {
    "GUIDEPOST_LOG_FORMAT": "json",
    "GUIDEPOST_WEBHOOK_ALLOW_PRIVATE": "1",  # the receiver that never answers is local
    "GUIDEPOST_WEBHOOK_POLL": "0.2",
    "GUIDEPOST_EVENTS_CACHE": "0",  # a subscription added by a command is seen at once
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(tmp_path_factory.mktemp("request_ids"), env=ENV) as running:
        yield running


def log_lines(server: Server) -> list[dict[str, Any]]:
    """Every line of the server's output as JSON (a line that is not fails the test)."""
    return [json.loads(line) for line in server.output().splitlines()]


def request_id(server: Server, **headers: str) -> str:
    response = http_get(server.base + "/api/", headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    return response.headers["x-request-id"]


def test_a_request_gets_back_the_id_it_sent_or_a_new_one(server: Server) -> None:
    assert request_id(server, **{"X-Request-ID": "trace-42.a:7"}) == "trace-42.a:7"
    made = [request_id(server) for _ in range(2)]
    assert all(NEW_ID.fullmatch(made_id) for made_id in made) and made[0] != made[1], made
    for unusable in ("two words", "x" * 129, "<script>"):
        replaced = request_id(server, **{"X-Request-ID": unusable})
        assert NEW_ID.fullmatch(replaced), (unusable, replaced)


def test_every_line_of_a_json_log_is_one_object_with_time_level_logger_and_message(
    server: Server,
) -> None:
    assert http_get(server.base + "/no/such/page", timeout=10).status_code == 404
    ok(server.base, "guide_flows", {})

    lines = log_lines(server)

    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines), lines
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", x["time"]) for x in lines)
    started = [line["message"] for line in lines if line["logger"] == "guidepost.serve"]
    assert started[-1].startswith("guidepost: 6 flows from "), started
    [refused] = [line for line in lines if "refused GET /no/such/page" in line["message"]]
    assert (refused["level"], refused["logger"]) == ("WARNING", "django.request")
    assert NEW_ID.fullmatch(refused["request_id"]), refused


def test_a_tool_calls_access_line_has_its_fields_and_its_request_id(server: Server) -> None:
    started = ok(server.base, "guide_start", {"flow_id": "refund_request"})
    headers = {"X-Request-ID": "call-status-1"}
    response = post(server.base, "guide_status", {"run_id": started["run_id"]}, headers=headers)
    assert response.headers["x-request-id"] == "call-status-1"

    def access_line() -> dict[str, Any] | None:
        lines = [x for x in log_lines(server) if x.get("request_id") == "call-status-1"]
        return lines[0] if lines else None

    line = wait_until(access_line, 10, 0.05, message=server.output)
    assert line["logger"] == "guidepost.access"
    assert {k: line[k] for k in ("caller", "tool", "run_id", "outcome", "status", "peer")} == {
        "caller": "",
        "tool": "guide_status",
        "run_id": started["run_id"],
        "outcome": "ok",
        "status": 200,
        "peer": "127.0.0.1",
    }
    assert isinstance(line["ms"], float) and line["ms"] > 0


def test_a_webhook_try_is_logged_under_the_request_that_recorded_its_event(
    server: Server,
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}/hook"  # refuses every connection
    added = guidepost_command(
        server.database_url, "webhook", "add", nobody, "--events", "run.completed", env=ENV
    )
    assert added.returncode == 0, added.stderr
    run_id = ok(server.base, "guide_start", {"flow_id": "refund_request"})["run_id"]
    ok(server.base, "guide_answer", {"run_id": run_id, "values": {"order_number": "A00118"}})
    ok(server.base, "guide_answer", {"run_id": run_id, "choice": "wrong_item"})
    last = {"run_id": run_id, "choice": "credit"}
    ended = ok(server.base, "guide_answer", last, headers={"X-Request-ID": "walk-end-7"})
    assert ended["status"] == "completed", ended

    def failed_try() -> dict[str, Any] | None:
        lines = [
            x
            for x in log_lines(server)
            if x["logger"] == "events_app.worker" and x.get("request_id") == "walk-end-7"
        ]
        return lines[0] if lines else None

    line = wait_until(failed_try, 20, 0.1, message=server.output)
    assert line["message"].startswith("webhook msg_") and nobody in line["message"], line
