"""Lookups end to end (ADR 0119): an agent over real MCP HTTP, a real server, and a real
endpoint on loopback that verifies every call's signature. The endpoint answers, is slow,
fails, answers a label the node does not return, answers too much; a run whose lookup
stalled is answered by a person through the JSON API; a retried answer never calls
again, and ``verify`` replays every lookup from the record without calling.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from tests.support.mcp_http import http_client, ok
from tests.support.receiver import Receiver, receiving
from tests.support.servers import Server, copy_flows, guidepost_command, serving

FLOW = """\
id: order_lookup
title: Where is my order?
category: payments
entry: c_order
nodes:
  - id: c_order
    kind: collect
    say: Ask for the order number
    slots:
      order_id: {ask: the order number, required: true}
    next: l_status
  - id: l_status
    kind: lookup
    say: Look up the order in the order system
    call: orders
    send: [order_id]
    returns:
      shipped: the order has left the warehouse
      pending: the order is still in the warehouse
    sets:
      shipped_on: date
    next:
      shipped: e_shipped
      pending: e_pending
  - id: e_shipped
    kind: end
    say: Tell them when it was shipped
    outcome: shipped
  - id: e_pending
    kind: end
    say: Tell them it ships soon
    outcome: pending
"""
# The same, with a way out of a failed call.
GUARDED = (
    FLOW.replace("order_lookup", "order_lookup_guarded")
    .replace(
        "      pending: e_pending\n", "      pending: e_pending\n      __error__: e_unchecked\n"
    )
    .replace(
        "    outcome: pending\n",
        "    outcome: pending\n  - id: e_unchecked\n    kind: end\n"
        "    say: Tell them we could not check\n    outcome: unchecked\n",
    )
)
PASSWORD = "pw-lookups-ops"
SHIPPED = {"label": "shipped", "values": {"shipped_on": "2026-03-01"}}


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Receiver]:
    with receiving() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, endpoint: Receiver) -> Iterator[Server]:
    """A server with the two flows, which may call loopback, and the endpoint ``orders``
    (0.5 s to answer) registered by the operator's command."""
    tmp = tmp_path_factory.mktemp("lookups")
    flows = copy_flows(tmp / "flows")
    (flows / "order_lookup.yaml").write_text(FLOW, encoding="utf-8")
    (flows / "order_lookup_guarded.yaml").write_text(GUARDED, encoding="utf-8")
    private = {"GUIDEPOST_WEBHOOK_ALLOW_PRIVATE": "1"}
    with serving(tmp, flows_dir=flows, env=private) as running:
        added = guidepost_command(
            running.database_url,
            "endpoint",
            "add",
            "orders",
            endpoint.url,
            "--timeout",
            "0.5",
            env=private,
        )
        assert added.returncode == 0, added.stderr
        endpoint.secret = added.stdout.strip().splitlines()[-1]
        person = guidepost_command(
            running.database_url,
            "adduser",
            "sam",
            "--role",
            "ops",
            env={"GUIDEPOST_ADDUSER_PASSWORD": PASSWORD},
        )
        assert person.returncode == 0, person.stderr
        yield running


@pytest.fixture(autouse=True)
def answering(endpoint: Receiver) -> Iterator[None]:
    endpoint.received.clear()
    endpoint.then, endpoint.hold = 200, 0.0
    endpoint.reply = json.dumps(SHIPPED).encode()
    yield


def started(server: Server, flow: str, order: str) -> dict:
    return ok(server.base, "guide_start", {"flow_id": flow, "values": {"order_id": order}})


def test_the_endpoint_answers_and_the_run_goes_on_in_the_same_call(
    server: Server, endpoint: Receiver
) -> None:
    result = started(server, "order_lookup", "A-1")
    assert result["status"] == "completed" and result["outcome"] == "shipped"
    assert result["looked_up"] == [
        {
            "id": "l_status",
            "say": "Look up the order in the order system",
            "took": "shipped",
            "next": "e_shipped",
        }
    ]
    [call] = endpoint.received
    assert call.verified, "signed with the endpoint's secret"
    assert call.json == {
        "run_id": result["run_id"],
        "flow": "order_lookup",
        "node": "l_status",
        "values": {"order_id": "A-1"},
    }
    status = ok(server.base, "guide_status", {"run_id": result["run_id"]})
    assert status["values"] == {
        "order_id": "A-1",
        "l_status": "shipped",
        "shipped_on": "2026-03-01",
    }


