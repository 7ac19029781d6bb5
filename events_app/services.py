"""Events and subscriptions: the one way anything records an event.

``event_record`` is called inside the transaction of the change it reports (a step of a
run, a decision on a draft): it adds ONE INSERT to that transaction, and only when some
subscription wants the kind, so the event commits or rolls back with the change. Which
kinds are wanted is read from the database at most once per ``GUIDEPOST_EVENTS_CACHE``
seconds per process (at once in the process that changes a subscription): a subscription
added elsewhere receives events from at most that many seconds after it is added.

Delivery is the worker's (``events_app.worker``), never the request's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from events_app.addresses import AddressRefused, resolve, url_problem
from events_app.models import Delivery, Event, Subscription, new_secret
from flowcore.common.errors import InvalidInput, NotFound

RUN_EVENTS = ("run.stalled", "run.resumed", "run.completed", "run.closed", "run.looked_up")
DRAFT_EVENTS = ("draft.submitted", "draft.approved", "draft.discarded")
EVENT_KINDS = (*RUN_EVENTS, *DRAFT_EVENTS)


@dataclass(frozen=True)
class Pending:
    """An event about to be recorded: its kind, its data and, for a run, the run's values,
    kept apart (only subscriptions with include_values receive them)."""

    kind: str
    data: Mapping[str, Any]
    values: Mapping[str, Any] | None = None


# --- which kinds some subscription wants: per process, for GUIDEPOST_EVENTS_CACHE seconds --------

_lock = threading.Lock()
_wanted: list[tuple[float, frozenset[str]]] = []


def kinds_wanted() -> frozenset[str]:
    """The event kinds at least one subscription wants (one query when not cached)."""
    if _wanted and time.monotonic() - _wanted[0][0] < settings.GUIDEPOST_EVENTS_CACHE:
        return _wanted[0][1]
    kinds = frozenset(
        kind for events in Subscription.objects.values_list("events", flat=True) for kind in events
    )
    with _lock:
        _wanted[:] = [(time.monotonic(), kinds)]
    return kinds


def forget_subscriptions(**_: object) -> None:
    """Read the subscriptions again at the next event (a subscription changed here)."""
    with _lock:
        _wanted.clear()


post_save.connect(forget_subscriptions, sender=Subscription, dispatch_uid="events_forget_save")
post_delete.connect(forget_subscriptions, sender=Subscription, dispatch_uid="events_forget_del")


def event_record(
    kind: str, data: Mapping[str, Any], *, values: Mapping[str, Any] | None = None
) -> bool:
    """Record one event in the caller's transaction (see ``events_record``). Returns whether
    it was recorded (False: no subscription wants ``kind``)."""
    return bool(events_record([Pending(kind, data, values)]))


def events_record(pending: Iterable[Pending], *, now: datetime | None = None) -> int:
    """Record the events some subscription wants, in the caller's transaction: one INSERT
    for all of them, none when no subscription wants any. Returns how many were recorded.

    Call it inside the transaction of the change the events report (``transaction.atomic``
    or a service's own): then an event exists exactly when the change committed.
    """
    wanted = kinds_wanted()
    rows = [p for p in pending if p.kind in wanted]
    for p in rows:
        if p.kind not in EVENT_KINDS:
            raise ValueError(f"unknown event kind {p.kind!r}")
    if not rows:
        return 0
    at = now or timezone.now()
    Event.objects.bulk_create(
        [
            Event(
                kind=p.kind,
                data=dict(p.data),
                values=dict(p.values) if p.values is not None else None,
                created_at=at,
            )
            for p in rows
        ]
    )
    return len(rows)


# --- subscriptions -------------------------------------------------------------------------------


def subscription_add(
    *,
    url: str,
    events: Iterable[str],
    include_values: bool = False,
    format: str = Subscription.Format.STANDARD,
    created_by: str = "",
) -> Subscription:
    """Subscribe ``url`` to ``events``. Raises InvalidInput for an unknown kind or format,
    no kind at all, or a URL that is not allowed (not http(s), not resolving, or on a
    private or loopback address without GUIDEPOST_WEBHOOK_ALLOW_PRIVATE)."""
    kinds = list(dict.fromkeys(e.strip() for e in events if e.strip()))
    unknown = [k for k in kinds if k not in EVENT_KINDS]
    if unknown or not kinds:
        raise InvalidInput(
            "unknown event" if unknown else "no events",
            f"{', '.join(unknown)} is not an event" if unknown else "no event was named",
            f"Name one or more of: {', '.join(EVENT_KINDS)}.",
        )
    if format not in Subscription.Format.values:
        raise InvalidInput(
            "unknown format",
            f"{format} is not a format",
            "Use standard (signed JSON) or slack (a Slack or Teams incoming webhook).",
        )
    url_refused(url)
    return Subscription.objects.create(
        url=url,
        events=kinds,
        include_values=include_values,
        format=format,
        created_by=created_by,
    )


def url_refused(url: str, *, what: str = "webhook", of: str = "the receiver") -> None:
    """Raise InvalidInput when ``url`` may not receive webhooks, or be a lookup's endpoint
    (``what``, ``of``): the same guard, ``events_app.addresses``."""
    problem = url_problem(url)
    try:
        if problem is None:
            resolve(url)
    except AddressRefused as exc:
        problem = str(exc)
    if problem:
        raise InvalidInput(f"{what} URL refused", problem, f"Give a public https:// URL of {of}.")


def subscription_remove(subscription_id: int) -> None:
    """Remove a subscription and its deliveries. Raises NotFound."""
    deleted, _ = Subscription.objects.filter(pk=subscription_id).delete()
    if not deleted:
        raise _no_subscription(subscription_id)


def subscription_get(subscription_id: int) -> Subscription:
    found = Subscription.objects.filter(pk=subscription_id).first()
    if found is None:
        raise _no_subscription(subscription_id)
    return found


def _no_subscription(subscription_id: int) -> NotFound:
    return NotFound(
        "subscription not found",
        f"no subscription has id {subscription_id}",
        "List them with guidepost-mcp webhook list.",
    )


def subscription_rotate(subscription_id: int, *, now: datetime | None = None) -> Subscription:
    """Give a subscription a new secret (to be shown once). The one it had signs beside it
    for GUIDEPOST_WEBHOOK_SECRET_GRACE seconds, so its receiver switches over without
    refusing a delivery; an older one still in its grace period stops signing now.
    Raises NotFound."""
    now = now or timezone.now()
    grace = settings.GUIDEPOST_WEBHOOK_SECRET_GRACE
    with transaction.atomic():
        subscription = Subscription.objects.select_for_update().filter(pk=subscription_id).first()
        if subscription is None:
            raise _no_subscription(subscription_id)
        subscription.previous_secret = subscription.secret if grace > 0 else ""
        subscription.previous_secret_until = now + timedelta(seconds=grace) if grace > 0 else None
        subscription.secret = new_secret()
        subscription.save(update_fields=["secret", "previous_secret", "previous_secret_until"])
    return subscription


def subscriptions_forget_old_secrets(now: datetime | None = None) -> int:
    """Clear the old secrets whose grace period is over: a secret that signs nothing any
    more is not kept. How many subscriptions changed."""
    ended = Subscription.objects.filter(previous_secret_until__lte=now or timezone.now())
    if not ended.exists():  # a read: the worker calls this every tick, and rarely finds any
        return 0
    return ended.update(previous_secret="", previous_secret_until=None)


def subscription_test(subscription_id: int) -> Delivery:
    """Queue a test event (``webhook.test``) for one subscription; the worker delivers it
    like any other. Raises NotFound."""
    subscription = subscription_get(subscription_id)
    now = timezone.now()
    with transaction.atomic():
        event = Event.objects.create(
            kind="webhook.test",
            data={"subscription": subscription.pk, "url": "/"},
            created_at=now,
            fanned_out=True,
        )
        return Delivery.objects.create(
            event=event, subscription=subscription, next_attempt_at=now, retry_since=now
        )


def subscriptions_last_tries(subscriptions: Iterable[Subscription]) -> dict[int, Delivery]:
    """Each subscription's delivery tried last, by subscription id: one query. A
    subscription nothing was tried for yet has none."""
    tried = (
        Delivery.objects.filter(subscription__in=list(subscriptions), attempts__gt=0)
        .order_by("subscription_id", "-last_attempt_at", "-id")
        .only("subscription_id", "state", "last_status", "last_error", "last_attempt_at")
    )
    last: dict[int, Delivery] = {}
    for item in tried:
        last.setdefault(item.subscription_id, item)
    return last


def last_try_line(item: Delivery | None) -> str:
    """A subscription's last try as a person reads it, with why it failed: a refused
    address says so here, not only in the server's log."""
    if item is None:
        return "no delivery yet"
    line = f"last try {item.state}, HTTP {item.last_status or '-'}"
    return f"{line}: {item.last_error}" if item.last_error else line


def deliveries_redeliver(ids: Iterable[int]) -> int:
    """Try these deliveries again now, as the next try of the same message (the same
    ``webhook-id``), with a fresh day of retries. Returns how many."""
    now = timezone.now()
    return Delivery.objects.filter(pk__in=list(ids)).update(
        state=Delivery.State.PENDING, next_attempt_at=now, retry_since=now, delivered_at=None
    )


# What an erased run's events keep (their data without what a person said): the run, its
# flow, where it was and how it ended.
_KEPT_OF_AN_ERASED_RUN = ("run_id", "flow", "state", "node", "outcome", "url")


def events_erase_runs(run_ids: Sequence[str]) -> int:
    """Erase what the events of the runs ``run_ids`` hold of what a person said (their
    values, ``ref``, a stall's ``reason`` and ``handoff``, a close's ``reason``), in the
    caller's transaction; a delivery still to be made sends what is left, with
    ``"erased": true``. How many events changed (docs/privacy.md)."""
    changed = 0
    for event in Event.objects.filter(data__run_id__in=list(run_ids)).only("pk", "data"):
        kept = {key: event.data[key] for key in _KEPT_OF_AN_ERASED_RUN if key in event.data}
        Event.objects.filter(pk=event.pk).update(data={**kept, "erased": True}, values=None)
        changed += 1
    return changed


def events_prune(*, before: datetime) -> int:
    """Delete the events recorded before ``before``, with their deliveries (retention keeps
    them no longer than the runs they report). How many events were deleted."""
    deleted, by_model = Event.objects.filter(created_at__lt=before).delete()
    return by_model.get(Event._meta.label, 0)
