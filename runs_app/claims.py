"""A person takes a stalled run on (claims it) or releases it.

A claim shows everyone "taken by NAME" until it is released, or the run is answered,
closed or taken back by its agent; while it stands only its taker may answer or close
the run. Claims are in the audit trail; they are not steps of the run.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils import timezone

from access_app.callers import RUNS_RESOLVE, Caller
from flowcore.common.errors import NotPermitted, StepNotAllowed
from flowcore.run import engine
from runs_app.models import Claim, Run
from runs_app.recording import act_audit, write_transaction
from runs_app.selectors import run_get, run_state


def run_claim(*, caller: Caller, run_id: str) -> Claim:
    """``caller`` takes the stalled run ``run_id`` on ("taken by NAME"); claiming one's own
    claim again changes nothing. Recorded in the audit trail.

    Raises NotPermitted, StepNotAllowed (not stalled, or claimed by another person),
    NotFound.
    """
    may_resolve(caller)
    with write_transaction():
        run = run_get(caller, run_id, for_update=True)
        if run.state != Run.State.STALLED:
            raise engine.not_stalled(run_state(run))
        refuse_claimed_by_another(run, caller)
        claim, created = Claim.objects.get_or_create(
            run=run, defaults={"by": caller.name, "at": timezone.now()}
        )
        if created:
            act_audit("claim run", "claimed", caller=caller.key, run_id=run.public_id)
        return claim


def run_release(*, caller: Caller, run_id: str) -> str | None:
    """End the claim on ``run_id``, whoever holds it (a claim is released by its holder, or
    by another person when the holder is away; the audit trail names both). Returns the
    name it was released from; None when nobody held the run (nothing changes).

    Raises NotPermitted, NotFound.
    """
    may_resolve(caller)
    with write_transaction():
        run = run_get(caller, run_id, for_update=True)
        claim = Claim.objects.filter(run=run).first()
        if claim is None:
            return None
        claim.delete()
        held = "" if claim.by == caller.name else f" (held by {claim.by})"
        act_audit("release run", "released" + held, caller=caller.key, run_id=run.public_id)
        return claim.by


def may_resolve(caller: Caller) -> None:
    """Refuse a caller without the permission to resolve runs (NotPermitted)."""
    if RUNS_RESOLVE not in caller.permissions:
        raise NotPermitted(
            "permission denied",
            f"{caller.name or caller.key} lacks the permission {RUNS_RESOLVE}",
            'Ask an administrator to add your account to the "Ops" or "Support lead" group.',
        )


def refuse_claimed_by_another(run: Run, caller: Caller) -> None:
    """Refuse ``caller`` a run another person has taken on (StepNotAllowed)."""
    claim = Claim.objects.filter(run=run).first()
    if claim is not None and claim.by != caller.name:
        raise StepNotAllowed(
            "run claimed by another person",
            f"the run is taken by {claim.by} since {clock(claim.at, timezone.now())}",
            f"Leave it to {claim.by}, or release the claim first if they cannot finish it.",
        )


def clock(at: datetime, now: datetime) -> str:
    """When a claim was made, as a person reads it: the time of day in UTC, with the
    date only when it was not today.

    >>> now = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
    >>> clock(datetime(2026, 12, 7, 2, 23, 40, tzinfo=UTC), now)
    '02:23 UTC'
    >>> clock(datetime(2026, 12, 6, 2, 23, tzinfo=UTC), now)
    '2026-12-06 02:23 UTC'
    """
    at, now = at.astimezone(UTC), now.astimezone(UTC)
    return at.strftime("%H:%M UTC" if at.date() == now.date() else "%Y-%m-%d %H:%M UTC")
