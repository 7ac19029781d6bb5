"""A run handed to another owner: by a person in the admin, or every run started without
a key to the first key (``createkey --adopt-keyless``).

Once a key exists, callers without one are refused, so runs started without a key would
be orphaned mid-conversation: the first key can adopt them.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from access_app.callers import ANONYMOUS, KEY_OWNER
from flowcore.common.errors import NotFound
from flowcore.common.text import shown
from flowcore.run.results import ADOPT, adopted_result
from runs_app import step_store
from runs_app.models import OPEN_STATES, Run
from runs_app.recording import act_audit, step_record, write_transaction
from runs_app.selectors import run_state


def run_adopt(*, run_id: str, owner: str, by: str) -> bool:
    """Hand the run ``run_id`` to ``owner`` (a caller's key, as ``Run.owner``), recorded as
    an ``adopt`` step of its chain made by ``by`` (who did it: ``operator:createkey``,
    ``staff:NAME``), so ``verify`` proves who owns the run and since when. The run's
    state does not change. False when ``owner`` already owns it (nothing recorded).

    Raises NotFound for a run that does not exist.
    """
    with write_transaction():
        run = step_store.run_locked(run_id, step_store.Visibility(every=True))
        if run is None:
            raise NotFound(
                "run not found",
                f"no run has id {shown(run_id)}",
                "Copy the run id from the admin's run list.",
            )
        if run.owner == owner:
            return False
        run.owner = owner
        step_record(
            run,
            by,
            run_state(run),
            flow=None,
            tool=ADOPT,
            call={"owner": owner},
            result=adopted_result(run.public_id, owner),
            node_before=run.node,
            now=timezone.now(),
            columns=("owner",),
        )
        return True


def runs_adopt_keyless(key_name: str) -> list[str]:
    """Make every run started without a key that is still active or stalled the key
    ``key_name``'s, in one transaction (the caller's when there is one): each run gets an
    ``adopt`` step in its chain (``run_adopt``) and a record in the audit trail (its id,
    the owner it had, the key it went to). Returns the ids of the runs adopted.
    """
    new_owner = KEY_OWNER + key_name
    with transaction.atomic():
        runs = list(
            Run.objects.select_for_update()
            .filter(owner__startswith=ANONYMOUS, state__in=OPEN_STATES)
            .values_list("public_id", "owner")
        )
        for public_id, owner in runs:
            run_adopt(run_id=public_id, owner=new_owner, by="operator:createkey")
            act_audit(
                "adopt keyless run", "adopted", caller=owner, run_id=public_id, key_name=key_name
            )
    return [public_id for public_id, _ in runs]


@dataclass(frozen=True)
class OpenRuns:
    """Runs started without a key that are not over."""

    active: int
    stalled: int

    @property
    def total(self) -> int:
        return self.active + self.stalled


def keyless_runs_open() -> OpenRuns:
    """How many runs started without a key are active or stalled."""
    counts = dict(
        Run.objects.filter(owner__startswith=ANONYMOUS, state__in=OPEN_STATES)
        .values_list("state")
        .annotate(n=Count("pk"))
        .values_list("state", "n")
    )
    return OpenRuns(
        active=counts.get(Run.State.ACTIVE, 0), stalled=counts.get(Run.State.STALLED, 0)
    )
