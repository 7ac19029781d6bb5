"""Webhooks delivered at least once, signed (spec §8, ADR 0077, 0078), to a real HTTP
receiver in the test process that verifies each request with ``standardwebhooks``."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from access_app.callers import Caller
from events_app import services as events
from events_app import worker
from events_app.delivery import public_url
from events_app.models import Delivery, Subscription
from events_app.worker import DELIVERIES
from flowcore.common.errors import InvalidInput
from guidepost.loops import start_webhooks
from runs_app import agent_steps
from tests.support.receiver import Received, Receiver, receiving
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

CALLER = Caller(key="test:webhooks", name="pytest")
ORDER = {"order_number": "A00118"}


@pytest.fixture(autouse=True)
def quick_retries(settings: Any) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = True  # the receiver is on 127.0.0.1
    settings.GUIDEPOST_WEBHOOK_RETRY_BASE = 0.01
    settings.GUIDEPOST_WEBHOOK_RETRY_MAX = 0.05
    events.forget_subscriptions()


@pytest.fixture
def receiver() -> Any:
    with receiving() as running:
        yield running


def subscribe(receiver: Receiver, *kinds: str, **options: Any) -> Subscription:
    subscription = events.subscription_add(url=receiver.url, events=kinds, **options)
    receiver.secret = subscription.secret
    return subscription


def complete_a_run() -> str:
    run_id = agent_steps.run_start(caller=CALLER, flow_id="refund_request", values=ORDER, ref=None)[
        "run_id"
    ]
    for choice in ("wrong_item", "credit"):
        agent_steps.run_answer(caller=CALLER, run_id=run_id, choice=choice, values=None, at=None)
    return str(run_id)


def delivered(result: str) -> float:
    """How many webhook tries this process counted with ``result``."""
    return DELIVERIES.labels(result=result)._value.get()


def work_until(done: Any, timeout: float = 20.0) -> None:
    """Run the worker's ticks, as its loop does, until ``done()``."""

    def ticked_until_done() -> bool:
        if done():
            return True
        worker.tick()
        return False

    wait_until(ticked_until_done, timeout, 0.01, message="the worker did not get there")


def test_a_completed_run_is_posted_signed_in_the_standard_shape(receiver: Receiver) -> None:
    subscribe(receiver, "run.completed")
    run_id = complete_a_run()
    work_until(lambda: receiver.received)
    [got] = receiver.received
    assert got.verified, "the signature checks out with the subscription's secret"
    assert got.webhook_id.startswith("msg_")
    body = got.json
    assert set(body) == {"type", "timestamp", "data"}
    assert (body["type"], body["data"]["run_id"], body["data"]["outcome"]) == (
        "run.completed",
        run_id,
        "credited",
    )
    assert "values" not in body["data"], "values only for subscriptions that ask"
    delivery = Delivery.objects.get()
    assert (delivery.state, delivery.attempts, delivery.last_status) == ("delivered", 1, 200)
    assert delivery.last_response_ms is not None


def test_a_signature_made_with_another_secret_does_not_verify(receiver: Receiver) -> None:
    subscribe(receiver, "run.completed")
    receiver.secret = Subscription(url=receiver.url).secret  # a fresh, different secret
    complete_a_run()
    work_until(lambda: receiver.received)
    assert not receiver.received[0].verified


def signatures(got: Received) -> list[str]:
    """The ``v1,…`` entries of a request's ``webhook-signature`` (space-separated)."""
    return got.headers["webhook-signature"].split(" ")


def signed_by(secret: str, got: Received) -> str:
    """The signature ``secret`` makes of what ``got`` carried."""
    at = datetime.fromtimestamp(int(got.headers["webhook-timestamp"]), UTC)
    return Webhook(secret).sign(got.webhook_id, at, got.body.decode())


