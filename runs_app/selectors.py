"""Reads of runs (``run_get`` is the one place that decides whether a caller may see a
run), of agent keys, and of a run's history for ``verify``."""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Case, Count, F, IntegerField, Min, Q, QuerySet, Value, When

from access_app.callers import KEY_OWNER, RUNS_VIEW, STAFF, Caller
from access_app.guards import SEE_PERSONAL_VALUES
from flowcore.checks.capture import RecordedStep
from flowcore.common.errors import NotFound, Refusal
from flowcore.common.limits import (
    MAX_RUNS_PER_PAGE,
    RECENT_RUNS,
    RECENT_RUNS_FOR_CANDIDATES,
    RUNS_PER_PAGE,
    USAGE_MAX_RUNS,
)
from flowcore.common.names import closest
from flowcore.common.text import control_character, shown
from flowcore.flow.model import Flow
from flowcore.run import engine
from flowcore.run.lookups import LOOKUPS_KEY
from flowcore.run.replay import StoredRun, StoredStep
from flowcore.run.results import RESOLVE, flow_summary, moved_notice
from flowcore.run.state import RunState
from flows_app.models import FlowVersion
from flows_app.runs_port import FlowRuns, UsageInputs
from flows_app.selectors import flow_of_version
from runs_app import step_store
from runs_app.chain import iso
from runs_app.models import Claim, Run, Step, unpacked_state
from runs_app.step_store import Visibility


def visibility(caller: Caller) -> Visibility:
    """Which runs ``caller`` may see (ADR 0032).

    Staff allowed to read runs see every run; other staff none. A caller with an agent
    key sees the runs its key's name started. A caller without a key (no key is needed on
    this server) sees the runs no key started: there, the run id itself is what grants
    access, as it was before keys existed.
    """
    if RUNS_VIEW in caller.permissions:
        return Visibility(every=True)
    if caller.key_name:
        return Visibility(owner=caller.key)
    if caller.key.startswith(STAFF):
        return Visibility()
    return Visibility(keyless=True)


def _visible_q(visible: Visibility) -> Q:
    """``visible`` as the ORM's filter (the locked read states it in its own SQL)."""
    if visible.every:
        return Q()
    if visible.owner is not None:
        return Q(owner=visible.owner)
    if visible.keyless:
        return ~Q(owner__startswith=KEY_OWNER)
    return Q(owner__isnull=True)  # no run: the same query, no row


def may_see(caller: Caller, owner: str) -> bool:
    """Whether ``caller`` may see a run started by ``owner``: ``visibility`` in Python,
    with the owners compared in constant time (``hmac.compare_digest``)."""
    visible = visibility(caller)
    if visible.every:
        return True
    if visible.owner is not None:
        return hmac.compare_digest(owner.encode(), visible.owner.encode())
    return visible.keyless and not owner.startswith(KEY_OWNER)


def owner_scope(caller: Caller) -> str | None:
    """The owner a run list is narrowed to for ``caller``: None for staff (every run)."""
    return None if RUNS_VIEW in caller.permissions else caller.key


def run_get(caller: Caller, run_id: str, *, for_update: bool = False) -> Run:
    """The run ``run_id`` as ``caller`` may see it. Raises NotFound ("run not found").

    A run the caller may not see is refused exactly like one that does not exist, by the
    same code path: who may see what is part of the query (``visibility``), so neither
    returns a row, and the refusal is the same error with candidates drawn only from
    the caller's own runs; the row read is checked again (``may_see``, in constant time).
    An id no run can have (a control character: PostgreSQL cannot even compare a NUL)
    is simply not found, without a query. ADR 0072 (the same time to refuse both).

    ``for_update`` (inside a transaction: the services' steps) reads it locked, in the
    same one statement: a row lock on PostgreSQL (the run only, not the flow version every
    run of a flow shares); on SQLite the IMMEDIATE transaction already holds the
    database's write lock. That read is ``step_store.run_locked``'s statement, built
    once (ADR 0095): the run's flow version comes with only what finding its flow needs.
    """
    visible = visibility(caller)
    if control_character(run_id) is not None:
        run = None
    elif for_update:
        run = step_store.run_locked(run_id, visible)
    else:
        found = Run.objects.select_related("flow_version").filter(public_id=run_id)
        run = found.filter(_visible_q(visible)).first()
    if run is None or not may_see(caller, run.owner):
        raise NotFound(
            "run not found",
            f"no run has id {shown(run_id)}",
            "Check the run_id from guide_start's result, or start a new run with guide_start.",
            candidates=closest(run_id, _recent_runs_seen_by(caller)),
        )
    return run


