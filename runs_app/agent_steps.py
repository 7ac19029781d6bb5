"""An agent's steps of a run: start, answer, back and close, each one locked transaction
(the MCP tools ``guide_start``, ``guide_answer``, ``guide_back``, ``guide_close``).

A refused call writes nothing to the run (the dispatcher counts the failure with
``access_app.failures``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from access_app import ratelimit
from access_app.callers import Caller
from flowcore.common.errors import InvalidInput, Refusal, RunLimitReached
from flowcore.common.names import closest
from flowcore.common.text import a_kind, shown
from flowcore.flow.model import Flow
from flowcore.run import engine
from flowcore.run.results import closed_result, start_result, step_today
from flows_app.selectors import flow_live
from flows_app.services import flow_version_pin
from runs_app.lookups import lookups_given, lookups_outside, new_run_id_kept
from runs_app.models import Claim, Run, new_salt
from runs_app.recording import (
    as_sent,
    close_record,
    length_check,
    step_record,
    stored_call,
    transition_record,
    write_transaction,
)
from runs_app.selectors import last_answer_at, person_note, run_flow, run_get, run_state


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
    return lookups_outside(
        lambda: _start(caller, flow, call, values=values, ref=ref, request_id=request_id)
    )


def _start(
    caller: Caller,
    flow: Flow,
    call: dict[str, Any],
    *,
    values: Mapping[str, object] | None,
    ref: str | None,
    request_id: str | None,
) -> dict[str, Any]:
    now = timezone.now()
    today = step_today(flow, now)
    run_id = new_run_id_kept()  # before the engine: a lookup sends it
    transition = engine.start(flow, values, today=today, lookups=lookups_given(run_id, flow.id, 0))
    _refuse_past_runs_per_day(caller, now)
    # With a request_id, a savepoint: a start racing with the same request_id fails on
    # the unique constraint, and the transaction must stay usable to read the winner's run.
    block = transaction.atomic() if request_id else write_transaction()
    try:
        with block:
            run = Run(
                public_id=run_id,
                flow_version=flow_version_pin(flow=flow, now=now),
                flow_id=flow.id,
                owner=caller.key,
                ref=ref or "",
                request_id=request_id or "",
                salt=new_salt(),
                started_at=now,
                updated_at=now,
            )
            result = start_result(run.public_id, flow, transition)
            step_record(
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
    counted per address so a new client name does not start a new count. No cap, no
    query."""
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
    ratelimit.count_refusal("runs per day")
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
    if as_sent(first.input) != stored_call(run_flow(run), call):
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
    """guide_answer; with ``at`` (the node answered), a retry of an answer already applied
    returns its first result instead of applying it twice.

    Raises Refusal for an unknown run, a lost race or moved run, or a call the
    engine refuses.
    """
    call = {"choice": choice, "values": values}
    return lookups_outside(lambda: _answer(caller, run_id, call, at))


def _answer(caller: Caller, run_id: str, call: dict[str, Any], at: str | None) -> dict[str, Any]:
    choice, values = call["choice"], call["values"]
    with write_transaction():
        run = run_get(caller, run_id, for_update=True)
        flow = run_flow(run)
        if at is not None and at not in flow.waiting_nodes:
            # A run only ever waits at ask and collect nodes, so only those are candidates.
            node = flow.nodes.get(at)
            raise Refusal(
                "node not found",
                f"{at} is {a_kind(node.kind)} node; a run waits only at ask and collect nodes"
                if node is not None
                else f"the flow has no node {shown(at)}",
                "Set at to node.id from the last result (guide_status shows it), or leave it out.",
                retryable=True,
                candidates=closest(at, flow.waiting_nodes),
            )
        if at is not None and (run.state != Run.State.ACTIVE or run.node != at):
            # Another call moved the run first (a race, or this is a retry of one that did).
            replay = last_answer_at(run, at)
            if replay is not None and as_sent(replay.input) == stored_call(flow, call):
                return {**replay.result, "repeated": True}
            raise _conflict(run, at)
        length_check(run)
        now = timezone.now()
        today = step_today(flow, now)
        transition = engine.answer(
            flow,
            run_state(run),
            choice=choice,
            values=values,
            today=today,
            lookups=lookups_given(run.public_id, flow.id, run.revision),
        )
        return transition_record(
            run,
            caller,
            transition,
            flow=flow,
            tool="guide_answer",
            call=call,
            now=now,
        )


def run_back(*, caller: Caller, run_id: str, to: str | None) -> dict[str, Any]:
    """guide_back: reopen ``to``, or the node whose answer moved the run last. Raises
    Refusal."""
    with write_transaction():
        run = run_get(caller, run_id, for_update=True)
        flow = run_flow(run)
        length_check(run)
        transition = engine.back(flow, run_state(run), to)
        stalled = run.state == Run.State.STALLED
        result = transition_record(
            run, caller, transition, flow=flow, tool="guide_back", call={"to": to}
        )
        if stalled:  # the agent took the run back: nobody waits on it any more
            Claim.objects.filter(run=run).delete()
        return result


def run_close(*, caller: Caller, run_id: str, reason: str) -> dict[str, Any]:
    """guide_close; closing a closed run again answers the same with ``repeated``.

    Raises Refusal for a run the caller cannot see, and StepNotAllowed (``run already
    ended``) for a completed run, whose outcome stands.
    """
    with write_transaction():
        run = run_get(caller, run_id, for_update=True)
        if run.state == Run.State.CLOSED:
            return {**closed_result(run.public_id, run.close_reason), "repeated": True}
        return close_record(run, caller, reason)


def _conflict(run: Run, expected: str) -> Refusal:
    """A guide_answer with ``at`` finds the run elsewhere: say where it is now.

    A run that ended cannot take the answer at all: the refusal says how it ended (not
    retryable) rather than where it "moved".
    """
    state = run_state(run)
    # The first call after a person answered the run (retrying the answer that stalled
    # it, say) is told so, with their note, as guide_status would tell it.
    told = engine.handed_back(state, person_note(run, state))
    if state.state != "active":
        refused = engine.not_active(state, "answer")
        refused.next = told + refused.next
        return refused
    # guide_back reopens only a node the run has passed: offer it only then.
    passed = any(entry.id == expected for entry in state.effective_path())
    back = f", or guide_back to {expected} to change its answer" if passed else ""
    return Refusal(
        "run has moved",
        f"the run is no longer at {expected}: it now waits at {run.node}"
        if passed
        else f"the run has not reached {expected}: it waits at {run.node}",
        told + f"Answer {run.node} instead (guide_status shows it){back}.",
        retryable=True,
    )