@pytest.mark.hostile
def test_a_rotated_secret_signs_beside_the_new_one_for_its_grace_period_then_is_forgotten(
    receiver: Receiver, settings: Any
) -> None:
    settings.GUIDEPOST_WEBHOOK_SECRET_GRACE = 1.0
    subscription = subscribe(receiver, "run.stalled")
    old = subscription.secret
    rotated = events.subscription_rotate(subscription.pk)
    receiver.secret = new = rotated.secret
    assert new != old

    events.subscription_test(subscription.pk)
    work_until(lambda: len(receiver.received) == 1)
    during = receiver.received[0]
    assert sorted(signatures(during)) == sorted([signed_by(new, during), signed_by(old, during)])
    assert during.verified
    Webhook(old).verify(during.body, during.headers)  # a receiver still on the old secret

    assert rotated.previous_secret_until is not None
    until = rotated.previous_secret_until
    wait_until(lambda: timezone.now() > until, interval=0.05, message="the grace period ends")
    events.subscription_test(subscription.pk)
    work_until(lambda: len(receiver.received) == 2)
    after = receiver.received[1]
    assert signatures(after) == [signed_by(new, after)]
    assert after.verified
    subscription.refresh_from_db()
    assert (subscription.previous_secret, subscription.previous_secret_until) == ("", None)


def test_a_receiver_down_three_times_gets_it_on_the_fourth_with_the_same_webhook_id(
    receiver: Receiver,
) -> None:
    receiver.script = [503, 503, 503]
    subscribe(receiver, "run.completed")
    before = {result: delivered(result) for result in ("delivered", "failed")}
    complete_a_run()
    work_until(lambda: Delivery.objects.filter(state="delivered").exists())
    # /metrics counts each try by its result (ADR 0082).
    assert delivered("failed") - before["failed"] == 3
    assert delivered("delivered") - before["delivered"] == 1
    got = receiver.received
    assert len(got) == 4
    assert len({r.webhook_id for r in got}) == 1
    assert all(r.verified for r in got)
    assert len({r.body for r in got}) == 1, "the same message on every try"
    delivery = Delivery.objects.get()
    assert (delivery.attempts, delivery.last_status, delivery.last_error) == (4, 200, "")


def test_a_failed_try_is_logged_and_waits_its_back_off(receiver: Receiver, settings: Any) -> None:
    settings.GUIDEPOST_WEBHOOK_RETRY_BASE = settings.GUIDEPOST_WEBHOOK_RETRY_MAX = 3600.0
    receiver.then = 500
    subscribe(receiver, "run.completed")
    complete_a_run()
    work_until(lambda: receiver.received)
    worker.tick()  # not due again for an hour
    delivery = Delivery.objects.get()
    assert len(receiver.received) == 1
    assert (delivery.state, delivery.attempts, delivery.last_status) == ("pending", 1, 500)
    assert delivery.last_error.startswith("HTTP 500")
    waited = (delivery.next_attempt_at - delivery.last_attempt_at).total_seconds()
    assert waited == pytest.approx(3600, abs=1)


def test_back_off_doubles_up_to_its_cap(settings: Any) -> None:
    settings.GUIDEPOST_WEBHOOK_RETRY_BASE = 5.0
    settings.GUIDEPOST_WEBHOOK_RETRY_MAX = 7200.0
    assert [worker.backoff(n) for n in (1, 2, 3, 4, 12, 20)] == [5, 10, 20, 40, 7200, 7200]


def test_tries_stop_after_the_retry_period_and_redeliver_starts_again(
    receiver: Receiver, settings: Any
) -> None:
    settings.GUIDEPOST_WEBHOOK_RETRY_FOR = 0.0
    receiver.then = 500
    subscribe(receiver, "run.completed")
    complete_a_run()
    work_until(lambda: Delivery.objects.filter(state="failed").exists())
    assert len(receiver.received) == 1
    receiver.then = 200
    events.deliveries_redeliver(Delivery.objects.values_list("pk", flat=True))
    work_until(lambda: Delivery.objects.filter(state="delivered").exists())
    assert len({r.webhook_id for r in receiver.received}) == 1


def test_a_receiver_failing_for_longer_than_the_retry_window_is_given_up_after_it(
    receiver: Receiver, settings: Any
) -> None:
    """Tried again and again through the window, then given up once the next try would
    fall after it; not tried again."""
    window = settings.GUIDEPOST_WEBHOOK_RETRY_FOR = 0.5
    settings.GUIDEPOST_WEBHOOK_RETRY_BASE = settings.GUIDEPOST_WEBHOOK_RETRY_MAX = 0.05
    receiver.then = 500
    subscribe(receiver, "run.completed")
    gave_up = delivered("gave up")
    complete_a_run()

    work_until(lambda: Delivery.objects.filter(state="failed").exists(), timeout=10 * window)

    delivery = Delivery.objects.get()
    assert delivery.last_attempt_at is not None
    tried_for = (delivery.last_attempt_at - delivery.retry_since).total_seconds()
    assert tried_for >= window - settings.GUIDEPOST_WEBHOOK_RETRY_MAX, tried_for
    assert delivery.next_attempt_at > delivery.retry_since + timedelta(seconds=window)
    assert delivery.attempts == len(receiver.received) > 1
    assert delivered("gave up") - gave_up == 1
    worker.tick()
    assert len(receiver.received) == delivery.attempts