def run_visible(caller: Caller, run_id: object) -> bool:
    """Whether ``run_id`` names a run ``caller`` may see (one indexed read, which finds no
    row for a run the caller may not see, as for one that does not exist)."""
    if not isinstance(run_id, str) or control_character(run_id) is not None:
        return False
    return Run.objects.filter(public_id=run_id).filter(_visible_q(visibility(caller))).exists()


def _recent_runs_seen_by(caller: Caller) -> list[str]:
    """The ids of recent runs ``caller`` may see: its key's, or every run for staff who
    may read them all; none for a caller without a key, whose runs cannot be told from
    other keyless callers' (their ids are their access)."""
    visible = visibility(caller)
    if visible.every:
        seen = Run.objects.all()
    elif visible.owner is not None:
        seen = Run.objects.filter(owner=visible.owner)
    else:
        return []
    # The latest started, by the primary key: no index holds updated_at (ADR 0091), and
    # staff's candidates come from every run.
    recent = seen.order_by("-id").values_list("public_id", flat=True)
    return list(recent[:RECENT_RUNS_FOR_CANDIDATES])


def personal_hidden(caller: Caller, flow: Flow) -> frozenset[str]:
    """The value keys of ``flow`` to mask for ``caller``: its personal keys (spec §1.2),
    unless the caller may see personal values (ADR 0087)."""
    if SEE_PERSONAL_VALUES in caller.permissions:
        return frozenset()
    return flow.personal_keys


def run_flow(run: Run) -> Flow:
    """The exact flow content the run started on."""
    return flow_of_version(run.flow_version)


def run_state(run: Run) -> RunState:
    return RunState.from_dict(run.engine_state)


def run_status(*, caller: Caller, run_id: str) -> dict[str, Any]:
    """guide_status: where the run is, how it got there, and what to do now.

    Raises Refusal for a run the caller cannot see.
    """
    run = run_get(caller, run_id)
    flow = run_flow(run)
    state = run_state(run)
    status: dict[str, Any] = {
        "run_id": run.public_id,
        "flow": flow_summary(flow),
        "state": state.state,
    }
    node = flow.nodes.get(state.node) if state.node else None
    if node is not None:
        status["node"] = engine.node_view(node, state)
    status["path"] = [entry.to_dict() for entry in state.path]
    # In the flow's own order (the order of index), whatever order they were given in.
    status["values"] = {k: state.values[k] for k in flow.value_keys if k in state.values}
    if state.outcome is not None or state.folded:
        status["outcome"] = state.outcome
    if state.handoff:
        status["handoff"] = state.handoff
    if run.ref:
        status["ref"] = run.ref
    status["started_at"] = iso(run.started_at)
    status["updated_at"] = iso(run.updated_at)
    status["next"] = engine.directive(flow, state, person_note(run, state))
    if run.moved_from:  # moved by a person since the agent's last answer (ADR 0083)
        notice = moved_notice(run.moved_from, run.flow_version.content_hash, state.node)
        status["next"] = notice + status["next"]
    return status


def person_note(run: Run, state: RunState) -> str | None:
    """The note of the person whose answer moved ``run`` last (its latest ``resolve``
    step's), for the agent to go on with; None, without a query, when the last answer
    was not a person's, and for a note erased."""
    if engine.person_answered_last(state) is None:
        return None
    step = run.steps.filter(tool=RESOLVE).order_by("-seq").only("input").first()
    note = step.input.get("note") if step is not None and isinstance(step.input, dict) else None
    return note if isinstance(note, str) else None


