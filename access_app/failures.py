"""Failure accounting: the error object's ``attempt`` and ``repeated``.

Failures are counted per conversation, in streaks: on the run a call names, else (a call
with no run: a start, a status of an unknown id) on the call's ``ref`` when it gives one,
else on the client's connection. One key serves many conversations, so one's mistakes
never count against another's. Any accepted call of the caller on the same run (for a
run), or any at all (for no run), ends the streak; it is found through the call's audit
record, so the accepted path writes nothing for it. ``attempt`` counts the streak's
failures with the same error (its ``error`` and its ``reason``): another error is
progress, not a retry, while a repeated mistake climbs to FAILURES_BEFORE_GIVING_UP.
Two loop breakers stand behind it: STREAK_FAILURES_BEFORE_GIVING_UP failures of one
streak whatever their errors, and KEY_FAILURES_BEFORE_GIVING_UP of the key across its
conversations with no call of it accepted in between. When the database itself fails,
the streaks are counted in this process (``LocalStreaks``); a rate-limited call is never
counted, as it is not the caller's mistake.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

from access_app.audit import RESOURCE_READ
from access_app.callers import Caller
from access_app.models import AuditRecord, FailureStreak
from flowcore.common.limits import (
    KEY_FAILURES_BEFORE_GIVING_UP,
    LOCAL_STREAKS,
    MAX_ID_LENGTH,
    STREAK_FAILURES_BEFORE_GIVING_UP,
    STREAK_IDLE_SECONDS,
)
from flowcore.common.text import control_character

logger = logging.getLogger(__name__)

# The scope of the key's own streak, across its conversations (no run id has it).
KEY_WIDE = "*"
_CONNECTION_SCOPE_LENGTH = 64


@dataclass(frozen=True)
class FailureCount:
    attempt: int  # calls of the streak that failed with this error, this one included
    repeated: bool  # the same call failed just before
    on_run: bool  # the streak is on the run the call named (else on no run)
    looping: bool = False  # a loop breaker tripped: too many failures, whatever the errors


@dataclass(frozen=True)
class Conversation:
    """What tells a call's conversation when it names no run it may see: its ``ref``,
    else its connection (the client's address and port, as the server saw them)."""

    ref: object = None
    connection: str = ""

    def scope(self) -> str:
        if isinstance(self.ref, str) and self.ref:
            digest = hashlib.sha256(self.ref.encode("utf-8", "surrogatepass")).hexdigest()
            return "ref:" + digest[:32]
        return ("conn:" + self.connection)[:_CONNECTION_SCOPE_LENGTH]


def call_signature(tool: str, arguments: Mapping[str, Any]) -> str:
    """What identifies "the same call": the tool and its arguments."""
    text = json.dumps([tool, arguments], sort_keys=True, ensure_ascii=False, default=str)
    # surrogatepass: a lone surrogate (refused, but still counted) must not fail the count
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def error_identity(error: str, reason: str) -> str:
    """What identifies "the same error": its few words and its reason (another line of a
    draft, another argument is another mistake, and fixing one is progress)."""
    text = json.dumps([error, reason], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _plausible_run_id(run_id: object) -> str | None:
    """``run_id`` if it could name a run at all (a query with a NUL fails on PostgreSQL)."""
    if isinstance(run_id, str) and 0 < len(run_id) <= MAX_ID_LENGTH:
        if control_character(run_id) is None:
            return run_id
    return None


# Whether a run id names a run the caller may see: runs_app.selectors.run_visible, passed
# in by the dispatcher (access knows nothing of runs).
RunVisible = Callable[[Caller, str], bool]


def failure_record(
    *,
    caller: Caller,
    run_id: object,
    signature: str,
    error: str,
    run_visible: RunVisible,
    conversation: Conversation = Conversation(),
    stored: bool = True,
) -> FailureCount:
    """Count a failed call of ``caller`` that failed with ``error`` (its identity,
    ``error_identity``).

    The streak is on the run ``run_id`` names when that run exists and the caller may see
    it (``run_visible``), else on the ``conversation``: a run of another key's counts as
    no run, as it does for ``run_get``, so the count tells nothing about runs the caller
    cannot see. ``stored=False`` (the database is the reason the call failed), or a
    database that fails now, counts it in this process instead. Never raises a database
    error.
    """
    if stored:
        try:
            return _record_stored(caller, run_id, signature, error, run_visible, conversation)
        except DatabaseError as exc:
            logger.warning("failure streak counted in this process: %s", str(exc)[:200])
    plausible = _plausible_run_id(run_id)
    scope = "run:" + plausible if plausible is not None else conversation.scope()
    return local_streaks.record(caller.key, scope, signature, error, on_run=plausible is not None)


def _record_stored(
    caller: Caller,
    run_id: object,
    signature: str,
    error: str,
    run_visible: RunVisible,
    conversation: Conversation,
) -> FailureCount:
    plausible = _plausible_run_id(run_id)
    on_run = plausible is not None and run_visible(caller, plausible)
    scope = plausible if on_run and plausible is not None else conversation.scope()
    now = timezone.now()
    with transaction.atomic(savepoint=False):
        streaks = FailureStreak.objects.select_for_update()
        mine, created = streaks.get_or_create(
            caller=caller.key, scope=scope, defaults={"updated_at": now}
        )
        key, _ = streaks.get_or_create(
            caller=caller.key, scope=KEY_WIDE, defaults={"updated_at": now}
        )
        if created:  # a new conversation: forget those long idle
            FailureStreak.objects.filter(
                caller=caller.key, updated_at__lt=now - timedelta(seconds=STREAK_IDLE_SECONDS)
            ).exclude(scope__in=(scope, KEY_WIDE)).delete()
        if mine.failures and _accepted_since(caller, mine.updated_at, scope if on_run else None):
            _restart(mine)
        if key.failures and _accepted_since(caller, key.updated_at, None):
            _restart(key)
        repeated = mine.last_failure == signature
        attempt = int(mine.by_error.get(error, 0)) + 1
        for streak in (mine, key):
            streak.failures += 1
            streak.last_failure = signature
            streak.updated_at = now
        mine.by_error = {**mine.by_error, error: attempt}
        mine.save()
        key.save()
    looping = (
        mine.failures >= STREAK_FAILURES_BEFORE_GIVING_UP
        or key.failures >= KEY_FAILURES_BEFORE_GIVING_UP
    )
    return FailureCount(attempt, repeated, on_run=on_run, looping=looping)


def _restart(streak: FailureStreak) -> None:
    streak.failures = 0
    streak.by_error = {}
    streak.last_failure = ""


def _accepted_since(caller: Caller, since: datetime, run_id: str | None) -> bool:
    """Whether ``caller`` made an accepted tool call or resource read at or after
    ``since`` (its audit record says so), on the run ``run_id`` when one is given: then
    the streak is over and this failure starts a new one."""
    accepted = AuditRecord.objects.filter(
        Q(tool__startswith="guide_") | Q(tool=RESOURCE_READ),
        caller=caller.key,
        at__gte=since,
        outcome="ok",
    )
    if run_id is not None:
        accepted = accepted.filter(run_id=run_id)
    return accepted.exists()


def failures_clear(caller: Caller) -> None:
    """An accepted call of ``caller``: its streaks counted in this process are over (the
    stored ones end by the call's audit record, see ``_accepted_since``)."""
    local_streaks.clear(caller.key)


# --- when the database cannot hold the streak ---------------------------------------------


@dataclass
class _Streak:
    failures: int = 0
    by_error: dict[str, int] = field(default_factory=dict)
    last_failure: str = ""


class LocalStreaks:
    """Failure streaks kept in this process, for failures the database cannot record.

    The same rules as the stored streaks, but that any accepted call of the caller ends
    all its streaks here; each worker counts its own, so with N workers a caller may
    fail up to N times more before every worker gives up. The streaks of at most
    ``max_callers`` callers are kept (the oldest caller is forgotten first).
    """

    def __init__(self, max_callers: int = LOCAL_STREAKS) -> None:
        self.max_callers = max_callers
        self._callers: dict[str, dict[str, _Streak]] = {}
        self._lock = threading.Lock()

    def record(
        self, key: str, scope: str, signature: str, error: str, *, on_run: bool
    ) -> FailureCount:
        with self._lock:
            streaks = self._callers.pop(key, None) or {}
            self._callers[key] = streaks  # the most recent last
            while len(self._callers) > self.max_callers:
                del self._callers[next(iter(self._callers))]
            mine = streaks.setdefault(scope, _Streak())
            everywhere = streaks.setdefault(KEY_WIDE, _Streak())
            repeated = mine.last_failure == signature
            attempt = mine.by_error.get(error, 0) + 1
            mine.by_error[error] = attempt
            for streak in (mine, everywhere):
                streak.failures += 1
                streak.last_failure = signature
            looping = (
                mine.failures >= STREAK_FAILURES_BEFORE_GIVING_UP
                or everywhere.failures >= KEY_FAILURES_BEFORE_GIVING_UP
            )
        return FailureCount(attempt, repeated, on_run=on_run, looping=looping)

    def clear(self, key: str) -> None:
        with self._lock:
            self._callers.pop(key, None)


local_streaks = LocalStreaks()
