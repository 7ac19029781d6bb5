"""Runs: every read and write of runs and steps, and the locking around them.

Interfaces (MCP tools, pages, commands) call these functions and shape their
output; the engine decides every transition. A call that fails raises
``ServiceError`` (or the engine's ``EngineError``) and writes nothing but its
failure count.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from flows_app import engine
from flows_app.catalog import current_catalog
from flows_app.engine import RunState, Transition
from flows_app.loader import build_flow, parse_yaml
from flows_app.model import Category, Flow
from runs_app.models import GENESIS_HASH, ClientFailures, FlowVersion, Run, Step

MAX_REF_LENGTH = 200
MAX_CLOSE_REASON_LENGTH = 500
# From this many consecutive failures on a run (or of a client), stop encouraging retries.
FAILURES_BEFORE_GIVING_UP = 3


@dataclass(frozen=True)
class Caller:
    """Who is calling: ``key`` scopes runs and failure counts; ``name`` is for the record."""

    key: str
    name: str = ""


class ServiceError(Exception):
    """A refused call, in the terms of contract section 7."""

    def __init__(
        self,
        error: str,
        reason: str,
        next: str,
        *,
        retryable: bool = False,
        candidates: list[str] | tuple[str, ...] = (),
    ) -> None:
        super().__init__(f"{error}: {reason}")
        self.error = error
        self.reason = reason
        self.next = next
        self.retryable = retryable
        self.candidates = list(candidates)


# --- flows --------------------------------------------------------------------------------


def flow_summary(flow: Flow, *, with_summary: bool = False) -> dict[str, Any]:
    """``{id, title, version}`` (and ``summary``); a flow without a version has no key."""
    out: dict[str, Any] = {"id": flow.id, "title": flow.title}
    if with_summary:
        out["summary"] = flow.display_summary
    if flow.version is not None:
        out["version"] = flow.version
    return out


def flows_overview(category: str | None) -> dict[str, Any]:
    """guide_flows: categories with counts, or the flows of one category."""
    catalog = current_catalog()
    if category is None:
        counts: dict[str, int] = {}
        for flow in catalog.flows.values():
            counts[flow.category] = counts.get(flow.category, 0) + 1
        return {
            "categories": [
                {
                    "id": c.id,
                    "title": c.title,
                    "description": c.description,
                    "count": counts.get(c.id, 0),
                }
                for c in catalog.categories.values()
            ],
            "next": "Pick the category that fits the person's need and call guide_flows with "
            "category=<id>. If none fits, help without a procedure.",
        }
    if category not in catalog.categories:
        raise ServiceError(
            "category not found",
            f"no category has id {category!r}",
            "Call guide_flows without category to list them, or use one of candidates.",
            retryable=True,
            candidates=closest_ids(category, _category_names(catalog.categories)),
        )
    flows = [f for f in catalog.flows.values() if f.category == category]
    if flows:
        next_text = (
            "Pick the flow whose summary fits and call guide_start with its flow_id, passing in "
            "values what the person already told you (see index in the result)."
        )
    else:
        next_text = (
            "No procedure exists for this category: do not invent one. Help the person without a "
            "flow, or hand over to a human."
        )
    return {
        "category": category,
        "flows": [flow_summary(f, with_summary=True) for f in flows],
        "next": next_text,
    }


def _category_names(categories: Mapping[str, Category]) -> dict[str, list[str]]:
    return {c.id: [c.title, c.description] for c in categories.values()}


def closest_ids(word: str, names: Mapping[str, list[str]], n: int = 5) -> list[str]:
    """Ids whose id, title or other names are nearest to ``word``, best first.

    A word found inside a title counts (so ``返金`` finds a flow titled ``返金したい``),
    then close spellings of ids and titles.
    """
    needle = word.strip().casefold()
    if not needle:
        return []
    scored: dict[str, float] = {}
    for item_id, labels in names.items():
        best = difflib.SequenceMatcher(None, needle, item_id.casefold()).ratio()
        for label in labels:
            text = label.casefold()
            if needle in text or (text and text in needle):
                best = max(best, 0.9)
            best = max(best, difflib.SequenceMatcher(None, needle, text).ratio())
        if best >= 0.5:
            scored[item_id] = best
    return sorted(scored, key=lambda i: -scored[i])[:n]


def _flow_names(flows: Mapping[str, Flow]) -> dict[str, list[str]]:
    return {f.id: [f.title, f.display_summary] for f in flows.values()}


@lru_cache(maxsize=256)
def _flow_from_source(content_hash: str, source: str) -> Flow:
    data = parse_yaml(source).data
    category = str(data.get("category", ""))
    # A pinned version stays runnable even if its category was renamed since.
    flow, findings = build_flow(source, categories={category: Category(category, category)})
    if flow is None:
        raise ServiceError(
            "flow version unreadable",
            f"the pinned flow version {content_hash[:12]} no longer loads",
            "Hand the conversation to a human; report the run id to the operators.",
        )
    return flow


def flow_for_run(run: Run) -> Flow:
    """The exact flow content the run started on."""
    live = current_catalog().flows.get(run.flow_id)
    if live is not None and live.content_hash == run.flow_version.content_hash:
        return live
    return _flow_from_source(run.flow_version.content_hash, run.flow_version.source)


def _pin(flow: Flow, now: datetime) -> FlowVersion:
    version, _ = FlowVersion.objects.get_or_create(
        content_hash=flow.content_hash,
        defaults={
            "flow_id": flow.id,
            "title": flow.title,
            "version": "" if flow.version is None else str(flow.version),
            "source": flow.source,
            "created_at": now,
        },
    )
    return version


# --- runs ---------------------------------------------------------------------------------


def run_start(
    *, caller: Caller, flow_id: str, values: Mapping[str, object] | None, ref: str | None
) -> dict[str, Any]:
    """guide_start: start a run of a live flow, pinned to its content. Raises ServiceError
    for an unknown flow, EngineError for bad values."""
    catalog = current_catalog()
    flow = catalog.flows.get(flow_id)
    if flow is None:
        raise ServiceError(
            "flow not found",
            f"no flow has id {flow_id!r}",
            "Call guide_flows to find the flow, or use one of candidates.",
            retryable=True,
            candidates=closest_ids(flow_id, _flow_names(catalog.flows)),
        )
    transition = engine.start(flow, values)
    now = timezone.now()
    with transaction.atomic():
        run = Run(
            flow_version=_pin(flow, now),
            flow_id=flow.id,
            owner=caller.key,
            ref=ref or "",
            started_at=now,
            updated_at=now,
            engine_state={},
        )
        result: dict[str, Any] = {
            "run_id": run.public_id,
            "flow": flow_summary(flow),
            **transition.result,
            "index": engine.index(flow),
        }
        call = {"flow_id": flow_id, "values": values, "ref": ref}
        _record(
            run,
            transition.state,
            tool="guide_start",
            call=call,
            result=result,
            node_before="",
            now=now,
        )
    return result


def run_answer(
    *,
    caller: Caller,
    run_id: str,
    choice: str | None,
    values: Mapping[str, object] | None,
    at: str | None,
) -> dict[str, Any]:
    """guide_answer, with ``at`` for a safe retry (contract 5.3).

    Raises ServiceError for an unknown run or a lost race/moved run, EngineError for a
    call the engine refuses.
    """
    call = {"choice": choice, "values": values}
    seen = get_run(caller, run_id)
    flow = flow_for_run(seen)
    if at is not None and at not in flow.nodes:
        raise ServiceError(
            "node not found",
            f"the flow has no node {at!r}",
            "Set at to node.id from the last result (guide_status shows it), or leave it out.",
            retryable=True,
            candidates=difflib.get_close_matches(at, list(flow.nodes), n=5, cutoff=0.5),
        )
    with transaction.atomic():
        run = _lock(seen)
        moved = at is not None and (run.state != Run.State.ACTIVE or run.node != at)
        if moved or run.revision != seen.revision:
            replay = _last_answer_at(run, at or seen.node)
            if at is not None and replay is not None and replay.input == _canonical(call):
                return {**replay.result, "repeated": True}
            raise _conflict(run, at or seen.node)
        transition = engine.answer(flow, _state_of(run), choice=choice, values=values)
        return _advance(run, transition, tool="guide_answer", call=call)


def run_back(*, caller: Caller, run_id: str, to: str | None) -> dict[str, Any]:
    """guide_back (contract 3.5). Raises ServiceError/EngineError."""
    seen = get_run(caller, run_id)
    flow = flow_for_run(seen)
    with transaction.atomic():
        run = _lock(seen)
        if run.revision != seen.revision:
            raise _conflict(run, seen.node)
        transition = engine.back(flow, _state_of(run), to)
        return _advance(run, transition, tool="guide_back", call={"to": to})


def run_close(*, caller: Caller, run_id: str, reason: str) -> dict[str, Any]:
    """guide_close; closing a closed run again answers the same with ``repeated``."""
    seen = get_run(caller, run_id)
    with transaction.atomic():
        run = _lock(seen)
        if run.state == Run.State.CLOSED:
            return {**_closed_result(run), "repeated": True}
        if run.revision != seen.revision:
            raise _conflict(run, seen.node)
        state = engine.close(_state_of(run))
        run.close_reason = reason
        result = _closed_result(run)
        _record(
            run,
            state,
            tool="guide_close",
            call={"reason": reason},
            result=result,
            node_before=run.node,
            now=timezone.now(),
        )
        return result


def _closed_result(run: Run) -> dict[str, Any]:
    return {
        "run_id": run.public_id,
        "state": "closed",
        "reason": run.close_reason,
        "next": "The run is closed. Start a new run with guide_start if the person comes back "
        "with the same need.",
    }


def run_status(*, caller: Caller, run_id: str) -> dict[str, Any]:
    """guide_status: where the run is, how it got there, and what to do now."""
    run = get_run(caller, run_id)
    flow = flow_for_run(run)
    state = _state_of(run)
    status: dict[str, Any] = {
        "run_id": run.public_id,
        "flow": flow_summary(flow),
        "state": state.state,
    }
    node = flow.nodes.get(state.node) if state.node else None
    if node is not None:
        status["node"] = engine.node_view(flow, node, state)
    status["path"] = [entry.to_dict() for entry in state.path]
    # In the flow's own order (the order of index), whatever order they were given in.
    status["values"] = {k: state.values[k] for k in flow.value_keys if k in state.values}
    if state.outcome is not None or state.folded:
        status["outcome"] = state.outcome
    if state.handoff:
        status["handoff"] = state.handoff
    if run.ref:
        status["ref"] = run.ref
    status["started_at"] = _iso(run.started_at)
    status["updated_at"] = _iso(run.updated_at)
    status["next"] = engine.directive(flow, state)
    return status


def get_run(caller: Caller, run_id: str) -> Run:
    """The one place that decides whether ``caller`` may see ``run_id``. Raises ServiceError."""
    run = Run.objects.select_related("flow_version").filter(public_id=run_id).first()
    if run is None:
        own = Run.objects.filter(owner=caller.key).order_by("-updated_at")
        recent = list(own.values_list("public_id", flat=True)[:200])
        raise ServiceError(
            "run not found",
            f"no run has id {run_id!r}",
            "Check the run_id from guide_start's result, or start a new run with guide_start.",
            candidates=difflib.get_close_matches(run_id, recent, n=5, cutoff=0.6),
        )
    return run


def _lock(seen: Run) -> Run:
    # On PostgreSQL this is a row lock; on SQLite the IMMEDIATE transaction already
    # holds the database's write lock, which serialises writers the same way.
    # of=("self",): lock the run only, not the flow version every run of a flow shares.
    return (
        Run.objects.select_for_update(of=("self",)).select_related("flow_version").get(pk=seen.pk)
    )


def _state_of(run: Run) -> RunState:
    return RunState.from_dict(run.engine_state)


def _advance(
    run: Run, transition: Transition, *, tool: str, call: dict[str, Any]
) -> dict[str, Any]:
    result = {"run_id": run.public_id, **transition.result}
    _record(
        run,
        transition.state,
        tool=tool,
        call=call,
        result=result,
        node_before=run.node,
        now=timezone.now(),
    )
    return result


def _record(
    run: Run,
    state: RunState,
    *,
    tool: str,
    call: dict[str, Any],
    result: dict[str, Any],
    node_before: str,
    now: datetime,
) -> None:
    """Save the run's new state and append its step, in the caller's transaction."""
    run.engine_state = state.to_dict()
    run.state = state.state
    run.node = state.node or ""
    run.outcome = state.outcome or ""
    run.revision += 1
    run.failures = 0
    run.last_failure = ""
    run.updated_at = now
    prev_hash = run.head_hash
    step = Step(
        run=run,
        seq=run.revision,
        tool=tool,
        input=_canonical(call),
        result_json=json.dumps(result, ensure_ascii=False, separators=(",", ":")),
        status=str(result.get("status") or result.get("state")),
        node_before=node_before,
        node_after=run.node,
        created_at=now,
        prev_hash=prev_hash,
    )
    step.hash = step_hash(step, run.public_id)
    run.head_hash = step.hash
    run.save()
    step.save()


def _canonical(call: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments as stored: arguments not given are left out."""
    return {k: v for k, v in call.items() if v is not None}