def last_answer_at(run: Run, node: str) -> Step | None:
    """The run's most recent guide_answer given while it waited at ``node``."""
    return run.steps.filter(tool="guide_answer", node_before=node).order_by("-seq").first()


# --- lists and pages for people (the run pages and the JSON API) -------------------------------

# The columns a run list shows: never the engine state nor the flow's source text.
_LIST_COLUMNS = (
    "public_id",
    "flow_id",
    "state",
    "node",
    "outcome",
    "ref",
    "owner",
    "revision",
    "started_at",
    "updated_at",
    "stalled_at",
    "erased_at",
    "flow_version__title",
    "flow_version__version",
    "flow_version__content_hash",
)


@dataclass(frozen=True)
class RunFilters:
    """What a run list is narrowed to: a state, a flow, a run id or ref to look for, the
    owner (``owner_scope``: None for every owner), and the runs a person has claimed
    (``claimed_by``, a user name). ``inbox`` orders it as the ops page does: the runs
    waiting for a person first, the longest waiting first (ADR 0080)."""

    state: str | None = None
    flow_id: str | None = None
    q: str | None = None
    owner: str | None = None
    claimed_by: str | None = None
    inbox: bool = False


@dataclass(frozen=True)
class RunsPage:
    items: list[Run]
    total: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))


def runs_filtered(filters: RunFilters) -> QuerySet[Run]:
    """Runs matching ``filters``, most recent activity first, with only the listed columns.

    A run's step count is its ``revision``: every accepted call appends exactly one
    step and bumps it (``steps_verify`` checks that they agree).
    """
    runs = Run.objects.select_related("flow_version").only(*_LIST_COLUMNS)
    if filters.inbox:
        # Who took a run on, and the engine state that holds a stalled one's hand-over note
        # (``Run.handoff``).
        runs = runs.select_related("claim").only(
            *_LIST_COLUMNS, "packed_state", "claim__by", "claim__at"
        )
    if any(control_character(f) for f in (filters.state, filters.flow_id, filters.q) if f):
        return runs.none()  # nothing stored holds a control character
    if filters.state:
        runs = runs.filter(state=filters.state)
    if filters.flow_id:
        runs = runs.filter(flow_id=filters.flow_id)
    if filters.owner is not None:
        runs = runs.filter(owner=filters.owner)
    if filters.q:
        q = filters.q.strip()
        runs = runs.filter(Q(public_id__startswith=q) | Q(ref__icontains=q))
    if filters.claimed_by is not None:
        runs = runs.filter(claim__by=filters.claimed_by)
    if filters.inbox:
        # The stalled runs, by how long they have waited (since the step that stalled them,
        # whatever adopt or move step came after), then the rest by their last step.
        waiting = Case(
            When(state=Run.State.STALLED, then=Value(0)),
            default=Value(1),
            output_field=IntegerField(),
        )
        since = Case(When(state=Run.State.STALLED, then=F("stalled_at")), default=None)
        return runs.order_by(waiting, since.asc(nulls_last=True), "-updated_at", "-id")
    return runs.order_by("-updated_at", "-id")


def runs_page(filters: RunFilters, *, page: int, per_page: int = RUNS_PER_PAGE) -> RunsPage:
    """One page of ``runs_filtered``: two queries (a count and the rows) for any page size.

    ``page`` past the last one gives an empty page; ``per_page`` is clamped to
    1..MAX_RUNS_PER_PAGE.
    """
    per_page = min(max(per_page, 1), MAX_RUNS_PER_PAGE)
    page = max(page, 1)
    runs = runs_filtered(filters)
    total = runs.count()
    start = (page - 1) * per_page
    items = list(runs[start : start + per_page]) if start < total else []
    return RunsPage(items=items, total=total, page=page, per_page=per_page)


def runs_inbox_counts(name: str) -> tuple[int, int]:
    """How many runs wait for a person now, and how many of them the person ``name`` has
    taken on: one query."""
    counts = Run.objects.filter(state=Run.State.STALLED).aggregate(
        stalled=Count("id"), mine=Count("id", filter=Q(claim__by=name))
    )
    return counts["stalled"], counts["mine"]


