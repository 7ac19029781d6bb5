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
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from access_app import audit, ratelimit
from access_app.callers import ANONYMOUS, KEY_OWNER, RUNS_RESOLVE, Caller
from access_app.keyless_runs import OpenRuns
from events_app.services import events_record
from flowcore.checks.guarantees import path_refusal
from flowcore.common.errors import (
    InvalidInput,
    NotFound,
    NotPermitted,
    Refusal,
    RunLimitReached,
    StepNotAllowed,
)
from flowcore.common.jsontext import compact_json
from flowcore.common.limits import (
    MAX_CLOSE_REASON_LENGTH,
    MAX_RESOLVE_NOTE_LENGTH,
    MAX_RUN_STEPS,
)
from flowcore.common.names import closest
from flowcore.common.text import refuse_controls, shown
from flowcore.flow.model import Flow
from flowcore.run import engine
from flowcore.run.engine import Transition
from flowcore.run.migration import MovePlan, plan_move
from flowcore.run.results import (
    ADOPT,
    MOVE,
    RESOLVE,
    adopted_result,
    closed_result,
    moved_notice,
    moved_result,
    result_status,
    start_result,
    step_result,
)
from flowcore.run.state import RunState
from flows_app.selectors import flow_guarantees, flow_live
from flows_app.services import flow_version_pin
from runs_app import step_store
from runs_app.chain import chain_append, iso
from runs_app.events import step_events
from runs_app.models import Claim, Run, Step, new_salt
from runs_app.packing import pack_json
from runs_app.selectors import (
    last_answer_at,
    run_flow,
    run_get,
    run_history,
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
        stalled = run.state == Run.State.STALLED
        result = _advance(run, caller, transition, flow=flow, tool="guide_back", call={"to": to})
        if stalled:  # the agent took the run back: nobody waits on it any more (ADR 0080)
            Claim.objects.filter(run=run).delete()
        return result


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
        return _close(run, caller, reason)


def _close(run: Run, caller: Caller, reason: str) -> dict[str, Any]:
    """Record the close of ``run`` (locked by the caller) by ``caller``, with ``reason``.
    Every close passes here: an agent's ``guide_close`` and a person's (spec §5.9)."""
    if run.state == Run.State.STALLED:  # nobody waits on a closed run (ADR 0080)
        Claim.objects.filter(run=run).delete()
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


# --- a person and a stalled run: claims, answers, closes (spec §5.9, ADR 0079, 0080) ----------


def run_resolve(
    *,
    caller: Caller,
    run_id: str,
    choice: str | None,
    values: Mapping[str, object] | None,
    note: object,
) -> dict[str, Any]:
    """A person answers the node where a stalled run waits (spec §5.9): the engine takes
    the answer as an agent's (``engine.resolve``), and the step records the person as its
    caller and their note with the answer, in the run's hash chain. The run's claim, if
    any, ends with it. Returns the step result, as ``guide_answer`` would.

    Raises NotPermitted without the permission to resolve runs, InvalidInput for a
    missing note or an answer that does not settle the node, StepNotAllowed for a run
    that is not stalled or that another person has claimed, NotFound for a run the
    person cannot see.
    """
    _may_resolve(caller)
    text = _person_text("note", note, MAX_RESOLVE_NOTE_LENGTH)
    call = {"choice": choice, "values": values, "note": text}
    with _transaction():
        run = run_get(caller, run_id, for_update=True)
        _refuse_claimed_by_another(run, caller)
        flow = run_flow(run)
        _check_length(run)
        transition = engine.resolve(flow, run_state(run), choice=choice, values=values)
        # The step reports run.resumed (and run.completed or run.stalled should the answer
        # end or stall the run again) in this transaction (spec §8).
        result = _advance(run, caller, transition, flow=flow, tool=RESOLVE, call=call, resumed=True)
        Claim.objects.filter(run=run).delete()
        _audit_person(caller, run, "resolve run", str(result["status"]))
        return result


def run_close_stalled(*, caller: Caller, run_id: str, reason: object) -> dict[str, Any]:
    """A person closes a stalled run with a reason (spec §5.9): a ``guide_close`` step whose
    caller is the person. Returns guide_close's result.

    Raises NotPermitted, InvalidInput (no reason), StepNotAllowed (not stalled, claimed
    by another person), NotFound.
    """
    _may_resolve(caller)
    text = _person_text("reason", reason, MAX_CLOSE_REASON_LENGTH)
    with _transaction():
        run = run_get(caller, run_id, for_update=True)
        if run.state != Run.State.STALLED:
            raise engine.not_stalled(run_state(run))
        _refuse_claimed_by_another(run, caller)
        result = _close(run, caller, text)
        _audit_person(caller, run, "close run", "closed")
        return result


def run_claim(*, caller: Caller, run_id: str) -> Claim:
    """``caller`` takes the stalled run ``run_id`` on ("taken by NAME"); claiming one's own
    claim again changes nothing. Recorded in the audit trail.

    Raises NotPermitted, StepNotAllowed (not stalled, or claimed by another person),
    NotFound.
    """
    _may_resolve(caller)
    with _transaction():
        run = run_get(caller, run_id, for_update=True)
        if run.state != Run.State.STALLED:
            raise engine.not_stalled(run_state(run))
        _refuse_claimed_by_another(run, caller)
        claim, created = Claim.objects.get_or_create(
            run=run, defaults={"by": caller.name, "at": timezone.now()}
        )
        if created:
            _audit_person(caller, run, "claim run", "claimed")
        return claim


def run_release(*, caller: Caller, run_id: str) -> str | None:
    """End the claim on ``run_id``, whoever holds it (a claim is released by its holder, or
    by another person when the holder is away; the audit trail names both). Returns the
    name it was released from; None when nobody held the run (nothing changes).

    Raises NotPermitted, NotFound.
    """
    _may_resolve(caller)
    with _transaction():
        run = run_get(caller, run_id, for_update=True)
        claim = Claim.objects.filter(run=run).first()
        if claim is None:
            return None
        claim.delete()
        held = "" if claim.by == caller.name else f" (held by {claim.by})"
        _audit_person(caller, run, "release run", "released" + held)
        return claim.by


def _may_resolve(caller: Caller) -> None:
    if RUNS_RESOLVE not in caller.permissions:
        raise NotPermitted(
            "permission denied",
            f"{caller.name or caller.key} lacks the permission {RUNS_RESOLVE}",
            'Ask an administrator to add your account to the "Ops" or "Support lead" group.',
        )


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
            f"a person's answer to a stalled run carries a {name}",
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


def _refuse_claimed_by_another(run: Run, caller: Caller) -> None:
    claim = Claim.objects.filter(run=run).first()
    if claim is not None and claim.by != caller.name:
        raise StepNotAllowed(
            "run claimed by another person",
            f"{claim.by} took this run on at {iso(claim.at)}",
            f"Leave it to {claim.by}, or release the claim first if they cannot finish it.",
        )


def _audit_person(caller: Caller, run: Run, tool: str, outcome: str) -> None:
    """A person's act on a run in the audit trail (a claim has no step of its own; an
    answer or a close has one, and is recorded here too, beside the API's records)."""
    audit.audit_record(
        audit.Entry(
            tool=tool,
            outcome=outcome,
            status=0,
            duration_ms=0.0,
            caller=caller.key,
            run_id=run.public_id,
        )
    )


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
    resumed: bool = False,
) -> dict[str, Any]:
    result = step_result(run.public_id, transition)
    columns: tuple[str, ...] = ()
    if run.moved_from and tool != RESOLVE:
        # The agent's first answer or back since a person moved the run (ADR 0083); a
        # person answering the run leaves the notice for the agent.
        result["next"] = moved_notice(run.moved_from, run.flow_version.content_hash) + str(
            result["next"]
        )
        run.moved_from = ""
        columns = ("moved_from",)
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
        columns=columns,
        resumed=resumed,
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
    resumed: bool = False,
) -> None:
    """Save the run's new state and append its step, in the caller's transaction: an
    UPDATE of the columns a step changes (``_STEP_COLUMNS`` and ``columns``) and an INSERT,
    built once (``step_store``). ``caller`` is who made the call (a caller's key).

    The events the step reports (``runs_app.events``: the run stalled, completed, was
    closed, or with ``resumed`` was answered by a person) are one more INSERT in the same
    transaction, only when some subscription wants one of them (spec §8, ADR 0077)."""
    before = "" if run.pk is None else run.state
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
        packed_result=pack_json(compact_json(result)),
        status=result_status(result),
        node_before=node_before,
        node_after=run.node,
        caller=caller,
        created_at=now,
        # The first step binds the flow version the run is pinned to (ADR 0067), and a
        # move the version it pins the run to from then on (ADR 0083).
        flow_hash=run.flow_version.content_hash if (new or tool == MOVE) and run.salt else "",
    )
    chain_append(run, step, result=result)
    if new:  # guide_start: the run is new
        run.save(force_insert=True)
        step.run = run  # now with its id
        update: tuple[str, ...] = ()
    else:
        update = (*_STEP_COLUMNS, *columns)
    step_store.step_append(run, step, update=update)
    events_record(step_events(run, before, result, resumed=resumed), now=now)


