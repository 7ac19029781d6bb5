"""A run's history replayed on its pinned flow, and compared with what was stored.

Each stored step holds the input of one accepted call. Replaying them in order through
the engine (``start``, ``answer``, ``back``, ``close``; an ``adopt`` step changes only the
run's owner) must give back, step by step, the
result, status and nodes that were stored, and in the end the run's stored state: the
engine is deterministic, so any difference means a stored row was changed (or the engine
changed how it decides, which a release must never do to existing runs). ADR 0033.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flows_app.domain import engine
from flows_app.domain.errors import Refusal
from flows_app.domain.model import Flow
from flows_app.domain.results import (
    ADOPT,
    RESOLVE,
    adopted_result,
    closed_result,
    result_status,
    start_result,
    step_result,
)
from flows_app.domain.state import RunState


@dataclass(frozen=True)
class StoredStep:
    """One step as stored: the call's input and what the call returned and recorded."""

    seq: int
    tool: str
    input: Mapping[str, Any]
    result: Mapping[str, Any]
    status: str
    node_before: str
    node_after: str


@dataclass(frozen=True)
class StoredRun:
    """A run's own columns as stored, besides its steps."""

    run_id: str
    engine_state: Mapping[str, Any]
    state: str
    node: str
    outcome: str


def replay_differences(flow: Flow, run: StoredRun, steps: Sequence[StoredStep]) -> list[str]:
    """Every way the stored run differs from the replay of its steps, in order; empty when
    they agree. A step whose input the engine now refuses stops the replay there."""
    differences: list[str] = []
    state: RunState | None = None
    for step in steps:
        where = f"step {step.seq} ({step.tool})"
        node_before = "" if state is None else state.node or ""
        try:
            state, result = _apply(flow, run.run_id, state, step)
        except Refusal as refusal:
            return [*differences, f"{where}: the engine refuses its input ({refusal.error})"]
        except (KeyError, TypeError, ValueError) as exc:
            return [*differences, f"{where}: cannot be replayed ({type(exc).__name__}: {exc})"]
        differences += _compare(where, step, result, node_before, state.node or "")
    if state is None:
        return [*differences, "the run has no steps"]
    if _as_stored(state.to_dict()) != dict(run.engine_state):
        differences.append("the stored state differs from the replay of the steps")
    columns = {"state": state.state, "node": state.node or "", "outcome": state.outcome or ""}
    stored = {"state": run.state, "node": run.node, "outcome": run.outcome}
    for name, value in columns.items():
        if stored[name] != value:
            differences.append(f"the run's {name} is {stored[name]!r}; the replay gives {value!r}")
    return differences


def _apply(
    flow: Flow, run_id: str, state: RunState | None, step: StoredStep
) -> tuple[RunState, dict[str, Any]]:
    given = step.input
    if step.tool == "guide_start":
        if state is not None:
            raise ValueError("guide_start after the first step")
        transition = engine.start(flow, given.get("values"))
        return transition.state, start_result(run_id, flow, transition)
    if state is None:
        raise ValueError("the first step is not guide_start")
    if step.tool == "guide_answer":
        transition = engine.answer(
            flow, state, choice=given.get("choice"), values=given.get("values")
        )
        return transition.state, step_result(run_id, transition)
    if step.tool == "guide_back":
        transition = engine.back(flow, state, given.get("to"))
        return transition.state, step_result(run_id, transition)
    if step.tool == RESOLVE:  # a person's answer (its note changes nothing the engine decides)
        transition = engine.resolve(
            flow, state, choice=given.get("choice"), values=given.get("values")
        )
        return transition.state, step_result(run_id, transition)
    if step.tool == "guide_close":
        return engine.close(state), closed_result(run_id, str(given["reason"]))
    if step.tool == ADOPT:  # another owner; the run stays as it was
        return state, adopted_result(run_id, str(given["owner"]))
    raise ValueError(f"no such tool {step.tool!r}")


def _compare(
    where: str, step: StoredStep, result: dict[str, Any], node_before: str, node_after: str
) -> list[str]:
    found: list[str] = []
    result = _as_stored(result)
    if dict(step.result) != result:
        keys = sorted(k for k in {*step.result, *result} if step.result.get(k) != result.get(k))
        found.append(f"{where}: the stored result differs from the replay in {', '.join(keys)}")
    recorded = {
        "status": step.status,
        "node_before": step.node_before,
        "node_after": step.node_after,
    }
    replayed = {
        "status": result_status(result),
        "node_before": node_before,
        "node_after": node_after,
    }
    for name, value in recorded.items():
        if value != replayed[name]:
            found.append(f"{where}: {name} is {value!r}; the replay gives {replayed[name]!r}")
    return found


def _as_stored(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` as it reads back from storage (JSON: tuples become lists)."""
    stored: dict[str, Any] = json.loads(json.dumps(value, ensure_ascii=False))
    return stored