def run_claim(run: Run) -> Claim | None:
    """Who has taken ``run`` on, if anyone."""
    return Claim.objects.filter(run=run).first()


def run_flow_ids() -> list[str]:
    """Every flow id some run or version was recorded for, for filters."""
    ids = FlowVersion.objects.order_by("flow_id").values_list("flow_id", flat=True).distinct()
    return list(ids)


def run_lookup_calls(run: Run) -> dict[str, Mapping[str, Any]]:
    """What the run's steps recorded of each lookup's last call, by node id (one query)."""
    calls: dict[str, Mapping[str, Any]] = {}
    recorded = run.steps.filter(input__has_key=LOOKUPS_KEY).order_by("seq")
    for given in recorded.values_list("input", flat=True):
        calls.update(given[LOOKUPS_KEY])
    return calls


def run_steps(run: Run, *, after: int = 0) -> list[Step]:
    """The run's steps after seq ``after``, in order (one query)."""
    return list(run.steps.filter(seq__gt=after).order_by("seq"))


def flow_runs_recent(flow_id: str, *, limit: int = RECENT_RUNS) -> list[Run]:
    return list(runs_filtered(RunFilters(flow_id=flow_id))[:limit])


def flow_usage_inputs(
    flow_id: str, *, since: datetime, max_runs: int = USAGE_MAX_RUNS
) -> UsageInputs:
    """The states of the flow's runs started since ``since`` (newest first, at most
    ``max_runs``) and its unmatched answers grouped in the database: two queries."""
    raw = list(
        Run.objects.filter(flow_id=flow_id, started_at__gte=since)
        .order_by("-started_at")
        .values_list("packed_state", flat=True)[: max_runs + 1]
    )
    rejected = (
        Step.objects.filter(run__flow_id=flow_id, run__started_at__gte=since, status="unmatched")
        .values("node_after", "input__choice")
        .annotate(n=Count("id"))
        .order_by()
    )
    return UsageInputs(
        states=[RunState.from_dict(unpacked_state(packed)) for packed in raw[:max_runs]],
        rejected=[(r["node_after"], _label(r["input__choice"]), r["n"]) for r in rejected],
        capped=len(raw) > max_runs,
    )


def flow_usage_by_version(
    flow_id: str, *, since: datetime, max_runs: int = USAGE_MAX_RUNS
) -> dict[str, UsageInputs]:
    """``flow_usage_inputs`` split by the version each run is on (its content hash): two
    queries, ``max_runs`` runs at most over all versions (newest first)."""
    raw = list(
        Run.objects.filter(flow_id=flow_id, started_at__gte=since)
        .order_by("-started_at")
        .values_list("flow_version__content_hash", "packed_state")[: max_runs + 1]
    )
    rejected = (
        Step.objects.filter(run__flow_id=flow_id, run__started_at__gte=since, status="unmatched")
        .values("run__flow_version__content_hash", "node_after", "input__choice")
        .annotate(n=Count("id"))
        .order_by()
    )
    capped = len(raw) > max_runs
    found: dict[str, UsageInputs] = {}
    for content_hash, packed in raw[:max_runs]:
        found.setdefault(content_hash, UsageInputs([], [], capped)).states.append(
            RunState.from_dict(unpacked_state(packed))
        )
    for r in rejected:
        inputs = found.setdefault(r["run__flow_version__content_hash"], UsageInputs([], [], capped))
        inputs.rejected.append((r["node_after"], _label(r["input__choice"]), r["n"]))
    return found


def _label(choice: object) -> str | None:
    return choice if isinstance(choice, str) else None


def runs_by_flow(*, since: datetime) -> dict[str, tuple[int, int]]:
    """Per flow id: (runs started since ``since``, runs stalled now among them); one query."""
    rows = (
        Run.objects.filter(started_at__gte=since)
        .values("flow_id")
        .annotate(n=Count("id"), stalled=Count("id", filter=Q(state=Run.State.STALLED)))
        .order_by()
    )
    return {r["flow_id"]: (r["n"], r["stalled"]) for r in rows}


