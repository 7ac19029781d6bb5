"""Layer 3, the graph (``cycle``, ``unreachable``, ``dead_end``), run only when the
structure and references leave a graph whose findings are causes, not consequences.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flows_app.domain.graph import cycle_path, reachable, strongly_connected
from flows_app.domain.lint.common import Report, line_of


def _successors(node: Mapping[Any, Any]) -> list[str]:
    targets = node.get("next")
    if node.get("kind") == "ask" and isinstance(targets, dict):
        return list(dict.fromkeys(t for t in targets.values() if isinstance(t, str)))
    if node.get("kind") in ("tell", "collect") and isinstance(targets, str):
        return [targets]
    return []


def check_graph(
    report: Report, data: Mapping[Any, Any], nodes: Sequence[tuple[int, Mapping[Any, Any]]]
) -> None:
    # No blockers: every node is a mapping with a unique str id and every target exists.
    order = [node["id"] for _, node in nodes]
    lines = {node["id"]: line_of(node) for _, node in nodes}
    succ = {node["id"]: _successors(node) for _, node in nodes}
    in_cycle: set[str] = set()
    for component in strongly_connected(succ, order):
        first = component[0]
        if len(component) == 1 and first not in succ[first]:
            continue
        in_cycle.update(component)
        path = cycle_path(succ, set(component), first)
        others = [n for n in component if n not in path]
        extra = f" ({', '.join(others)} loop with them)" if others else ""
        report.error(
            "cycle",
            f"{' → '.join(path)} returns to {first}{extra}, and a run never enters a node twice: "
            "point one of these next at a later node or an end",
            at=(first,),
            line=lines[first],
        )
    entry = data["entry"]
    reached = reachable(succ, [entry])
    for node_id in order:
        if node_id not in reached:
            report.error(
                "unreachable",
                f"{node_id} cannot be reached from entry {entry}: point a next at it, or delete it",
                at=(node_id,),
                line=lines[node_id],
            )
    preds: dict[str, list[str]] = {node_id: [] for node_id in order}
    for node_id, children in succ.items():
        for child in children:
            preds[child].append(node_id)
    ends = [node["id"] for _, node in nodes if node.get("kind") == "end"]
    finishing = reachable(preds, ends)
    for node_id in order:
        if node_id not in finishing and node_id not in in_cycle:
            report.error(
                "dead_end",
                f"no end can be reached from {node_id}: every path from it runs into a loop; "
                "route it to an end node",
                at=(node_id,),
                line=lines[node_id],
            )