def test_a_redirect_is_not_followed(receiver: Receiver) -> None:
    receiver.script = [302]
    subscribe(receiver, "run.completed")
    complete_a_run()
    work_until(lambda: Delivery.objects.filter(attempts=1).exists())
    assert [r.path for r in receiver.received] == ["/hook"]
    assert "redirects are not followed" in Delivery.objects.get().last_error


def test_a_receiver_that_does_not_answer_in_time_is_a_failed_try(
    receiver: Receiver, settings: Any
) -> None:
    settings.GUIDEPOST_WEBHOOK_TIMEOUT = 0.2
    receiver.hold = 2.0
    subscribe(receiver, "run.completed")
    complete_a_run()
    work_until(lambda: Delivery.objects.filter(attempts=1).exists())
    assert "timed out" in Delivery.objects.get().last_error


def test_values_go_only_to_a_subscription_that_asks_for_them(receiver: Receiver) -> None:
    subscribe(receiver, "run.completed", include_values=True)
    events.subscription_add(url=receiver.url + "?plain", events=["run.completed"])
    complete_a_run()
    work_until(lambda: len(receiver.received) >= 2)
    data = {r.path: r.json["data"] for r in receiver.received}
    assert data["/hook"]["values"]["order_number"] == "A00118"
    assert "values" not in data["/hook?plain"]


def test_the_slack_format_posts_text_with_the_run_page(receiver: Receiver) -> None:
    subscribe(receiver, "run.completed", format="slack")
    run_id = complete_a_run()
    work_until(lambda: receiver.received)
    body = receiver.received[0].json
    assert set(body) == {"text"}
    assert f"/r/{run_id}" in body["text"] and "completed (credited)" in body["text"]


# What Slack reads as a channel-wide ping, a link whose text hides its address, a bare
# ampersand and a mention of one person.
SLACK_TRAPS = "<!channel> <https://evil.example|click here> & <@U123>"
ESCAPED_TRAPS = "&lt;!channel&gt; &lt;https://evil.example|click here&gt; &amp; &lt;@U123&gt;"


@pytest.mark.hostile
def test_the_slack_format_escapes_an_agents_close_reason(receiver: Receiver) -> None:
    subscribe(receiver, "run.closed", format="slack")
    run_id = agent_steps.run_start(caller=CALLER, flow_id="refund_request", values=ORDER, ref=None)[
        "run_id"
    ]
    agent_steps.run_close(caller=CALLER, run_id=run_id, reason=SLACK_TRAPS)
    work_until(lambda: receiver.received)
    text = receiver.received[0].json["text"]
    assert text == (
        f"guidepost: run {run_id} of refund_request was closed: {ESCAPED_TRAPS}. "
        f"{public_url(f'/r/{run_id}')}"
    )


@pytest.mark.hostile
def test_the_slack_format_escapes_every_text_and_links_only_the_servers_page(
    receiver: Receiver,
) -> None:
    """Every text an event carries that an agent, a person or a flow's author wrote: the
    flow's id (a draft sets it), the node, the outcome, a stall's hand-over note, a close's
    reason. Slack reads ``<…>`` as a link, a mention or a ping: none is left."""
    kinds = ("run.stalled", "run.completed", "run.closed", "draft.submitted")
    subscribe(receiver, *kinds, format="slack")
    page = public_url("/r/r_x?a=1&b=2")
    run = {"run_id": "r_x", "flow": {"id": SLACK_TRAPS, "version": "1"}, "node": SLACK_TRAPS}
    texts = {"outcome": SLACK_TRAPS, "reason": SLACK_TRAPS, "handoff": SLACK_TRAPS}
    for kind in kinds[:3]:
        events.event_record(kind, {**run, **texts, "url": page})
    events.event_record("draft.submitted", {"draft_id": "d_x", "flow_id": SLACK_TRAPS, "url": page})
    work_until(lambda: len(receiver.received) == len(kinds))
    for got in receiver.received:
        text = got.json["text"]
        assert "<" not in text and ">" not in text, text
        assert ESCAPED_TRAPS in text, text
        assert text.replace("&amp;", "").replace("&lt;", "").replace("&gt;", "").count("&") == 0
        assert text.endswith(" " + page.replace("&", "&amp;")), text


