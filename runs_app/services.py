"""Writes of runs: start, answer, back and close, each one locked transaction.

The engine decides every transition; this module reads the run under a lock,
asks the engine, and records the run's new state with one appended step. A
call that fails raises a ``Refusal`` and writes nothing to the run (the
dispatcher counts the failure with ``access_app.failures``).

Each write is a ``_transaction()``: alone it is its own transaction; called by the MCP
dispatcher, it joins the dispatcher's transaction, which also holds the call's audit
record, without a savepoint's two extra statements (ADR 0033).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from access_app import audit, metrics
from access_app.callers import ANONYMOUS, KEY_OWNER, Caller
from access_app.keyless_runs import OpenRuns
from flows_app.domain import engine
from flows_app.domain.engine import Transition
from flows_app.domain.errors import (
    InvalidInput,
    NotFound,
    Refusal,
    RunLimitReached,
    StepNotAllowed,
)
from flows_app.domain.jsontext import compact_json
from flows_app.domain.limits import MAX_RUN_STEPS
from flows_app.domain.model import Flow
from flows_app.domain.names import closest
from flows_app.domain.results import (
    ADOPT,
    adopted_result,
    closed_result,
    result_status,
    start_result,
    step_result,
)
from flows_app.domain.state import RunState
from flows_app.domain.text import shown
from flows_app.selectors import flow_live
from flows_app.services import flow_version_pin
from runs_app import step_store
from runs_app.chain import chain_append
from runs_app.models import Run, Step, new_salt
from runs_app.selectors import (
    last_answer_at,
    run_flow,
    run_get,
    run_state,
)


@contextmanager
def _transaction() -> Iterator[None]:
    """``atomic(savepoint=False)`` that a refusal leaves usable.

    Joining an outer transaction without a savepoint saves two statements per call, but
    an exception inside such a block marks the outer transaction as failed. Every service
    refuses before it writes, so a ``Refusal`` raised inside is re-raised after the block
    has closed normally: a caller that catches it (a test's transaction, a later call in
    the same transaction) can carry on. When this block is the outermost transaction it
    is also rolled back, so a refusal never commits anything.
    """
    outermost = not transaction.get_connection().in_atomic_block
    refused: Refusal | None = None
    with transaction.atomic(savepoint=False):
        try:
            yield
        except Refusal as refusal:
            refused = refusal
            if outermost:
                transaction.set_rollback(True)
    if refused is not None:
        raise refused


def run_start(
    *,
    caller: Caller,
    flow_id: str,
    values: Mapping[str, object] | None,
    ref: str | None,
    request_id: str | None = None,
) -> dict[str, Any]:
    """guide_start: start a run of a live flow, pinned to its content.

    With ``request_id``, a retry by the same caller gets the run it already started
    (its first result, ``repeated: true``) instead of a second run, even when both
    calls race (a unique constraint on owner and request_id decides).

    Raises Refusal for an unknown flow, bad values, or a request_id the caller
    already used with other arguments.
    """
    call = {"flow_id": flow_id, "values": values, "ref": ref, "request_id": request_id}
    if request_id:
        earlier = _started_before(caller, request_id, call)
        if earlier is not None:
            return earlier
    flow = flow_live(flow_id)
    transition = engine.start(flow, values)
    now = timezone.now()
    _refuse_past_runs_per_day(caller, now)
    # With a request_id, a savepoint: a start racing with the same request_id fails on
    # the unique constraint, and the transaction must stay usable to read the winner's run.
    block = transaction.atomic() if request_id else _transaction()
    try:
        with block:
            run = Run(
                flow_version=flow_version_pin(flow=flow, now=now),
                flow_id=flow.id,
                owner=caller.key,
                ref=ref or "",
                request_id=request_id or "",
                salt=new_salt(),
                started_at=now,
                updated_at=now,
                engine_state={},
            )
            result = start_result(run.public_id, flow, transition)
            _record(
                run,
                caller.key,
                transition.state,
                flow=flow,
                tool="guide_start",
                call=call,
                result=result,
                node_before="",
                now=now,
            )
    except IntegrityError:
        # The same request_id, started by a call that committed first: return its run.
        earlier = _started_before(caller, request_id, call) if request_id else None
        if earlier is None:
            raise
        return earlier
    return result


def _refuse_past_runs_per_day(caller: Caller, now: datetime) -> None:
    """Refuse a start past the caller's cap of runs a day (UTC): its key's
    ``--runs-per-day``, or GUIDEPOST_KEYLESS_RUNS_PER_DAY for callers without a key,
    counted per address (ADR 0072). No cap, no query."""
    keyless = not caller.key_name
    cap = settings.GUIDEPOST_KEYLESS_RUNS_PER_DAY if keyless else caller.limits.runs_per_day
    if not cap:
        return
    midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    owner, prefix = caller.runs_owned_by
    mine = Q(owner=owner) | Q(owner__startswith=prefix) if prefix else Q(owner=owner)
    started = Run.objects.filter(mine, started_at__gte=midnight).count()
    if started < cap:
        return
    wait = math.ceil((midnight + timedelta(days=1) - now).total_seconds())
    who = "callers without a key on this address" if keyless else "this key"
    metrics.rate_limited("runs per day")
    raise RunLimitReached(
        "run limit reached",
        f"{who} started {started} runs today (UTC), the most allowed a day",
        "Hand the conversation to a person: no run can start here before the day ends "
        f"(in {wait} s, retry_after). The operator can raise the cap"
        + (" (GUIDEPOST_KEYLESS_RUNS_PER_DAY)." if keyless else " (createkey --runs-per-day)."),
        retry_after=float(wait),
    )


def _started_before(caller: Caller, request_id: str, call: dict[str, Any]) -> dict[str, Any] | None:
    """The first result of the run ``caller`` started with ``request_id``, marked
    ``repeated``; None when there is none. Raises InvalidInput when that run was started
    with other arguments."""
    run = (
        Run.objects.select_related("flow_version")
        .filter(owner=caller.key, request_id=request_id)
        .first()
    )
    if run is None:
        return None
    first = run.steps.order_by("seq").first()
    if first is None:  # a run is created with its first step: only a broken row has none
        return None
    if first.input != _stored_call(run_flow(run), call):
        raise InvalidInput(
            "request_id already used",
            f"request_id {shown(request_id)} already started run {run.public_id} with other "
            "arguments",
            "Use a new request_id for a new run; to go on with that run, call guide_status "
            "with its run_id.",
        )
    return {**first.result, "repeated": True}


def run_answer(
    *,
    caller: Caller,
    run_id: str,
    choice: str | None,
    values: Mapping[str, object] | None,
    at: str | None,
) -> dict[str, Any]:
    """guide_answer, with ``at`` for a safe retry (spec §5.3).

    Raises Refusal for an unknown run, a lost race or moved run, or a call the
    engine refuses.
    """
    call = {"choice": choice, "values": values}
    with _transaction():
        run = run_get(caller, run_id, for_update=True)
        flow = run_flow(run)
        if at is not None and at not in flow.waiting_nodes:
            # A run only ever waits at ask and collect nodes, so only those are candidates.
            node = flow.nodes.get(at)
            raise Refusal(
                "node not found",
                f"{at} is a {node.kind} node; a run waits only at ask and collect nodes"
                if node is not None
                else f"the flow has no node {shown(at)}",
                "Set at to node.id from the last result (guide_status shows it), or leave it out.",
                retryable=True,
                candidates=closest(at, flow.waiting_nodes),
            )
        if at is not None and (run.state != Run.State.ACTIVE or run.node != at):
            # Another call moved the run first (a race, or this is a retry of one that did).
            replay = last_answer_at(run, at)
            if replay is not None and replay.input == _stored_call(flow, call):
                return {**replay.result, "repeated": True}
            raise _conflict(run, at)
        _check_length(run)
        transition = engine.answer(flow, run_state(run), choice=choice, values=values)
        return _advance(run, caller, transition, flow=flow, tool="guide_answer", call=call)


def run_back(*, caller: Caller, run_id: str, to: str | None) -> dict[str, Any]:
    """guide_back (spec §3.5). Raises Refusal."""
    with _transaction():
        run = run_get(caller, run_id, for_update=True)
        flow = run_flow(run)
        _check_length(run)
        transition = engine.back(flow, run_state(run), to)
        return _advance(run, caller, transition, flow=flow, tool="guide_back", call={"to": to})


def run_close(*, caller: Caller, run_id: str, reason: str) -> dict[str, Any]:
    """guide_close (spec §5.6); closing a closed run again answers the same with
    ``repeated``.

    Raises Refusal for a run the caller cannot see, and StepNotAllowed (``run already
    ended``) for a completed run, whose outcome stands.
    """
    with _transaction():
        run = run_get(caller, run_id, for_update=True)
        if run.state == Run.State.CLOSED:
            return {**closed_result(run.public_id, run.close_reason), "repeated": True}
        state = engine.close(run_state(run))
        run.close_reason = reason
        result = closed_result(run.public_id, reason)
        _record(
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


def _check_length(run: Run) -> None:
    """Refuse to grow a run past MAX_RUN_STEPS (a loop of back and answer would never
    end); guide_close still ends it."""
    if run.revision >= MAX_RUN_STEPS:
        raise StepNotAllowed(
            "run has too many steps",
            f"the run holds {run.revision} steps; a run may hold at most {MAX_RUN_STEPS}",
            "Close the run with guide_close and hand the conversation to a human, or start "
            "a new run with guide_start.",
        )


def _advance(
    run: Run,
    caller: Caller,
    transition: Transition,
    *,
    flow: Flow,
    tool: str,
    call: dict[str, Any],
) -> dict[str, Any]:
    result = step_result(run.public_id, transition)
    _record(
        run,
        caller.key,
        transition.state,
        flow=flow,
        tool=tool,
        call=call,
        result=result,
        node_before=run.node,
        now=timezone.now(),
    )
    return result


def _record(
    run: Run,
    caller: str,
    state: RunState,
    *,
    flow: Flow | None,
    tool: str,
    call: dict[str, Any],
    result: dict[str, Any],
    node_before: str,
    now: datetime,
    columns: tuple[str, ...] = (),
) -> None:
    """Save the run's new state and append its step, in the caller's transaction: an
    UPDATE of the columns a step changes (``_STEP_COLUMNS`` and ``columns``) and an INSERT,
    built once (``step_store``). ``caller`` is who made the call (a caller's key)."""
    run.engine_state = state.to_dict()
    run.state = state.state
    run.node = state.node or ""
    run.outcome = state.outcome or ""
    run.revision += 1
    run.updated_at = now
    new = run.pk is None
    step = Step(
        run=run,
        seq=run.revision,
        tool=tool,
        input=_stored_call(flow, call),
        result_json=compact_json(result),
        status=result_status(result),
        node_before=node_before,
        node_after=run.node,
        caller=caller,
        created_at=now,
        # The first step binds the flow version the run is pinned to (ADR 0067).
        flow_hash=run.flow_version.content_hash if new and run.salt else "",
    )
    chain_append(run, step, result=result)
    if new:  # guide_start: the run is new
        run.save(force_insert=True)
        step.run = run  # now with its id
        update: tuple[str, ...] = ()
    else:
        update = (*_STEP_COLUMNS, *columns)
    step_store.step_append(run, step, update=update)


# The columns a step changes (an UPDATE of these only); a close also sets its reason.
_STEP_COLUMNS = ("engine_state", "state", "node", "outcome", "revision", "updated_at", "head_hash")
_CLOSE_COLUMNS = ("close_reason",)


def run_adopt(*, run_id: str, owner: str, by: str) -> bool:
    """Hand the run ``run_id`` to ``owner`` (a caller's key, as ``Run.owner``), recorded as
    an ``adopt`` step of its chain made by ``by`` (who did it: ``operator:createkey``,
    ``staff:NAME``), so ``verify`` proves who owns the run and since when (ADR 0067). The
    run's state does not change. False when ``owner`` already owns it (nothing recorded).

    Raises NotFound for a run that does not exist.
    """
    with _transaction():
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
        _record(
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


def _stored_call(flow: Flow | None, call: dict[str, Any]) -> dict[str, Any]:
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


def _conflict(run: Run, expected: str) -> Refusal:
    """A guide_answer with ``at`` finds the run elsewhere: say where it is now.

    A run that ended cannot take the answer at all: the refusal says how it ended (not
    retryable) rather than where it "moved".
    """
    state = run_state(run)
    if state.state != "active":
        return engine.not_active(state, "answer")
    # guide_back reopens only a node the run has passed: offer it only then.
    passed = any(entry.id == expected for entry in state.effective_path())
    back = f", or guide_back to {expected} to change its answer" if passed else ""
    return Refusal(
        "run has moved",
        f"the run is no longer at {expected}: it now waits at {run.node}"
        if passed
        else f"the run has not reached {expected}: it waits at {run.node}",
        f"Answer {run.node} instead (guide_status shows it){back}.",
        retryable=True,
    )


# --- the first key: runs started without one ---------------------------------------------------

OPEN_STATES = (Run.State.ACTIVE, Run.State.STALLED)


def runs_adopt_keyless(key_name: str) -> list[str]:
    """Make every run started without a key that is still active or stalled the key
    ``key_name``'s (``createkey --adopt-keyless``, ADR 0072), in one transaction (the
    caller's when there is one): each run gets an ``adopt`` step in its chain
    (``run_adopt``: the owner is bound there, so ``verify`` proves the hand-over, ADR 0067)
    and a record in the audit trail (its id, the owner it had, the key it went to).
    Returns the ids of the runs adopted.
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
            audit.audit_record(
                audit.Entry(
                    tool="adopt keyless run",
                    outcome="adopted",
                    status=0,
                    duration_ms=0.0,
                    key_name=key_name,
                    caller=owner,
                    run_id=public_id,
                )
            )
    return [public_id for public_id, _ in runs]


class _KeylessRuns:
    """What ``createkey`` asks of keyless runs (``access_app.keyless_runs.KeylessRuns``)."""

    def keyless_runs_open(self) -> OpenRuns:
        counts = dict(
            Run.objects.filter(owner__startswith=ANONYMOUS, state__in=OPEN_STATES)
            .values_list("state")
            .annotate(n=Count("pk"))
            .values_list("state", "n")
        )
        return OpenRuns(
            active=counts.get(Run.State.ACTIVE, 0), stalled=counts.get(Run.State.STALLED, 0)
        )

    def runs_adopt_keyless(self, key_name: str) -> list[str]:
        return runs_adopt_keyless(key_name)


keyless_runs = _KeylessRuns()
