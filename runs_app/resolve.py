"""A person resolves a stalled run (answers the node where it waits) or closes it, on
its page or through the API.

Each is one step of the run, in its hash chain, whose caller is the person
(``staff:NAME``): the answer's input carries their note, the close's their reason. Not a
tool: an agent never answers for a person.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils import timezone

from access_app.callers import Caller
from flowcore.common.errors import InvalidInput
from flowcore.common.limits import MAX_CLOSE_REASON_LENGTH, MAX_RESOLVE_NOTE_LENGTH
from flowcore.common.text import refuse_controls
from flowcore.run import engine
from flowcore.run.results import RESOLVE, step_today
from runs_app.claims import may_resolve, refuse_claimed_by_another
from runs_app.lookups import lookups_given, lookups_outside
from runs_app.models import Claim, Run
from runs_app.recording import (
    act_audit,
    close_record,
    length_check,
    transition_record,
    write_transaction,
)
from runs_app.selectors import run_flow, run_get, run_state


def run_resolve(
    *,
    caller: Caller,
    run_id: str,
    choice: str | None,
    values: Mapping[str, object] | None,
    note: object,
) -> dict[str, Any]:
    """A person resolves a stalled run by answering the node where it waits: the engine
    takes the answer as an agent's (``engine.resolve``), and the step records the person
    as its caller and their note with the answer. The run's claim, if any, ends with it.
    Returns the step result, as ``guide_answer`` would.

    Raises NotPermitted without the permission to resolve runs, InvalidInput for a
    missing note or an answer that does not settle the node, StepNotAllowed for a run
    that is not stalled or that another person has claimed, NotFound for a run the
    person cannot see.
    """
    may_resolve(caller)
    text = _person_text("note", note, MAX_RESOLVE_NOTE_LENGTH)
    call = {"choice": choice, "values": values, "note": text}
    return lookups_outside(lambda: _resolve(caller, run_id, call))


def _resolve(caller: Caller, run_id: str, call: dict[str, Any]) -> dict[str, Any]:
    choice, values = call["choice"], call["values"]
    with write_transaction():
        run = run_get(caller, run_id, for_update=True)
        refuse_claimed_by_another(run, caller)
        flow = run_flow(run)
        length_check(run)
        now = timezone.now()
        today = step_today(flow, now)
        transition = engine.resolve(
            flow,
            run_state(run),
            choice=choice,
            values=values,
            today=today,
            lookups=lookups_given(run.public_id, flow.id, run.revision),
        )
        # The step reports run.resumed (and run.completed or run.stalled should the answer
        # end or stall the run again) in this transaction.
        result = transition_record(
            run,
            caller,
            transition,
            flow=flow,
            tool=RESOLVE,
            call=call,
            resumed=True,
            now=now,
        )
        Claim.objects.filter(run=run).delete()
        act_audit("resolve run", str(result["status"]), caller=caller.key, run_id=run.public_id)
        return result


def run_close_stalled(*, caller: Caller, run_id: str, reason: object) -> dict[str, Any]:
    """A person closes a stalled run with a reason: a ``guide_close`` step whose caller is
    the person. Returns guide_close's result.

    Raises NotPermitted, InvalidInput (no reason), StepNotAllowed (not stalled, claimed
    by another person), NotFound.
    """
    may_resolve(caller)
    text = _person_text("reason", reason, MAX_CLOSE_REASON_LENGTH)
    with write_transaction():
        run = run_get(caller, run_id, for_update=True)
        if run.state != Run.State.STALLED:
            raise engine.not_stalled(run_state(run))
        refuse_claimed_by_another(run, caller)
        result = close_record(run, caller, text)
        act_audit("close run", "closed", caller=caller.key, run_id=run.public_id)
        return result


def _person_text(name: str, raw: object, limit: int) -> str:
    """A person's note or reason as recorded; InvalidInput when missing or unfit."""
    if name == "note":
        missing = "note required"
        too_long = "note too long"
    else:
        missing = "reason required"
        too_long = "reason too long"
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidInput(
            missing,
            f"resolving or closing a stalled run takes a {name}",
            f"Write a {name}: what you decided and why, in a sentence or two.",
        )
    if len(raw) > limit:
        raise InvalidInput(
            too_long,
            f"the {name} has {len(raw)} characters; the limit is {limit}",
            f"Shorten the {name} to at most {limit} characters.",
        )
    refuse_controls(f"the {name}", raw, lines=True)
    return raw.strip()