# The columns a step changes (an UPDATE of these only); a close also sets its reason.
_STEP_COLUMNS = ("packed_state", "state", "node", "outcome", "revision", "updated_at", "head_hash")
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


# --- moving runs onto the live version (spec §4, ADR 0083) ------------------------------------


@dataclass(frozen=True)
class MoveReport:
    """What ``runs_move`` did (or, in a dry run, would do): one plan per run considered."""

    flow_id: str
    live: str  # the live version's content hash
    plans: list[MovePlan]
    dry_run: bool

    @property
    def moving(self) -> list[MovePlan]:
        return [plan for plan in self.plans if plan.moves]

    def lines(self) -> list[str]:
        """One line per run, then the summary."""
        return [plan.line() for plan in self.plans] + [self.summary()]

    def summary(self) -> str:
        moving, staying = len(self.moving), len(self.plans) - len(self.moving)
        if not self.plans:
            return f"no active or stalled run of {self.flow_id} is on an older version"
        verb = ("would move", "would stay") if self.dry_run else ("moved", "stayed")
        tail = " (dry run: nothing changed)" if self.dry_run else ""
        return (
            f"{len(self.plans)} run{'s' if len(self.plans) != 1 else ''} of {self.flow_id} "
            f"on older versions: {moving} {verb[0]} to revision {self.live[:12]}, "
            f"{staying} {verb[1]}{tail}"
        )