@pytest.mark.parametrize(
    ("reply", "status", "hold", "failed"),
    [
        (SHIPPED, 200, 1.0, "TimeoutError: timed out: no whole answer within 0.5 s"),
        ({"error": "down"}, 503, 0.0, 'HTTP 503: \'{"error": "down"}\''),
        ({"label": "lost"}, 200, 0.0, "label 'lost' is not one of: shipped, pending"),
        (
            {"label": "shipped", "values": {"shipped_on": "x" * 70_000}},
            200,
            0.0,
            "the answer is over 65536 bytes: too much",
        ),
    ],
    ids=["slow", "fails", "label it does not return", "too much"],
)
def test_a_call_that_fails_takes_the_error_route_with_its_reason(
    server: Server, endpoint: Receiver, reply: object, status: int, hold: float, failed: str
) -> None:
    endpoint.reply, endpoint.then, endpoint.hold = json.dumps(reply).encode(), status, hold
    result = started(server, "order_lookup_guarded", "A-2")
    assert result["outcome"] == "unchecked"
    assert result["looked_up"][0]["took"] == "__error__"
    assert result["looked_up"][0]["failed"] == "lookup failed: " + failed


def test_a_failed_call_without_an_error_route_stalls_and_a_person_answers_it(
    server: Server, endpoint: Receiver
) -> None:
    endpoint.then = 500
    stalled = started(server, "order_lookup", "A-3")
    assert (stalled["status"], stalled["reason"]) == ("stalled", "lookup_failed")
    assert stalled["looked_up"][0]["failed"].startswith("lookup failed: HTTP 500")

    with http_client(base_url=server.base, timeout=10) as http:
        login = http.get("/admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text)
        assert token is not None
        http.post(
            "/admin/login/",
            data={"username": "sam", "password": PASSWORD, "csrfmiddlewaretoken": token[1]},
        )
        answered = http.post(
            f"/api/runs/{stalled['run_id']}/resolve",
            json={
                "choice": "shipped",
                "values": {"shipped_on": "2026-02-27"},
                "note": "The order system is down; the warehouse confirmed it left on the 27th.",
            },
            headers={"X-CSRFToken": http.cookies["csrftoken"]},
        )
    assert answered.status_code == 200, answered.text
    assert answered.json()["status"] == "completed"
    status = ok(server.base, "guide_status", {"run_id": stalled["run_id"]})
    assert status["state"] == "completed" and status["values"]["shipped_on"] == "2026-02-27"
    assert status["next"].startswith("A person answered l_status")
    assert len(endpoint.received) == 1, "a person's answer calls nothing"


def test_a_retried_answer_is_answered_from_its_step_and_never_calls_again(
    server: Server, endpoint: Receiver
) -> None:
    run_id = ok(server.base, "guide_start", {"flow_id": "order_lookup"})["run_id"]
    answer = {"run_id": run_id, "values": {"order_id": "A-4"}, "at": "c_order"}
    first = ok(server.base, "guide_answer", answer)
    again = ok(server.base, "guide_answer", answer)
    assert again == {**first, "repeated": True}
    assert len(endpoint.received) == 1


def test_verify_replays_each_lookup_from_the_record_without_calling(
    server: Server, endpoint: Receiver
) -> None:
    run_ids = [started(server, "order_lookup", "A-5")["run_id"]]
    endpoint.reply = b'{"label": "pending"}'
    run_ids.append(started(server, "order_lookup", "A-6")["run_id"])
    endpoint.then = 500
    run_ids.append(started(server, "order_lookup_guarded", "A-7")["run_id"])
    calls = len(endpoint.received)

    verified = guidepost_command(server.database_url, "verify", *run_ids)

    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert len(endpoint.received) == calls
