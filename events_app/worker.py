"""The delivery worker's tick, over the outbox; ``serve`` runs it in a loop of its own
(``guidepost.loops``), as does ``guidepost-mcp worker``: any number of them on one
database.

Each tick: forget the old secrets whose grace period after a rotation is over, fan new
events out into one delivery per subscription that wants the kind, claim the deliveries
that are due, try them (a few at a time, in threads), and record each outcome. A claim
moves the delivery's next try GUIDEPOST_WEBHOOK_LEASE seconds ahead, in the transaction
that read it (on PostgreSQL with ``FOR UPDATE SKIP LOCKED``; on SQLite the transaction is
IMMEDIATE, so it holds the write lock from its start), so two workers never try it at
once; a worker killed mid-try leaves it to be tried again when the lease runs out (at
least once, never lost).

Retries back off exponentially: GUIDEPOST_WEBHOOK_RETRY_BASE seconds after the first
failure, doubling up to GUIDEPOST_WEBHOOK_RETRY_MAX, for GUIDEPOST_WEBHOOK_RETRY_FOR
seconds (a day); then the delivery is failed, and the admin can redeliver it.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Model, QuerySet
from django.utils import timezone
from prometheus_client import Counter

from events_app import delivery, services
from events_app.models import Delivery, Event, Subscription

logger = logging.getLogger(__name__)

BATCH = 50  # events fanned out, or deliveries claimed, per statement

# Deliveries by result, for /metrics; every result exists at zero until one happens.
RESULTS = ("delivered", "failed", "gave up")
DELIVERIES = Counter(
    "guidepost_webhook_deliveries",
    "Webhook deliveries by result: delivered, failed (to be retried), gave up",
    ["result"],
)
for _result in RESULTS:
    DELIVERIES.labels(result=_result)


def fan_out(now: datetime | None = None) -> int:
    """One delivery per (new event, subscription that wants its kind); returns how many."""
    now = now or timezone.now()
    with transaction.atomic():
        events = list(_skip_locked(Event.objects.filter(fanned_out=False).order_by("pk"))[:BATCH])
        if not events:
            return 0
        subscriptions = list(Subscription.objects.all())
        deliveries = [
            Delivery(
                event=event, subscription=sub, next_attempt_at=now, retry_since=event.created_at
            )
            for event in events
            for sub in subscriptions
            if event.kind in sub.events
        ]
        Delivery.objects.bulk_create(deliveries, ignore_conflicts=True)
        Event.objects.filter(pk__in=[e.pk for e in events]).update(fanned_out=True)
    return len(deliveries)


def claim(now: datetime | None = None, *, limit: int = BATCH) -> list[Delivery]:
    """The deliveries due now, each claimed for GUIDEPOST_WEBHOOK_LEASE seconds: read and
    moved on in one transaction (on PostgreSQL the rows read are locked, and those another
    worker holds skipped; on SQLite the transaction holds the database's write lock), so
    no two workers claim the same delivery."""
    now = now or timezone.now()
    lease = now + timedelta(seconds=settings.GUIDEPOST_WEBHOOK_LEASE)
    with transaction.atomic():
        due = list(
            _skip_locked(
                Delivery.objects.filter(state=Delivery.State.PENDING, next_attempt_at__lte=now)
                .select_related("event", "subscription")
                .order_by("next_attempt_at")
            )[:limit]
        )
        if due:
            Delivery.objects.filter(pk__in=[item.pk for item in due]).update(next_attempt_at=lease)
    return due


def _skip_locked[M: Model](queryset: QuerySet[M]) -> QuerySet[M]:
    if connection.vendor == "postgresql":
        return queryset.select_for_update(skip_locked=True, of=("self",))
    return queryset


def backoff(attempts: int) -> float:
    """Seconds to wait after the ``attempts``-th failed try."""
    base = settings.GUIDEPOST_WEBHOOK_RETRY_BASE
    return float(min(base * 2 ** (attempts - 1), settings.GUIDEPOST_WEBHOOK_RETRY_MAX))


def record(item: Delivery, outcome: delivery.Outcome, now: datetime | None = None) -> None:
    """Record one try's outcome: delivered, or the next try (or failed after a day)."""
    now = now or timezone.now()
    item.attempts += 1
    item.last_status = outcome.status
    item.last_response_ms = outcome.response_ms
    item.last_error = outcome.error
    item.last_attempt_at = now
    if outcome.ok:
        item.state = Delivery.State.DELIVERED
        item.delivered_at = now
        DELIVERIES.labels(result="delivered").inc()
    else:
        retry_at = now + timedelta(seconds=backoff(item.attempts))
        gives_up = item.retry_since + timedelta(seconds=settings.GUIDEPOST_WEBHOOK_RETRY_FOR)
        if retry_at > gives_up:
            item.state = Delivery.State.FAILED
        item.next_attempt_at = retry_at
        DELIVERIES.labels(result="gave up" if retry_at > gives_up else "failed").inc()
    # An UPDATE by id: a subscription removed during the try took its deliveries with it.
    Delivery.objects.filter(pk=item.pk).update(
        attempts=item.attempts,
        last_status=item.last_status,
        last_response_ms=item.last_response_ms,
        last_error=item.last_error,
        last_attempt_at=item.last_attempt_at,
        state=item.state,
        delivered_at=item.delivered_at,
        next_attempt_at=item.next_attempt_at,
    )


def tick(pool: ThreadPoolExecutor | None = None) -> int:
    """One round: forget old secrets, fan out, claim, try, record. Returns how many tries
    were made."""
    services.subscriptions_forget_old_secrets()
    fan_out()
    due = claim()
    if not due:
        return 0
    tries = (
        pool.map(_try, due) if pool is not None else map(_try, due)
    )  # HTTP in threads; the database only here
    outcomes = list(zip(due, tries, strict=True))
    # One transaction for the tick's outcomes, not one write each: on SQLite every write
    # takes the database's one writer, which the calls' steps wait for. Lost with it (the
    # database away), they are tried again once their lease runs out: at least once still.
    with transaction.atomic():
        for item, outcome in outcomes:
            record(item, outcome)
    for item, outcome in outcomes:
        if not outcome.ok:
            logger.info(
                "webhook %s to %s: %s", item.event.message_id, item.subscription.url, outcome.error
            )
    return len(due)


def _try(item: Delivery) -> delivery.Outcome:
    try:
        return delivery.attempt(item.event, item.subscription)
    except Exception as exc:  # a bug must not stop the worker; the try counts as failed
        logger.exception("webhook try failed")
        return delivery.Outcome(False, None, None, f"{type(exc).__name__}")
