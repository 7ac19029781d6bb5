"""Failure accounting: contract section 7's ``attempt`` and ``repeated`` (ADR 0020).

Failures are counted per caller, in streaks. A streak is the caller's run of
failed calls on one run (the run the call names, when it exists) or on no run;
a failed call in another scope starts a new streak, and any accepted call of the
caller, read-only ones included, ends it (the dispatcher calls ``failures_clear``).

Within a streak, ``attempt`` counts the calls that failed with the same ``error``
as this one. A call that fails with a different error fixed what the previous
error named: that is progress, not a retry, so honest learning mistakes (a
choice sent to a collect, then a value that is not a string) each start at 1.
Repeating a mistake, even with other mistakes in between, climbs to the give-up
point (``FAILURES_BEFORE_GIVING_UP``), so no loop goes on for ever.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from runs_app.callers import Caller
from runs_app.models import FailureStreak
from runs_app.selectors import run_visible


@dataclass(frozen=True)
class FailureCount:
    attempt: int  # calls of the streak that failed with this error, this one included
    repeated: bool  # the same call failed just before
    on_run: bool  # the streak is on the run the call named (else on no run)


def call_signature(tool: str, arguments: Mapping[str, Any]) -> str:
    """What identifies "the same call": the tool and its arguments."""
    text = json.dumps([tool, arguments], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def failure_record(*, caller: Caller, run_id: object, signature: str, error: str) -> FailureCount:
    """Count a failed call of ``caller`` that failed with ``error``.

    The streak is on the run ``run_id`` names when that run exists and the caller may see
    it, else on no run: a run of another key's counts as no run, as it does for
    ``run_get``, so the count tells nothing about runs the caller cannot see.
    """
    scope = run_id if isinstance(run_id, str) and run_visible(caller, run_id) else ""
    now = timezone.now()
    with transaction.atomic(savepoint=False):
        streak, _ = FailureStreak.objects.select_for_update().get_or_create(
            caller=caller.key, defaults={"updated_at": now}
        )
        if streak.failures == 0 or streak.scope != scope:  # a new streak
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


def failures_clear(caller: Caller) -> None:
    """An accepted call of ``caller``: its failure streak is over."""
    streak = FailureStreak.objects.filter(caller=caller.key, failures__gt=0)
    if streak.exists():  # a read, so the common case takes no write lock
        streak.update(failures=0, by_error={}, last_failure="", scope="")
