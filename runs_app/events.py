"""The events a step of a run reports, recorded in the step's transaction so that an
event exists exactly when its change committed.

``step_record`` in ``runs_app.recording`` calls ``step_events`` for every step: a run that
stalls, completes or is closed by the step gets ``run.stalled``, ``run.completed`` or
``run.closed``; with ``resumed`` (a person resolved the stalled run) also
``run.resumed``; and ``run.looked_up`` for each lookup the step called, with how long
the call took. Events go through ``events_app.services.events_record``: ONE INSERT in the
step's transaction when some subscription wants one of them, nothing otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.urls import reverse

from events_app.services import Pending, kinds_wanted
from flowcore.run.personal import masked_values
from flows_app.selectors import flow_of_version
from runs_app.models import Run

LOOKED_UP = "run.looked_up"
# The state a step leads to, and the event that reports it (when the run was not in it).
_ENTERED = {
    Run.State.STALLED: "run.stalled",
    Run.State.COMPLETED: "run.completed",
    Run.State.CLOSED: "run.closed",
}


def step_events(
    run: Run,
    before: str,
    result: Mapping[str, Any],
    *,
    resumed: bool = False,
    lookups: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Pending]:
    """The events of a step that took ``run`` from state ``before`` ("" for a new run) to
    its state now; ``result`` is the step's result (a stall's reason is there),
    ``lookups`` what the step recorded of its calls, by node id."""
    kinds = ["run.resumed"] if resumed else []
    entered = _ENTERED.get(Run.State(run.state)) if run.state != before else None
    if entered:
        kinds.append(entered)
    if not kinds and not lookups:
        return []
    wanted = kinds_wanted()  # built only for a kind some subscription wants
    events = []
    if lookups and LOOKED_UP in wanted:
        events = [_looked_up(run, result, node, made) for node, made in lookups.items()]
    return events + [run_event(kind, run, result) for kind in kinds if kind in wanted]


def _looked_up(run: Run, result: Mapping[str, Any], node: str, made: Mapping[str, Any]) -> Pending:
    """``run.looked_up``: a lookup the step called, what came back and how long it took."""
    event = run_event(LOOKED_UP, run, result)
    took: Mapping[str, Any] = next((i for i in result.get("looked_up", ()) if i["id"] == node), {})
    lookup = flow_of_version(run.flow_version).nodes[node]
    said = {
        "node": node,
        "endpoint": getattr(lookup, "call", ""),
        "took": took.get("took"),
        "ms": made.get("ms"),
        **({"failed": took["failed"]} if "failed" in took else {}),
    }
    return Pending(LOOKED_UP, {**event.data, "lookup": said}, event.values)


def run_event(kind: str, run: Run, result: Mapping[str, Any] | None = None) -> Pending:
    """``kind`` about ``run`` as it is now: the data of spec §8, its values apart, those
    marked personal masked."""
    data: dict[str, Any] = {
        "run_id": run.public_id,
        "flow": {"id": run.flow_id, "version": run.flow_version.version},
        "state": run.state,
        "node": run.node or None,
        "ref": run.ref or None,
        "url": reverse("run", args=[run.public_id]),
    }
    if run.state == Run.State.STALLED:
        data["reason"] = (result or {}).get("reason")
        data["handoff"] = run.engine_state.get("handoff")
    elif run.state == Run.State.COMPLETED:
        data["outcome"] = run.outcome or None
    elif run.state == Run.State.CLOSED:
        data["reason"] = run.close_reason
    # Personal values leave masked, even to a subscription that asked for values: a
    # receiver is another system, outside the permission that shows them to a person.
    personal = flow_of_version(run.flow_version).personal_keys
    return Pending(kind, data, values=masked_values(run.engine_state.get("values") or {}, personal))
