"""The delivery worker's tick, over the outbox; ``serve`` runs it in a loop of its own
(``guidepost.loops``), as does ``guidepost-mcp worker``: any number of them on one
database.

Each tick: record what the lanes that finished tried, forget the old secrets whose grace
period after a rotation is over, fan new events out into one delivery per subscription
that wants the kind, claim the deliveries that are due for the lanes free, and start
them. A lane is one subscription's: it tries that subscription's claimed deliveries one
after another, in a thread of its own (up to GUIDEPOST_WEBHOOK_CONCURRENCY lanes at
once), and a subscription this process has a lane for is not claimed again until the
lane ends. So a receiver that holds each try to its deadline delays its own deliveries,
never another subscription's. A claim moves the delivery's next try
GUIDEPOST_WEBHOOK_LEASE seconds ahead, in the transaction that read it (on PostgreSQL
with ``FOR UPDATE SKIP LOCKED``; on SQLite the transaction is IMMEDIATE, so it holds the
write lock from its start), so two workers never try it at once; a lane claims no more
than its tries, each ending by its deadline, can make within that lease; a worker killed
mid-try leaves it to be tried again when the lease runs out (at least once, never lost).

Retries back off exponentially: GUIDEPOST_WEBHOOK_RETRY_BASE seconds after the first
failure, doubling up to GUIDEPOST_WEBHOOK_RETRY_MAX, for GUIDEPOST_WEBHOOK_RETRY_FOR
seconds (a day); then the delivery is failed, and the admin can redeliver it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection
from concurrent.futures import Future, ThreadPoolExecutor
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
LANE_TRIES = 10  # deliveries a lane claims at most at once

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
    new = Event.objects.filter(fanned_out=False)
    if not new.exists():  # nothing new, the common case: no transaction (as in claim)
        return 0
    with transaction.atomic():
        events = list(_skip_locked(new.order_by("pk"))[:BATCH])
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


def claim(
    now: datetime | None = None,
    *,
    limit: int = BATCH,
    skip: Collection[int] = (),
    lanes: int | None = None,
) -> list[Delivery]:
    """The deliveries due now, each claimed for GUIDEPOST_WEBHOOK_LEASE seconds: read and
    moved on in one transaction (on PostgreSQL the rows read are locked, and those another
    worker holds skipped; on SQLite the transaction holds the database's write lock), so
    no two workers claim the same delivery. None of the subscriptions in ``skip``; with
    ``lanes``, those of at most that many subscriptions, ``lane_size()`` each at most."""
    now = now or timezone.now()
    lease = now + timedelta(seconds=settings.GUIDEPOST_WEBHOOK_LEASE)
    pending = Delivery.objects.filter(
        state=Delivery.State.PENDING, next_attempt_at__lte=now
    ).exclude(subscription_id__in=list(skip))
    # Nothing due is the common case: read first, without the transaction, which on SQLite
    # takes the database's one write lock that the agents' steps wait for.
    if not pending.exists():
        return []
    with transaction.atomic():
        due = list(
            _skip_locked(
                pending.select_related("event", "subscription").order_by("next_attempt_at")
            )[:limit]
        )
        if lanes is not None:
            due = [item for group in _by_subscription(due)[:lanes] for item in group]
        if due:
            Delivery.objects.filter(pk__in=[item.pk for item in due]).update(next_attempt_at=lease)
    return due


def lane_size() -> int:
    """How many deliveries a lane claims at once: no more than it can try within the
    claim's lease, each try taking GUIDEPOST_WEBHOOK_TIMEOUT at most (so no other worker
    claims one of them while it waits its turn); at least one, at most LANE_TRIES."""
    fits = int(settings.GUIDEPOST_WEBHOOK_LEASE // settings.GUIDEPOST_WEBHOOK_TIMEOUT) - 1
    return max(1, min(LANE_TRIES, fits))


def _by_subscription(due: list[Delivery]) -> list[list[Delivery]]:
    """``due`` in lanes, one a subscription in the order of its first delivery due, each
    ``lane_size()`` at most."""
    size = lane_size()
    groups: dict[int, list[Delivery]] = {}
    for item in due:
        group = groups.setdefault(item.subscription_id, [])
        if len(group) < size:
            group.append(item)
    return list(groups.values())


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


type Tried = tuple[Delivery, delivery.Outcome]


def tick(lanes: Lanes | None = None) -> int:
    """One round: record what finished lanes tried, forget old secrets, fan out, claim for
    the free lanes and start them; returns how many deliveries it claimed. Without
    ``lanes``, the deliveries claimed are tried here, one after another, and recorded
    before it returns."""
    if lanes is None:
        services.subscriptions_forget_old_secrets()
        fan_out()
        due = claim()
        _record_all([(item, _try(item)) for item in due], [])
        return len(due)
    for tried, untried in lanes.finished():
        _record_all(tried, untried)
    services.subscriptions_forget_old_secrets()
    fan_out()
    if not lanes.free():
        return 0
    due = claim(skip=lanes.busy(), lanes=lanes.free())
    lanes.start(due)
    return len(due)


def _record_all(tried: list[Tried], untried: list[Delivery]) -> None:
    # One transaction for the outcomes, not one write each: on SQLite every write takes
    # the database's one writer, which the calls' steps wait for. Lost with it (the
    # database away), they are tried again once their lease runs out: at least once still.
    # What a stopped lane did not try is due again at once.
    with transaction.atomic():
        for item, outcome in tried:
            record(item, outcome)
        if untried:
            Delivery.objects.filter(pk__in=[item.pk for item in untried]).update(
                next_attempt_at=timezone.now()
            )
    for item, outcome in tried:
        # Under the id of the request that recorded the event (its access line's).
        said = {"request_id": item.event.request_id}
        event, url = item.event.message_id, item.subscription.url
        if outcome.ok:
            logger.debug("webhook %s to %s: delivered, %s", event, url, outcome.status, extra=said)
        else:
            logger.info("webhook %s to %s: %s", event, url, outcome.error, extra=said)


class Lanes:
    """This process's lanes: one a subscription, each trying its claimed deliveries one
    after another in a thread of a pool of ``threads``. Only the loop's thread claims and
    records; the lanes' threads only make HTTP requests."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._pool = ThreadPoolExecutor(threads, "guidepost-webhook")
        self._running: dict[int, tuple[list[Delivery], Future[list[Tried]]]] = {}
        self._ended = threading.Event()  # a lane ended since ``wait`` last returned
        self._stopping = threading.Event()

    def busy(self) -> list[int]:
        """The subscriptions with a lane running."""
        return list(self._running)

    def free(self) -> int:
        return self.threads - len(self._running)

    def start(self, due: list[Delivery]) -> None:
        for group in _by_subscription(due):
            lane = self._pool.submit(_lane, group, self._stopping)
            lane.add_done_callback(lambda _: self._ended.set())
            self._running[group[0].subscription_id] = (group, lane)

    def finished(self) -> list[tuple[list[Tried], list[Delivery]]]:
        """What each lane that ended tried, and what it left untried (it was stopped)."""
        ended = []
        for subscription, (group, lane) in list(self._running.items()):
            if lane.done():
                del self._running[subscription]
                try:
                    tried = lane.result()
                except Exception:  # a bug: its deliveries wait for their lease to run out
                    logger.exception("a webhook lane failed")
                    continue
                ended.append((tried, group[len(tried) :]))
        return ended

    def wait(self, timeout: float) -> bool:
        """Wait until a lane ends, ``timeout`` seconds at most; False at once if none runs."""
        if not self._running:
            return False
        self._ended.wait(timeout)
        self._ended.clear()
        return True

    def stop(self) -> list[tuple[list[Tried], list[Delivery]]]:
        """End every lane after its try under way (a try ends by its deadline), and return
        what they tried and left, for the caller to record."""
        self._stopping.set()
        self._pool.shutdown(wait=True)
        return self.finished()


def lanes_stop(lanes: Lanes) -> None:
    """Stop ``lanes`` and record what they tried (the database away: tried again once the
    claims' lease runs out)."""
    for tried, untried in lanes.stop():
        _record_all(tried, untried)


def _lane(group: list[Delivery], stopping: threading.Event) -> list[Tried]:
    tried = []
    for item in group:
        if stopping.is_set():
            break
        tried.append((item, _try(item)))
    return tried


def _try(item: Delivery) -> delivery.Outcome:
    try:
        return delivery.attempt(item.event, item.subscription)
    except Exception as exc:  # a bug must not stop the worker; the try counts as failed
        logger.exception("webhook try failed")
        return delivery.Outcome(False, None, None, f"{type(exc).__name__}")
