"""Failure accounting: the error object's ``attempt`` and ``repeated``.

Failures are counted per caller, in streaks on one run or on no run: a failure in another
scope starts a new streak, and any accepted call ends it (found through its audit record,
so the accepted path writes nothing for it). ``attempt`` counts the streak's failures
with the same ``error``: a different error is progress, not a retry, while a repeated
mistake climbs to FAILURES_BEFORE_GIVING_UP, so no loop goes on for ever. When the
database itself fails, the streak is counted in this process (``LocalStreaks``); a
rate-limited call is never counted, as it is not the caller's mistake.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

from access_app.audit import RESOURCE_READ
from access_app.callers import Caller
from access_app.models import AuditRecord, FailureStreak
from flowcore.common.limits import LOCAL_STREAKS, MAX_ID_LENGTH
from flowcore.common.text import control_character

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FailureCount:
    attempt: int  # calls of the streak that failed with this error, this one included
    repeated: bool  # the same call failed just before
    on_run: bool  # the streak is on the run the call named (else on no run)


def call_signature(tool: str, arguments: Mapping[str, Any]) -> str:
    """What identifies "the same call": the tool and its arguments."""
    text = json.dumps([tool, arguments], sort_keys=True, ensure_ascii=False, default=str)
    # surrogatepass: a lone surrogate (refused, but still counted) must not fail the count
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


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
    stored: bool = True,
) -> FailureCount:
    """Count a failed call of ``caller`` that failed with ``error``.

    The streak is on the run ``run_id`` names when that run exists and the caller may see
    it (``run_visible``), else on no run: a run of another key's counts as no run, as it
    does for ``run_get``, so the count tells nothing about runs the caller cannot see.
    ``stored=False`` (the database is the reason the call failed), or a database that
    fails now, counts it in this process instead. Never raises a database error.
    """
    if stored:
        try:
            return _record_stored(caller, run_id, signature, error, run_visible)
        except DatabaseError as exc:
            logger.warning("failure streak counted in this process: %s", str(exc)[:200])
    return local_streaks.record(caller.key, _plausible_run_id(run_id) or "", signature, error)


def _record_stored(
    caller: Caller, run_id: object, signature: str, error: str, run_visible: RunVisible
) -> FailureCount:
    plausible = _plausible_run_id(run_id)
    scope = plausible if plausible is not None and run_visible(caller, plausible) else ""
    now = timezone.now()
    with transaction.atomic(savepoint=False):
        streak, _ = FailureStreak.objects.select_for_update().get_or_create(
            caller=caller.key, defaults={"updated_at": now}
        )
        if streak.failures == 0 or streak.scope != scope or _accepted_since(caller, streak):
            streak.scope = scope
            streak.failures = 0
            streak.by_error = {}
            streak.last_failure = ""
        repeated = streak.last_failure == signature
        attempt = int(streak.by_error.get(error, 0)) + 1
        streak.failures += 1
        streak.by_error = {**streak.by_error, error: attempt}
        streak.last_failure = signature
        streak.updated_at = now
        streak.save()
    return FailureCount(attempt, repeated, on_run=bool(scope))


def _accepted_since(caller: Caller, streak: FailureStreak) -> bool:
    """Whether ``caller`` made an accepted tool call or resource read after the streak's
    last failure (its audit record says so): then the streak is over and this failure
    starts a new one."""
    return (
        streak.failures > 0
        and AuditRecord.objects.filter(
            Q(tool__startswith="guide_") | Q(tool=RESOURCE_READ),
            caller=caller.key,
            at__gte=streak.updated_at,
            outcome="ok",
        ).exists()
    )


def failures_clear(caller: Caller) -> None:
    """An accepted call of ``caller``: its streak counted in this process is over (the
    stored one ends by the call's audit record, see ``_accepted_since``)."""
    local_streaks.clear(caller.key)


# --- when the database cannot hold the streak ---------------------------------------------


@dataclass
class _Streak:
    scope: str
    by_error: dict[str, int] = field(default_factory=dict)
    last_failure: str = ""


class LocalStreaks:
    """Failure streaks kept in this process, for failures the database cannot record.

    The same rules as the stored streaks; each worker counts its own, so with N workers
    a caller may fail up to N times more before every worker gives up. At most
    ``max_callers`` streaks are kept (the oldest is forgotten first).
    """

    def __init__(self, max_callers: int = LOCAL_STREAKS) -> None:
        self.max_callers = max_callers
        self._streaks: dict[str, _Streak] = {}
        self._lock = threading.Lock()

    def record(self, key: str, scope: str, signature: str, error: str) -> FailureCount:
        with self._lock:
            streak = self._streaks.pop(key, None)
            if streak is None or streak.scope != scope:
                streak = _Streak(scope)
            self._streaks[key] = streak  # the most recent last
            while len(self._streaks) > self.max_callers:
                del self._streaks[next(iter(self._streaks))]
            repeated = streak.last_failure == signature
            attempt = streak.by_error.get(error, 0) + 1
            streak.by_error[error] = attempt
            streak.last_failure = signature
        return FailureCount(attempt, repeated, on_run=bool(scope))

    def clear(self, key: str) -> None:
        with self._lock:
            self._streaks.pop(key, None)


local_streaks = LocalStreaks()
