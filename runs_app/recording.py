"""How every write of a run is recorded: its transaction, and the one function that
appends a step.

The engine decides every transition; a use case (``agent_steps``, ``resolve``,
``moves``, ``adoption``) reads the run under a lock, asks the engine, and records the
run's new state with one step through ``step_record``, as ``erasure`` records its erase
step. A call that fails raises a ``Refusal`` and writes nothing to the run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from access_app import audit
from access_app.callers import Caller
from events_app.services import events_record
from flowcore.common.errors import Refusal, StepNotAllowed
from flowcore.common.jsontext import compact_json
from flowcore.common.limits import MAX_RUN_STEPS
from flowcore.flow.model import Flow
from flowcore.run import engine
from flowcore.run.engine import Transition
from flowcore.run.lookups import LOOKUPS_KEY, LookupNeeded
from flowcore.run.results import (
    MOVE,
    RESOLVE,
    TODAY_KEY,
    closed_result,
    moved_notice,
    result_status,
    step_result,
    step_today,
)
from flowcore.run.state import RunState
from runs_app import step_store
from runs_app.chain import chain_append
from runs_app.events import step_events
from runs_app.lookups import with_lookups
from runs_app.models import Claim, Run, Step
from runs_app.packing import pack_json
from runs_app.selectors import run_state

# The columns a step changes (an UPDATE of these only); a close also sets its reason.
_STEP_COLUMNS = (
    "packed_state",
    "state",
    "node",
    "outcome",
    "revision",
    "updated_at",
    "stalled_at",
    "head_hash",
)
_CLOSE_COLUMNS = ("close_reason",)
# What a step's stored input holds beside the call's arguments.
_ADDED_KEYS = frozenset({TODAY_KEY, LOOKUPS_KEY})


@contextmanager
def write_transaction() -> Iterator[None]:
    """``atomic(savepoint=False)`` that a refusal leaves usable.

    Alone it is its own transaction; inside the MCP dispatcher's, which also holds the
    call's audit record, it joins it without a savepoint's two extra statements. But an
    exception inside such a block marks the outer transaction as failed. Every write
    refuses before it writes, so a ``Refusal`` raised inside is re-raised after the block
    has closed normally: a caller that catches it (a test's transaction, a later call in
    the same transaction) can carry on. When this block is the outermost transaction it
    is also rolled back, so a refusal never commits anything. The engine's
    ``LookupNeeded`` goes the same way: it is raised before anything is written, and the
    write is tried again once the call is made (``runs_app.lookups``).
    """
    outermost = not transaction.get_connection().in_atomic_block
    refused: Refusal | LookupNeeded | None = None
    with transaction.atomic(savepoint=False):
        try:
            yield
        except (Refusal, LookupNeeded) as refusal:
            refused = refusal
            if outermost:
                transaction.set_rollback(True)
    if refused is not None:
        raise refused


def act_audit(tool: str, outcome: str, *, caller: str, run_id: str, key_name: str = "") -> None:
    """Record in the audit trail an act on a run that no tool call made (a person's claim,
    answer or close, a move, an adoption), beside its step when it has one."""
    audit.audit_record(
        audit.Entry(
            tool=tool,
            outcome=outcome,
            status=0,
            duration_ms=0.0,
            key_name=key_name,
            caller=caller,
            run_id=run_id,
        )
    )


def length_check(run: Run) -> None:
    """Refuse to grow a run past MAX_RUN_STEPS (a loop of back and answer would never
    end); guide_close still ends it."""
    if run.revision >= MAX_RUN_STEPS:
        raise StepNotAllowed(
            "run has too many steps",
            f"the run holds {run.revision} steps; a run may hold at most {MAX_RUN_STEPS}",
            "Close the run with guide_close and hand the conversation to a human, or start "
            "a new run with guide_start.",
        )


def transition_record(
    run: Run,
    caller: Caller,
    transition: Transition,
    *,
    flow: Flow,
    tool: str,
    call: dict[str, Any],
    resumed: bool = False,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Record the engine's ``transition`` of ``run`` (locked) as a step; its result.
    ``now``: the time the engine was given the step's date by, when it was."""
    result = step_result(run.public_id, transition)
    columns: tuple[str, ...] = ()
    if run.moved_from and tool != RESOLVE:
        # The agent's first answer or back since a person moved the run learns the
        # procedure changed; a person resolving the run leaves the notice for the agent.
        result["next"] = moved_notice(run.moved_from, run.flow_version.content_hash) + str(
            result["next"]
        )
        run.moved_from = ""
        columns = ("moved_from",)
    step_record(
        run,
        caller.key,
        transition.state,
        flow=flow,
        tool=tool,
        call=call,
        result=result,
        node_before=run.node,
        now=now or timezone.now(),
        columns=columns,
        resumed=resumed,
    )
    return result


