"""Failure accounting (contract section 7's ``attempt`` and ``repeated``).

Failed calls are counted in a row: on the run a call names, or for the caller
when it names none. An accepted call on a run resets the run's count (see
``services._record``); an accepted call that names no run resets the caller's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from runs_app.callers import Caller
from runs_app.models import ClientFailures, Run


@dataclass(frozen=True)
class FailureCount:
    attempt: int  # failures in a row, this one included
    repeated: bool  # the same call failed just before
    on_run: bool  # counted on the run the call named (else for the caller)


def call_signature(tool: str, arguments: Mapping[str, Any]) -> str:
    """What identifies "the same call": the tool and its arguments."""
    text = json.dumps([tool, arguments], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def failure_record(*, caller: Caller, run_id: object, signature: str) -> FailureCount:
    """Count a failed call on the run ``run_id`` names, or for the caller when it names none."""
    with transaction.atomic():
        run = (
            Run.objects.select_for_update().filter(public_id=run_id).first()
            if isinstance(run_id, str)
            else None
        )
        if run is not None:
            repeated = run.last_failure == signature
            Run.objects.filter(pk=run.pk).update(failures=F("failures") + 1, last_failure=signature)
            return FailureCount(run.failures + 1, repeated, on_run=True)
        row, _ = ClientFailures.objects.select_for_update().get_or_create(
            client=caller.key, defaults={"updated_at": timezone.now()}
        )
        repeated = row.last_failure == signature
        row.failures += 1
        row.last_failure = signature
        row.updated_at = timezone.now()
        row.save()
        return FailureCount(row.failures, repeated, on_run=False)


def failures_clear(caller: Caller) -> None:
    """A call that named no run succeeded: the caller's failure streak is over."""
    streak = ClientFailures.objects.filter(client=caller.key, failures__gt=0)
    if streak.exists():  # a read, so the common case takes no write lock
        streak.update(failures=0, last_failure="")
