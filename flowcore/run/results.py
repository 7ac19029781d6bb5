"""What a call that changes a run returns, shaped once: the services build results with
these, and ``replay`` rebuilds them from the stored inputs to check a run's history.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from typing import Any

from flowcore.flow.model import Flow
from flowcore.run import engine
from flowcore.run.engine import Transition

# The step that hands a run to another owner (``runs_app.adoption.run_adopt``): not a tool
# an agent calls, a step of the run's chain all the same, which the replay passes over.
ADOPT = "adopt"
# The step of a person resolving a stalled run: its caller is the person, its input the
# answer and the person's note; the replay applies it with ``engine.resolve``.
RESOLVE = "resolve"
# The step that moves a run onto another version of its flow: made by a person, not an
# agent; the replay rebuilds the run on the version it moved to.
MOVE = "move"

# The key of a step's stored input that holds the date of the step, which a check's
# condition reads as today (ADR 0117): stored only by a step that passed a check, so that
# every other step is stored, and hashed, as before.
TODAY_KEY = "today"


def step_today(flow: Flow, now: datetime) -> date | None:
    """The date of a step made at ``now`` (UTC), as the engine is given it; None for a
    flow without a check, whose steps never record one."""
    return now.astimezone(UTC).date() if flow.has_checks else None


def recorded_today(given: Mapping[str, Any]) -> date | None:
    """The date a stored step's input records (None when it records none)."""
    text = given.get(TODAY_KEY)
    return date.fromisoformat(text) if isinstance(text, str) else None


CLOSED_NEXT = (
    "The run is closed. Start a new run with guide_start if the person comes back "
    "with the same need."
)


def flow_summary(
    flow: Flow, *, with_summary: bool = False, rules: int = engine.RULES
) -> dict[str, Any]:
    """``{id, title, version}`` (and ``summary``); a flow without a version has no key.

    ``version`` is text, as the API and webhooks give it, whether its author wrote
    ``2`` or ``"2024.2"``; ``rules``: those of the run whose start this words (a run
    started under rules 2 gave the number as written, and is replayed so).
    """
    out: dict[str, Any] = {"id": flow.id, "title": flow.title}
    if with_summary:
        out["summary"] = flow.display_summary
    if flow.version is not None:
        out["version"] = str(flow.version) if rules >= 3 else flow.version
    return out


def start_result(run_id: str, flow: Flow, transition: Transition) -> dict[str, Any]:
    """guide_start's result: the step result plus the flow and its index."""
    return {
        "run_id": run_id,
        "flow": flow_summary(flow, rules=transition.state.rules),
        **transition.result,
        "index": engine.index(flow),
    }


def step_result(run_id: str, transition: Transition) -> dict[str, Any]:
    """guide_answer's and guide_back's result."""
    return {"run_id": run_id, **transition.result}


def closed_result(run_id: str, reason: str) -> dict[str, Any]:
    """guide_close's result (a repeated close adds ``repeated``)."""
    return {"run_id": run_id, "state": "closed", "reason": reason, "next": CLOSED_NEXT}


def stalled_since(steps: Iterable[tuple[str, str, str, datetime]]) -> datetime | None:
    """When a run began to wait for a person, from its steps in order, each as (tool,
    status, the state a move left, time); None when the steps leave it not stalled.

    The wait began with the step that stalled the run. An adopt or a move that leaves it
    stalled changes who owns it or its version, not how long a person has kept it
    waiting; a person's answer that stalls it again begins a new wait.
    """
    since: datetime | None = None
    for tool, status, moved_to, at in steps:
        if tool == ADOPT:
            continue
        if (moved_to if tool == MOVE else status) != "stalled":
            since = None
        elif since is None or tool == RESOLVE:
            since = at
    return since


def result_status(result: dict[str, Any]) -> str:
    """The status a step records for its result: a step result's ``status``, a close's
    ``state``."""
    return str(result.get("status") or result.get("state"))


def adopted_result(run_id: str, owner: str) -> dict[str, Any]:
    return {"run_id": run_id, "status": "adopted", "owner": owner}


def moved_result(
    run_id: str, *, old: str, new: str, state: str, node: str, replayed: int
) -> dict[str, Any]:
    """What a ``move`` step records: the content hashes it moved the run from and to,
    where the run waits on the new version, and how many answers were replayed."""
    return {
        "run_id": run_id,
        "status": "moved",
        "from": old,
        "to": new,
        "state": state,
        "node": {"id": node},
        "replayed": replayed,
    }


def moved_notice(old: str, new: str, node: str | None = None) -> str:
    """What opens ``next`` in the first result an agent gets after its run was moved.

    >>> moved_notice("a" * 64, "b" * 64)[:60]
    'The procedure was changed while this run waited: it now foll'
    """
    return (
        "The procedure was changed while this run waited: it now follows revision "
        f"{new[:12]} (it was on {old[:12]}), with every answer kept"
        + (f"; it waits at {node}. " if node else ". ")
    )