def close_record(run: Run, caller: Caller, reason: str) -> dict[str, Any]:
    """Record the close of ``run`` (locked) by ``caller`` with ``reason``: an agent's
    ``guide_close`` and a person's close alike."""
    if run.state == Run.State.STALLED:  # nobody waits on a closed run
        Claim.objects.filter(run=run).delete()
    state = engine.close(run_state(run))
    run.close_reason = reason
    result = closed_result(run.public_id, reason)
    step_record(
        run,
        caller.key,
        state,
        flow=None,
        tool="guide_close",
        call={"reason": reason},
        result=result,
        node_before=run.node,
        now=timezone.now(),
        columns=_CLOSE_COLUMNS,
    )
    return result


def step_record(
    run: Run,
    caller: str,
    state: RunState | None,
    *,
    flow: Flow | None,
    tool: str,
    call: dict[str, Any],
    result: dict[str, Any],
    node_before: str,
    now: datetime,
    columns: tuple[str, ...] = (),
    resumed: bool = False,
    keyed: bool = True,
) -> None:
    """Save the run's new ``state`` and append its step, in the caller's transaction: the
    one place a step is stored.

    One UPDATE of the columns a step changes (and ``columns``) and one INSERT, built once
    (``step_store``); for a new run (guide_start) the run is inserted first. ``caller``
    is who made the call (a caller's key); ``call`` is stored as ``as_recorded`` says,
    with the date and the lookups' answers a replay needs. ``state`` None keeps the engine state the
    caller set on ``run`` (an erasure's, which no transition made); ``keyed`` False hashes
    the step without the run's salt (an erasure removes the salt). The events the step
    reports (the run stalled, completed, was closed, or with ``resumed`` was resolved by a
    person) are one more INSERT, only when some subscription wants one of them.
    """
    before = "" if run.pk is None else run.state
    if state is not None:
        run.engine_state = state.to_dict()
        run.state = state.state
        run.node = state.node or ""
        run.outcome = state.outcome or ""
    run.revision += 1
    run.updated_at = now
    if run.state != Run.State.STALLED:
        run.stalled_at = None
    elif before != Run.State.STALLED or tool == RESOLVE:  # as results.stalled_since reads it
        run.stalled_at = now
    new = run.pk is None
    step = Step(
        run=run,
        seq=run.revision,
        tool=tool,
        input=as_recorded(stored_call(flow, call), flow, now, result),
        packed_result=pack_json(compact_json(result)),
        status=result_status(result),
        node_before=node_before,
        node_after=run.node,
        caller=caller,
        created_at=now,
        # The first step binds the flow version the run is pinned to, and a move the
        # version it pins the run to from then on, so verify can prove either.
        flow_hash=run.flow_version.content_hash if (new or tool == MOVE) and run.salt else "",
    )
    chain_append(run, step, result=result, keyed=keyed)
    if new:
        run.save(force_insert=True)
        step.run = run  # now with its id
        update: tuple[str, ...] = ()
    else:
        update = (*_STEP_COLUMNS, *columns)
    step_store.step_append(run, step, update=update)
    events = step_events(run, before, result, resumed=resumed, lookups=step.input.get(LOOKUPS_KEY))
    events_record(events, now=now)


def as_recorded(
    call: dict[str, Any], flow: Flow | None, now: datetime, result: Mapping[str, Any]
) -> dict[str, Any]:
    """The call as its step stores it: with what a replay needs that the call did not
    carry. The date its checks read as today (the engine was given the same, from the
    same ``now``), when the step passed a check (only a check reads it: a step that
    passed none is stored as before); and what each lookup the step passed came back
    with, so that a replay never calls again."""
    today = step_today(flow, now) if flow is not None else None
    if today is not None and result.get("checked"):
        call = {**call, TODAY_KEY: today.isoformat()}
    return with_lookups(call, result)


def as_sent(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A stored input as the call was sent, without what the step added: what a retry,
    made on another day perhaps, is compared with."""
    return {k: v for k, v in stored.items() if k not in _ADDED_KEYS}


def stored_call(flow: Flow | None, call: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments as stored, and as a retry is compared with them: arguments
    not given are left out, and a value for a key ``flow`` does not know is stored as
    null. Such a value was ignored (the result names only its key), so it changes
    nothing a replay or a retry depends on, and storing it would keep up to 1 MB of
    text nobody needs."""
    stored = {k: v for k, v in call.items() if v is not None}
    values = stored.get("values")
    if flow is not None and isinstance(values, Mapping):
        stored["values"] = {
            k: (v if flow.owner_of(k) is not None else None) for k, v in values.items()
        }
    return stored