def runs_by_version(flow_id: str) -> dict[str, dict[str, int]]:
    """Per content hash of ``flow_id``'s versions, its runs by state; one query."""
    rows = (
        Run.objects.filter(flow_id=flow_id)
        .values("flow_version__content_hash", "state")
        .annotate(n=Count("id"))
        .order_by()
    )
    found: dict[str, dict[str, int]] = {}
    for row in rows:
        found.setdefault(row["flow_version__content_hash"], {})[row["state"]] = row["n"]
    return found


class _FlowRuns:
    """``flows_app.runs_port.FlowRuns``: what a flow's pages read of runs."""

    runs_by_flow = staticmethod(runs_by_flow)
    runs_by_version = staticmethod(runs_by_version)
    flow_usage_by_version = staticmethod(flow_usage_by_version)
    flow_usage_inputs = staticmethod(flow_usage_inputs)
    flow_runs_recent = staticmethod(flow_runs_recent)


# What guidepost.apps hands to flows_app.runs_port.
flow_runs: FlowRuns = _FlowRuns()


@dataclass(frozen=True)
class RunRecording:
    """A run as it was recorded: its pinned flow version and every accepted call."""

    run_id: str
    flow_id: str
    content_hash: str  # the flow version the run is pinned to
    version: str  # that version's own ``version`` key ("" when none)
    ref: str
    state: str
    started_at: str
    steps: tuple[RecordedStep, ...]


def run_recording(*, run_id: str) -> RunRecording:
    """A run and its steps, for operators (the ``capture`` command, the admin): no caller
    is involved, so no ownership applies. Raises Refusal ("run not found")."""
    run = Run.objects.select_related("flow_version").filter(public_id=run_id).first()
    if run is None:
        recent = Run.objects.order_by("-updated_at").values_list("public_id", flat=True)
        raise Refusal(
            "run not found",
            f"no run has id {run_id!r}",
            "Copy the run id from the admin's run list or from guide_start's result.",
            candidates=closest(run_id, list(recent[:RECENT_RUNS_FOR_CANDIDATES])),
        )
    steps = tuple(
        RecordedStep(tool=step.tool, input=step.input, result=step.result)
        for step in run.steps.order_by("seq")
    )
    return RunRecording(
        run_id=run.public_id,
        flow_id=run.flow_id,
        content_hash=run.flow_version.content_hash,
        version=run.flow_version.version,
        ref=run.ref,
        state=run.state,
        started_at=iso(run.started_at),
        steps=steps,
    )


# --- a run's history, for verify -----------------------------------------------------------------


def run_history(
    run: Run, steps: Sequence[Step] | None = None
) -> tuple[StoredRun, list[StoredStep]]:
    """The run's columns and steps as plain data, for ``replay_differences``; ``steps``
    are the run's steps in order, when the caller has read them."""
    stored = StoredRun(
        run_id=run.public_id,
        engine_state=run.engine_state,
        state=run.state,
        node=run.node,
        outcome=run.outcome,
    )
    history = [
        StoredStep(
            seq=step.seq,
            tool=step.tool,
            input=step.input,
            result=step.result,
            status=step.status,
            node_before=step.node_before,
            node_after=step.node_after,
        )
        for step in (run.steps.order_by("seq") if steps is None else steps)
    ]
    return stored, history


# --- what /metrics reads (ADR 0082) ------------------------------------------------------------


def runs_by_flow_and_state() -> list[tuple[str, str, int]]:
    """(flow id, state, runs) for every pair that has runs: one grouped statement."""
    rows = Run.objects.order_by().values_list("flow_id", "state").annotate(n=Count("id"))
    return [(flow_id, state, n) for flow_id, state, n in rows]


def stalled_waiting() -> tuple[int, datetime | None]:
    """How many runs are stalled, waiting for a person, and since when the oldest has
    waited (since the step that stalled it): one statement."""
    found = Run.objects.filter(state=Run.State.STALLED).aggregate(
        n=Count("id"), oldest=Min("stalled_at")
    )
    return int(found["n"] or 0), found["oldest"]
