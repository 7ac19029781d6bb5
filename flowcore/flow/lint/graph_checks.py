"""Layer 3, the graph (``cycle``, ``unreachable``, ``dead_end``), on the edges that resolve.

It runs alongside the other layers, so an author gets every finding in one round, and
reports causes, not consequences: a target with a close match counts as fixed that way
(a typo does not also make its node ``unreachable``); an edge that goes nowhere known yet
may lead to an end once fixed, so nothing before it is a ``dead_end``, nor is anything
made reachable by it; with a node id used twice the graph is not checked at all, and with
an entry that names no node and has no close match, ``unreachable`` is not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flowcore.common.graph import cycle_path, reachable, strongly_connected
from flowcore.common.names import closest
from flowcore.flow.lint.common import Report
from flowcore.flow.yaml_safe import line_of


def _targets(node: Mapping[Any, Any]) -> tuple[list[str], bool]:
    """The node's ``next`` targets as written, and whether they are all of its edges."""
    kind = node.get("kind")
    targets = node.get("next")
    if kind == "end":
        return [], True
    if kind == "check":
        when = node.get("when")
        items = when if isinstance(when, list) else []
        found = [i["next"] for i in items if isinstance(i, dict) and isinstance(i.get("next"), str)]
        otherwise = node.get("else")
        complete = isinstance(when, list) and len(found) == len(items) and bool(items)
        if isinstance(otherwise, str):
            found.append(otherwise)
        return found, complete and isinstance(otherwise, str)
    if isinstance(targets, str):
        return [targets], kind in ("tell", "collect")
    if not isinstance(targets, dict):
        return [], False
    found = [t for t in targets.values() if isinstance(t, str)]
    complete = kind in ("ask", "lookup") and len(found) == len(targets)
    labels = node.get("accepts" if kind == "ask" else "returns")
    if complete and isinstance(labels, dict):
        complete = all(label in targets for label in labels if isinstance(label, str))
    return found, complete


def check_graph(
    report: Report, data: Mapping[Any, Any], nodes: Sequence[tuple[int, Mapping[Any, Any]]]
) -> None:
    named = [(node["id"], node) for _, node in nodes if isinstance(node.get("id"), str)]
    by_id = dict(named)
    if len(by_id) < len(named):
        return
    order = list(by_id)
    lines = {node_id: line_of(node) for node_id, node in named}
    succ: dict[str, list[str]] = {}  # the edges that resolve
    fixed: dict[str, list[str]] = {}  # ... plus the did-you-mean fixes of those that do not
    open_ended: set[str] = set()  # nodes with an edge that goes nowhere known yet
    for node_id, node in named:
        targets, complete = _targets(node)
        if not complete:
            open_ended.add(node_id)
        resolved: list[str] = []
        guessed: list[str] = []
        for target in targets:
            if target in by_id:
                resolved.append(target)
                continue
            open_ended.add(node_id)
            guessed += closest(target, order, n=1)
        succ[node_id] = list(dict.fromkeys(resolved))
        fixed[node_id] = list(dict.fromkeys(resolved + guessed))

    in_cycle = _check_cycles(report, succ, order, lines)
    entry = data.get("entry")
    if isinstance(entry, str):
        start = [entry] if entry in by_id else closest(entry, order, n=1)
        if start:
            reached = reachable(fixed, start)
            for node_id in order:
                if node_id not in reached:
                    report.error(
                        "unreachable",
                        f"{node_id} cannot be reached from entry {start[0]}: point a next at "
                        "it, or delete it",
                        at=(node_id,),
                        line=lines[node_id],
                    )
    preds: dict[str, list[str]] = {node_id: [] for node_id in order}
    for node_id, children in succ.items():
        for child in children:
            preds[child].append(node_id)
    ends = [node_id for node_id, node in named if node.get("kind") == "end"]
    finishing = reachable(preds, [*ends, *open_ended])
    for node_id in order:
        if node_id not in finishing and node_id not in in_cycle:
            report.error(
                "dead_end",
                f"no end can be reached from {node_id}: every path from it runs into a loop; "
                "route it to an end node",
                at=(node_id,),
                line=lines[node_id],
            )


def _check_cycles(
    report: Report,
    succ: Mapping[str, Sequence[str]],
    order: Sequence[str],
    lines: Mapping[str, int | None],
) -> set[str]:
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
    return in_cycle
