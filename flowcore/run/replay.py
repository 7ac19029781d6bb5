"""A run's history replayed on its pinned flow, and compared with what was stored.

Each stored step holds the input of one accepted call. Replaying them in order through
the engine must give back, step by step, the result, status and nodes that were stored,
and in the end the run's stored state: the engine is deterministic, so any difference
means a stored row was changed. A run is replayed by the decision rules it was started
under (``RunState.rules``), which fix what it decides and how its results word it, so a
release that changes them changes nothing for the runs recorded before it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flowcore.common.errors import Refusal
from flowcore.flow.model import Flow
from flowcore.run import engine
from flowcore.run.lookups import LOOKUPS_KEY, LookupNeeded, recorded_lookups
from flowcore.run.migration import replay_inputs
from flowcore.run.results import (
    ADOPT,
    MOVE,
    RESOLVE,
    adopted_result,
    closed_result,
    moved_notice,
    moved_result,
    recorded_today,
    result_status,
    start_result,
    step_result,
)
from flowcore.run.state import RunState


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


def replay_differences(
    flow: Flow,
    run: StoredRun,
    steps: Sequence[StoredStep],
    flow_of: Callable[[str], Flow] | None = None,
) -> list[str]:
    """Every way the stored run differs from the replay of its steps, in order; empty when
    they agree. A step whose input the engine now refuses stops the replay there.

    ``flow`` is the version the run started on; ``flow_of`` gives the flow of a content
    hash, for the versions ``move`` steps moved the run to (Refusal when it no longer
    loads)."""
    differences: list[str] = []
    # The decision rules the run was started under: it is replayed by them.
    rules = int(run.engine_state.get("rules", 1))
    state: RunState | None = None
    moved: tuple[str, str] | None = None  # (from, to) until the agent's next answer or back
    for i, step in enumerate(steps):
        where = f"step {step.seq} ({step.tool})"
        node_before = "" if state is None else state.node or ""
        try:
            if step.tool == MOVE:
                if flow_of is None or state is None:
                    raise ValueError("a move with no version to move to")
                flow = flow_of(str(step.input["to"]))
                state, result = _move(flow, run.run_id, steps[:i], step, state.rules)
                moved = (str(step.input["from"]), str(step.input["to"]))
            else:
                state, result = _apply(flow, run.run_id, state, step, rules)
                if moved is not None and step.tool in ("guide_answer", "guide_back"):
                    result["next"] = moved_notice(*moved) + result["next"]
                    moved = None
        except Refusal as refusal:
            return [*differences, f"{where}: the engine refuses its input ({refusal.error})"]
        except LookupNeeded as need:
            return [
                *differences,
                f"{where}: it reaches the lookup {need.node.id} but recorded no answer of it",
            ]
        except (KeyError, TypeError, ValueError) as exc:
            return [*differences, f"{where}: cannot be replayed ({type(exc).__name__}: {exc})"]
        differences += _compare(where, step, result, node_before, state.node or "")
        differences += _digests(where, step.input)
    if state is None:
        return [*differences, "the run has no steps"]
    replayed, stored_state = _as_stored(state.to_dict()), _state_as_now(run.engine_state)
    if stored_state is not None and "passed" not in run.engine_state:
        # Stored before a state carried the length of its path, which the comparison of
        # the paths themselves covers.
        replayed.pop("passed", None)
        stored_state.pop("passed", None)
    if replayed != stored_state:
        differences.append("the stored state differs from the replay of the steps")
    columns = {"state": state.state, "node": state.node or "", "outcome": state.outcome or ""}
    stored = {"state": run.state, "node": run.node, "outcome": run.outcome}
    for name, value in columns.items():
        if stored[name] != value:
            differences.append(f"the run's {name} is {stored[name]!r}; the replay gives {value!r}")
    return differences


def _apply(
    flow: Flow, run_id: str, state: RunState | None, step: StoredStep, rules: int
) -> tuple[RunState, dict[str, Any]]:
    given = step.input
    # The date the step recorded: a check decides on it again, whatever day verify runs;
    # and what its lookups came back with: each decides again, and nothing is called.
    today = recorded_today(given)
    lookups = recorded_lookups(given)
    if step.tool == "guide_start":
        if state is not None:
            raise ValueError("guide_start after the first step")
        transition = engine.start(
            flow, given.get("values"), rules=rules, today=today, lookups=lookups
        )
        return transition.state, start_result(run_id, flow, transition)
    if state is None:
        raise ValueError("the first step is not guide_start")
    if step.tool == "guide_answer":
        transition = engine.answer(
            flow,
            state,
            choice=given.get("choice"),
            values=given.get("values"),
            today=today,
            lookups=lookups,
        )
        return transition.state, step_result(run_id, transition)
    if step.tool == "guide_back":
        transition = engine.back(flow, state, given.get("to"))
        return transition.state, step_result(run_id, transition)
    if step.tool == RESOLVE:  # a person resolved the run (the note changes nothing it decides)
        transition = engine.resolve(
            flow,
            state,
            choice=given.get("choice"),
            values=given.get("values"),
            today=today,
            lookups=lookups,
        )
        return transition.state, step_result(run_id, transition)
    if step.tool == "guide_close":
        return engine.close(state), closed_result(run_id, str(given["reason"]))
    if step.tool == ADOPT:  # another owner; the run stays as it was
        return state, adopted_result(run_id, str(given["owner"]))
    raise ValueError(f"no such tool {step.tool!r}")


def _move(
    flow: Flow, run_id: str, before: Sequence[StoredStep], step: StoredStep, rules: int
) -> tuple[RunState, dict[str, Any]]:
    replayed = replay_inputs(flow, before, rules=rules)
    if replayed.state is None:
        raise ValueError(f"its inputs do not replay on {flow.content_hash[:12]}: {replayed.reason}")
    state = replayed.state
    result = moved_result(
        run_id,
        old=str(step.input["from"]),
        new=str(step.input["to"]),
        state=state.state,
        node=state.node or "",
        replayed=replayed.answers + replayed.backs,
    )
    return state, result


def _digests(where: str, given: Mapping[str, Any]) -> list[str]:
    """Each recorded answer of a lookup whose SHA-256 is not the digest recorded beside it."""
    stored = given.get(LOOKUPS_KEY)
    if not isinstance(stored, Mapping):
        return []
    return [
        f"{where}: the recorded answer of the lookup {node} differs from its digest"
        for node, item in stored.items()
        if isinstance(item, Mapping)
        and isinstance(item.get("response"), str)
        and hashlib.sha256(item["response"].encode()).hexdigest() != item.get("digest")
    ]


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


# The fields a state held in the form before ``to_dict`` left defaults out (``passed``
# and ``rules`` came later).
_EVERY_FIELD = frozenset(RunState._fields) - {"passed", "rules"}


def _state_as_now(stored: Mapping[str, Any]) -> dict[str, Any] | None:
    """A stored state in the form ``RunState.to_dict`` writes today. A run stored before
    that form holds every field, each path entry as a mapping: it is read and written
    again (None when it reads as no state); any other is compared as it is."""
    if not _EVERY_FIELD <= stored.keys():
        return dict(stored)
    try:
        return _as_stored(RunState.from_dict(stored).to_dict())
    except (KeyError, TypeError, ValueError):
        return None


def _as_stored(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` as it reads back from storage (JSON: tuples become lists)."""
    stored: dict[str, Any] = json.loads(json.dumps(value, ensure_ascii=False))
    return stored