def test_a_private_or_loopback_url_is_refused_unless_allowed(settings: Any) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = False
    for url in (
        "http://127.0.0.1:8000/hook",
        "http://10.0.0.5/hook",
        "http://[::1]/hook",
        "http://169.254.169.254/latest",
        "ftp://example.com/x",
    ):
        with pytest.raises(InvalidInput) as refused:
            events.subscription_add(url=url, events=["run.completed"])
        assert refused.value.error == "webhook URL refused", url


def test_an_address_that_became_private_is_refused_at_delivery(
    receiver: Receiver, settings: Any
) -> None:
    subscribe(receiver, "run.completed")
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = False  # as a name re-pointed at 127.0.0.1
    complete_a_run()
    work_until(lambda: Delivery.objects.filter(attempts=1).exists())
    assert receiver.received == []
    assert Delivery.objects.get().last_error.startswith("address refused")


def test_a_test_message_reaches_the_subscription(receiver: Receiver) -> None:
    subscription = subscribe(receiver, "run.stalled")
    events.subscription_test(subscription.pk)
    work_until(lambda: receiver.received)
    assert receiver.received[0].json["type"] == "webhook.test"
    assert receiver.received[0].verified


def test_a_delivery_claimed_by_one_worker_is_not_tried_by_another(receiver: Receiver) -> None:
    subscribe(receiver, "run.completed")
    complete_a_run()
    worker.fan_out()
    first, second = worker.claim(), worker.claim()
    assert (len(first), second) == (1, [])


def test_a_subscription_removed_during_a_try_does_not_stop_the_worker(
    receiver: Receiver,
) -> None:
    subscription = subscribe(receiver, "run.completed")
    complete_a_run()
    worker.fan_out()
    [item] = worker.claim()
    events.subscription_remove(subscription.pk)
    worker.record(item, worker.delivery.attempt(item.event, item.subscription))
    assert not Delivery.objects.exists()


def test_workers_claiming_at_once_never_take_the_same_delivery(receiver: Receiver) -> None:
    """Four workers (threads, each on its own connection) claim 60 deliveries at once:
    each delivery is claimed exactly once (on PostgreSQL through SKIP LOCKED)."""
    import threading

    from django.db import connection

    subscribe(receiver, "run.completed")
    for _ in range(60):
        complete_a_run()
    worker.fan_out()
    worker.fan_out()
    claimed: list[list[int]] = [[] for _ in range(4)]
    start = threading.Barrier(4)

    def claim_all(into: list[int]) -> None:
        start.wait()
        try:
            while batch := worker.claim(limit=5):
                into.extend(item.pk for item in batch)
        finally:
            connection.close()

    threads = [threading.Thread(target=claim_all, args=(mine,)) for mine in claimed]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [pk for mine in claimed for pk in mine]
    assert sorted(every) == sorted(Delivery.objects.values_list("pk", flat=True))
    assert len(every) == 60


def niceness(thread: threading.Thread) -> int:
    """A thread's CPU niceness, as the kernel has it (Linux: one per thread)."""
    fields = Path(f"/proc/self/task/{thread.native_id}/stat").read_text().rsplit(")", 1)[1]
    return int(fields.split()[16])


def test_a_supervisors_worker_delivers_from_threads_at_a_lower_cpu_priority(
    receiver: Receiver, settings: Any
) -> None:
    """With --workers N the worker runs in the supervisor, which serves no call: its threads
    yield the cores to the workers that do (ADR 0077), and still deliver."""
    settings.GUIDEPOST_WEBHOOK_POLL = 0.05
    subscribe(receiver, "run.completed")
    complete_a_run()
    # Below this process's own priority whatever it runs at (a test run may be niced).
    lower = min(19, niceness(threading.current_thread()) + 5)
    stop = start_webhooks(niceness=lower)
    try:
        receiver.wait_for(1)
        delivering = [t for t in threading.enumerate() if t.name.startswith("guidepost-webhook")]
        assert {t.name.split("_")[0] for t in delivering} == {
            "guidepost-webhooks",  # the loop
            "guidepost-webhook",  # the pool that posted (its threads inherit the loop's)
        }
        assert {niceness(t) for t in delivering} == {lower}
    finally:
        stop.set()