def runs_move(
    *, flow_id: str, by: str, run_ids: Sequence[str] = (), dry_run: bool = False
) -> MoveReport:
    """Move the active and stalled runs of ``flow_id`` pinned to older versions (or only
    ``run_ids``) onto its live version, each that can (``migration.plan_move``): one
    ``move`` step in its chain (old and new content hash, ``by``, the time) and one audit
    record each. ``dry_run`` plans and changes nothing.

    Each run is decided under its lock, in a transaction of its own, from its steps as
    they are then: an answer that commits first is replayed with the others, one that
    comes after applies to the moved run; never half (the step services lock the same
    row). A named run that is not an open run of an older version stays, with why.

    Raises NotFound for a flow that is not live.
    """
    flow = flow_live(flow_id)
    refuse_path = path_refusal(flow, flow_guarantees(flow))
    older = (
        Run.objects.filter(flow_id=flow.id, state__in=OPEN_STATES)
        .exclude(flow_version__content_hash=flow.content_hash)
        .order_by("started_at", "id")
    )
    plans: list[MovePlan] = []
    if run_ids:
        found = set(older.filter(public_id__in=list(run_ids)).values_list("public_id", flat=True))
        chosen = [run_id for run_id in dict.fromkeys(run_ids)]
    else:
        chosen = list(older.values_list("public_id", flat=True))
        found = set(chosen)
    for run_id in chosen:
        if run_id not in found:
            plans.append(MovePlan(run_id, None, _not_movable(flow_id, flow.content_hash, run_id)))
            continue
        if dry_run:
            run = Run.objects.select_related("flow_version").get(public_id=run_id)
            plans.append(_plan(run, flow, refuse_path))
        else:
            plans.append(_move_one(run_id, flow, refuse_path, by))
    return MoveReport(flow.id, flow.content_hash, plans, dry_run)


PathRefusal = Callable[[RunState], str | None] | None


def _plan(run: Run, flow: Flow, refuse_path: PathRefusal) -> MovePlan:
    stored, steps = run_history(run)
    return plan_move(flow, run.public_id, run_state(run), steps, refuse_path)


def _move_one(
    run_id: str,
    flow: Flow,
    refuse_path: PathRefusal,
    by: str,
) -> MovePlan:
    with _transaction():
        run = step_store.run_locked(run_id, step_store.Visibility(every=True))
        if run is None or run.state not in OPEN_STATES:
            state = "gone" if run is None else run.state
            return MovePlan(run_id, None, f"it is {state} now: only active and stalled runs move")
        old = run.flow_version.content_hash
        if old == flow.content_hash:
            return MovePlan(run_id, None, "it is on the live version already")
        plan = _plan(run, flow, refuse_path)
        if plan.state is None:
            return plan
        now = timezone.now()
        run.flow_version = flow_version_pin(flow=flow, now=now)
        run.moved_from = old
        result = moved_result(
            run.public_id,
            old=old,
            new=flow.content_hash,
            state=plan.state.state,
            node=plan.state.node or "",
            replayed=plan.replayed,
        )
        _record(
            run,
            by,
            plan.state,
            flow=None,
            tool=MOVE,
            call={"from": old, "to": flow.content_hash},
            result=result,
            node_before=run.node,
            now=now,
            columns=("flow_version", "moved_from"),
        )
        audit.audit_record(
            audit.Entry(
                tool="move run",
                outcome="moved",
                status=0,
                duration_ms=0.0,
                caller=by,
                run_id=run.public_id,
            )
        )
        return plan


def _not_movable(flow_id: str, live: str, run_id: str) -> str:
    """Why a run named for a move is not one of the runs that can move."""
    run = Run.objects.select_related("flow_version").filter(public_id=run_id).first()
    if run is None:
        return "no such run"
    if run.flow_id != flow_id:
        return f"it is a run of {run.flow_id}, not {flow_id}"
    if run.flow_version.content_hash == live:
        return "it is on the live version already"
    return f"it is {run.state}: only active and stalled runs move"


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
