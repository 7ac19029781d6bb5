"""A lookup's call (issue 45): the run's question POSTed, signed, to a registered endpoint,
a real HTTP server on loopback that verifies the signature with the endpoint's secret;
its answer judged against the node as a run's engine judges it, and every way it fails
one reason in words."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from events_app.endpoints import endpoint_add, endpoint_remove
from events_app.lookups import LookupFailure, Reply, call_endpoint
from events_app.models import Endpoint
from flowcore.common.limits import MAX_LOOKUP_ANSWER_BYTES
from flowcore.common.lookups import Fitted, Misfit
from flowcore.flow.model import LookupNode, frozen_mapping
from flowcore.run.lookups import Looked, judged
from tests.support.receiver import Receiver, receiving

pytestmark = pytest.mark.django_db

PAYLOAD = {
    "run_id": "r_5xq2",
    "flow": {"id": "refund_request", "version": "3"},
    "node": "find_customer",
    "values": {"order_number": "A00118"},
}
RETURNS = {"found": "the customer is known", "missing": "no such customer"}
SETS = {"tier": "text", "credit": "number", "orders": "integer", "since": "date", "vip": "boolean"}
NODE = LookupNode(
    id="find_customer",
    say="find the customer",
    call="crm",
    send=("order_number",),
    returns=frozen_mapping(RETURNS),
    next=frozen_mapping({label: "n_next" for label in RETURNS}),
    sets=frozen_mapping(SETS),  # type: ignore[arg-type]
)


@pytest.fixture(autouse=True)
def loopback_allowed(settings: Any) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = True  # the endpoint is on 127.0.0.1


@pytest.fixture
def endpoint() -> Iterator[Receiver]:
    """The endpoint ``crm``: a receiver that knows its secret."""
    with receiving() as receiver:
        registered = endpoint_add(name="crm", url=receiver.url, timeout=1.0)
        receiver.secret = registered.secret
        yield receiver


def answers(receiver: Receiver, answer: object, status: int = 200) -> None:
    receiver.reply = json.dumps(answer).encode()
    receiver.then = status


def asked() -> tuple[Reply, Fitted] | str:
    """Call crm and judge what came back as the run's node does: the reply and the
    answer, or why the call failed."""
    reply = call_endpoint("crm", PAYLOAD)
    if isinstance(reply, LookupFailure):
        return reply.reason
    answer = judged(NODE, Looked(response=reply.response))
    return answer.reason if isinstance(answer, Misfit) else (reply, answer)


def failed() -> str:
    result = asked()
    assert isinstance(result, str), result
    return result


def test_an_answer_that_fits_gives_its_label_and_typed_values(endpoint: Receiver) -> None:
    answers(
        endpoint,
        {
            "label": "found",
            "values": {"tier": "gold", "credit": 12.5, "orders": "7", "since": "2024-03-31"},
        },
    )
    result = asked()
    assert not isinstance(result, str), result
    reply, answer = result
    assert (answer.label, answer.values) == (
        "found",
        {"tier": "gold", "credit": 12.5, "orders": 7, "since": "2024-03-31"},
    )
    assert reply.status == 200
    assert reply.response == endpoint.reply.decode()
    assert len(reply.digest) == 64


def test_the_question_is_the_runs_signed_as_a_webhook_with_the_endpoints_secret(
    endpoint: Receiver,
) -> None:
    answers(endpoint, {"label": "missing"})
    asked()
    [got] = endpoint.received
    assert got.json == PAYLOAD
    assert got.verified, "the receiver verifies webhook-signature with the endpoint's secret"
    assert got.webhook_id.startswith("msg_")
    assert got.headers["content-type"] == "application/json"
    assert got.headers["user-agent"] == "guidepost-lookups"


def test_each_call_is_its_own_message(endpoint: Receiver) -> None:
    answers(endpoint, {"label": "missing"})
    asked()
    asked()
    assert len({got.webhook_id for got in endpoint.received}) == 2


def test_a_receiver_with_another_secret_refuses_the_signature(endpoint: Receiver) -> None:
    endpoint.secret = Endpoint(name="other").secret  # a fresh, different one
    answers(endpoint, {"label": "missing"})
    asked()
    assert not endpoint.received[0].verified


def test_a_slow_endpoint_fails_at_its_own_timeout(endpoint: Receiver) -> None:
    Endpoint.objects.filter(name="crm").update(timeout=0.5)
    answers(endpoint, {"label": "found"})
    endpoint.hold = 3.0
    started = time.monotonic()
    assert failed() == "TimeoutError: timed out: no whole answer within 0.5 s"
    assert time.monotonic() - started < 2.0


def test_a_status_other_than_2xx_fails_quoting_the_endpoint(endpoint: Receiver) -> None:
    endpoint.reply, endpoint.then = b"database down\n", 500
    assert failed() == "HTTP 500: 'database down'"


def test_a_redirect_is_not_followed(endpoint: Receiver) -> None:
    endpoint.then = 302
    assert failed() == "HTTP 302: redirects are not followed"
    assert len(endpoint.received) == 1


def test_a_label_the_node_does_not_return_fails(endpoint: Receiver) -> None:
    answers(endpoint, {"label": "suspended"})
    assert failed() == "label 'suspended' is not one of: found, missing"


def test_a_value_the_node_does_not_set_fails(endpoint: Receiver) -> None:
    answers(endpoint, {"label": "found", "values": {"tier": "gold", "credit_limit": 900}})
    assert failed() == (
        "value 'credit_limit' is not one it may set (it may set: tier, credit, orders, since, vip)"
    )


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ({"since": "31/03/2024"}, "value 'since' does not fit its type date: '31/03/2024'"),
        ({"orders": 1.5}, "value 'orders' does not fit its type integer: 1.5"),
        ({"vip": "perhaps"}, "value 'vip' does not fit its type boolean: 'perhaps'"),
        ({"credit": "1,200"}, "value 'credit' does not fit its type number: '1,200'"),
        ({"tier": 3}, "value 'tier' does not fit its type text: 3"),
        ({"tier": None}, "value 'tier' does not fit its type text: null"),
        ({"credit": [1]}, "value 'credit' does not fit its type number: an array"),
    ],
)
def test_a_value_of_the_wrong_type_fails(
    endpoint: Receiver, values: dict[str, object], reason: str
) -> None:
    answers(endpoint, {"label": "found", "values": values})
    assert failed() == reason


def test_booleans_and_numbers_are_taken_as_json_or_as_their_text(endpoint: Receiver) -> None:
    answers(endpoint, {"label": "found", "values": {"vip": True, "credit": "1200", "orders": 3}})
    result = asked()
    assert not isinstance(result, str), result
    assert result[1].values == {"vip": True, "credit": 1200.0, "orders": 3}


def test_too_much_answer_fails_without_reading_it_all(endpoint: Receiver) -> None:
    endpoint.reply = b'{"label": "found", "values": {"tier": "' + b"x" * MAX_LOOKUP_ANSWER_BYTES
    endpoint.reply += b'"}}'
    assert failed() == f"the answer is over {MAX_LOOKUP_ANSWER_BYTES} bytes: too much"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (b"ok", "the answer is not JSON (Expecting value: line 1 column 1 (char 0))"),
        (b"", "the answer is not JSON (Expecting value: line 1 column 1 (char 0))"),
        (b'{"label": NaN}', "the answer is not JSON (NaN is not a JSON number)"),
        (b'"found"', 'the answer is a string, not an object {"label": …}'),
        (b"[" * 60_000, "the answer is nested too deep"),
        (b'{"label": "found", "why": "x"}', "the answer holds 'why' beside label and values"),
    ],
)
def test_an_answer_that_is_not_one_fails(endpoint: Receiver, reply: bytes, reason: str) -> None:
    endpoint.reply = reply
    assert failed() == reason


@pytest.mark.hostile
def test_a_loopback_endpoint_is_refused_at_the_call_without_the_setting(
    endpoint: Receiver, settings: Any
) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = False  # registered with it, called without
    answers(endpoint, {"label": "found"})
    assert failed().startswith("address refused: 127.0.0.1 resolves to 127.0.0.1, not a public")
    assert not endpoint.received, "nothing was sent"


@pytest.mark.hostile
def test_a_name_that_resolves_to_loopback_is_refused_at_the_call(
    endpoint: Receiver, settings: Any
) -> None:
    Endpoint.objects.filter(name="crm").update(url=f"http://localhost:{endpoint.port}/hook")
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = False
    reason = failed()
    assert reason.startswith("address refused: localhost resolves to "), reason
    assert "not a public address" in reason
    assert not endpoint.received


def test_a_removed_endpoint_fails_by_name(endpoint: Receiver) -> None:
    endpoint_remove("crm")
    assert failed() == "no endpoint is named 'crm'"
    assert not endpoint.received


def test_a_failure_is_what_a_stalled_run_says() -> None:
    assert LookupFailure("HTTP 500: 'x'").said == "lookup failed: HTTP 500: 'x'"


def test_a_closed_port_fails_as_a_refused_connection() -> None:
    with receiving() as gone:
        endpoint_add(name="crm", url=gone.url)
    assert failed().startswith("ConnectionRefusedError: ")


def test_a_failure_is_one_log_line_without_the_values_sent(
    endpoint: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    answers(endpoint, {"error": "no such order"}, status=404)
    with caplog.at_level(logging.INFO, logger="events_app.lookups"):
        asked()
    [record] = caplog.records
    assert record.getMessage() == (
        'lookup crm: lookup failed: HTTP 404: \'{"error": "no such order"}\''
    )
    assert "A00118" not in caplog.text