def step_hash(step: Step, run_public_id: str) -> str:
    """SHA-256 over the step's content and the previous step's hash."""
    payload = json.dumps(
        [
            step.prev_hash,
            run_public_id,
            step.seq,
            step.tool,
            step.input,
            step.result,
            step.status,
            step.node_before,
            step.node_after,
            _iso(step.created_at),
        ],
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def steps_verify(run: Run) -> int | None:
    """Check the run's hash chain against its head; the seq of the first step that does not
    fit (``revision + 1`` when steps are missing at the end), or None when it is intact."""
    prev = GENESIS_HASH
    expected_seq = 1
    for step in run.steps.order_by("seq"):
        if (
            step.seq != expected_seq
            or step.prev_hash != prev
            or step.hash != step_hash(step, run.public_id)
        ):
            return step.seq
        prev = step.hash
        expected_seq += 1
    if prev != run.head_hash or expected_seq - 1 != run.revision:
        return expected_seq
    return None


def _last_answer_at(run: Run, node: str) -> Step | None:
    return run.steps.filter(tool="guide_answer", node_before=node).order_by("-seq").first()


def _conflict(run: Run, expected: str) -> ServiceError:
    """The run is not where the caller believes; say where it is now."""
    if run.state == Run.State.ACTIVE:
        now = f"waits at {run.node}"
        next_text = (
            f"Answer {run.node} instead (guide_status shows it), or guide_back to {expected}."
        )
    else:
        now = f"is {run.state}" + (f" at {run.node}" if run.node else "")
        next_text = "Call guide_status to see how the run ended before doing anything else."
    return ServiceError(
        "run has moved",
        f"the run is no longer at {expected}: it now {now}",
        next_text,
        retryable=True,
    )


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


# --- failures -----------------------------------------------------------------------------


def call_signature(tool: str, arguments: Mapping[str, Any]) -> str:
    text = json.dumps([tool, arguments], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def failure_record(*, caller: Caller, run: Run | None, signature: str) -> tuple[int, bool]:
    """Count a failed call on its run (or for its client); return (attempt, repeated)."""
    with transaction.atomic():
        if run is not None:
            locked = Run.objects.select_for_update().get(pk=run.pk)
            repeated = locked.last_failure == signature
            Run.objects.filter(pk=run.pk).update(failures=F("failures") + 1, last_failure=signature)
            return locked.failures + 1, repeated
        row, _ = ClientFailures.objects.select_for_update().get_or_create(
            client=caller.key, defaults={"updated_at": timezone.now()}
        )
        repeated = row.last_failure == signature
        row.failures += 1
        row.last_failure = signature
        row.updated_at = timezone.now()
        row.save()
        return row.failures, repeated


def client_failures_clear(caller: Caller) -> None:
    """A call without a run succeeded: the client's failure streak is over."""
    streak = ClientFailures.objects.filter(client=caller.key, failures__gt=0)
    if streak.exists():  # a read, so the common case takes no write lock
        streak.update(failures=0, last_failure="")
