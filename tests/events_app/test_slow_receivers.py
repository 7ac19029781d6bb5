"""One slow receiver holds up nobody (issue 48, point 3): a try has one deadline for the
whole exchange, GUIDEPOST_WEBHOOK_TIMEOUT seconds from connecting to the answer's end, and
each subscription is delivered in a lane of its own.

A slow loris sent a header line every 3 s and held a try for 120 s (the time-out applied
to each read); the try was recorded `delivered`, and every other subscription's events
waited for it (one 55 s late)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from access_app.callers import Caller
from events_app import services as events
from events_app.models import Delivery, Subscription
from guidepost.loops import start_webhooks
from runs_app import agent_steps
from tests.support.receiver import Receiver, receiving
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.hostile]

CALLER = Caller(key="test:slow-receivers", name="pytest")
DEADLINE = 3.0  # seconds a try has in all, here
# The fast subscription's event arrives within this of being recorded: well inside the
# slow try's deadline, so it did not wait for that try to end.
PROMPTLY = DEADLINE / 2


@pytest.fixture(autouse=True)
def deadline(settings: Any) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = True  # the receivers are on 127.0.0.1
    settings.GUIDEPOST_WEBHOOK_TIMEOUT = DEADLINE
    settings.GUIDEPOST_WEBHOOK_POLL = 0.05
    # The slow one's failed try is not tried again within the test.
    settings.GUIDEPOST_WEBHOOK_RETRY_BASE = settings.GUIDEPOST_WEBHOOK_RETRY_MAX = 3600.0
    events.forget_subscriptions()


def subscribe(receiver: Receiver) -> Subscription:
    subscription = events.subscription_add(url=receiver.url, events=["run.completed"])
    receiver.secret = subscription.secret
    return subscription


def complete_a_run() -> None:
    run_id = agent_steps.run_start(
        caller=CALLER, flow_id="refund_request", values={"order_number": "A00118"}, ref=None
    )["run_id"]
    for choice in ("wrong_item", "credit"):
        agent_steps.run_answer(caller=CALLER, run_id=run_id, choice=choice, values=None, at=None)


def recorded_try(subscription: Subscription, timeout: float) -> Delivery:
    [delivery] = wait_until(
        lambda: list(Delivery.objects.filter(subscription=subscription, attempts__gte=1)),
        timeout=timeout,
        interval=0.05,
        message="the try was not recorded",
    )
    return delivery


def test_a_slow_loris_fails_at_the_deadline_and_delays_no_other_subscription() -> None:
    with (
        receiving(drip=0.25, drip_for=4 * DEADLINE) as slow,
        receiving() as fast,
    ):
        held, quick = subscribe(slow), subscribe(fast)
        stop = start_webhooks()
        try:
            complete_a_run()
            slow.wait_for(1, timeout=10)  # its try is under way, held a header line at a time
            fast.wait_for(1, timeout=10)
            recorded = time.monotonic()
            complete_a_run()
            second = fast.wait_for(2, timeout=4 * DEADLINE)[1]
            slow_try = recorded_try(held, timeout=4 * DEADLINE)
            ended = time.monotonic()
        finally:
            stop.set()
            # It ends once its lanes' tries under way end, by their deadline at the latest.
            for thread in threading.enumerate():
                if thread.name == "guidepost-webhooks":
                    thread.join(timeout=DEADLINE + 2)
                    assert not thread.is_alive()

    assert second.at - recorded < PROMPTLY, "the fast subscription waited for the slow one"
    assert (slow_try.state, slow_try.attempts, slow_try.last_status) == ("pending", 1, None)
    assert "timed out" in slow_try.last_error
    assert slow_try.last_response_ms is not None
    assert DEADLINE * 1000 <= slow_try.last_response_ms < (DEADLINE + 1) * 1000
    assert ended - slow.received[0].at < DEADLINE + 2, "recorded once its deadline passed"
    assert Delivery.objects.filter(subscription=quick, state="delivered").count() == 2
