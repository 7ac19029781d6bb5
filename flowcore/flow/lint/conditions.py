"""The findings on a check's conditions, judged on a built Flow: ``bad_condition`` (does
not compile: syntax, a name the flow does not have, a comparison across types),
``unset_value`` (reads a value some path to the check leaves unset, outside ``has()``)
and ``shadowed_condition`` (comes after one that always holds); and ``unset_value`` for a
lookup that sends a value some path to it leaves unset."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from flowcore.common.graph import topological_order
from flowcore.common.names import closest
from flowcore.flow.conditions import TODAY, ConditionError, always_holds, check, reads
from flowcore.flow.lint.common import Report
from flowcore.flow.model import ERROR, AskNode, CheckNode, CollectNode, Flow, LookupNode


def check_conditions(report: Report, flow: Flow, lines: Mapping[str, int]) -> None:
    checks = [n for n in flow.nodes.values() if isinstance(n, CheckNode)]
    lookups = [n for n in flow.nodes.values() if isinstance(n, LookupNode)]
    if not checks and not lookups:
        return
    surely_set = set_on_every_path(flow)
    for lookup in lookups:
        _check_sent(report, lookup, surely_set[lookup.id], lines)
    if not checks:
        return
    types = flow.key_types
    keys = frozenset(types)
    for node in checks:
        shadowing: int | None = None
        for index, branch in enumerate(node.when):
            at = (node.id, f"when[{index}]")
            line = lines.get(f"{node.id}/when/{index}", lines.get(node.id))
            if shadowing is not None:
                report.warning(
                    "shadowed_condition",
                    f"condition #{index + 1} of {node.id} is never tried: condition "
                    f"#{shadowing + 1} always holds; remove it or the one that always holds",
                    at=at,
                    line=line,
                )
            try:
                check(branch.if_, types)
            except ConditionError as exc:
                report.error(
                    "bad_condition",
                    f"condition #{index + 1} of {node.id}, {branch.if_!r}, cannot be used: "
                    f"{exc}. {_fix(str(exc), types)}",
                    at=at,
                    line=line,
                )
                continue
            read = reads(branch.if_, keys)
            unset = [
                k
                for k in read.names
                if k in keys and k not in read.guarded and k not in surely_set[node.id]
            ]
            if unset:
                report.error(
                    "unset_value",
                    f"condition #{index + 1} of {node.id} reads {', '.join(unset)}, which some "
                    "path to it leaves without a value: guard "
                    + ("it" if len(unset) == 1 else "each")
                    + f" with has() (has({unset[0]}) && ...), or make the slot required",
                    at=at,
                    line=line,
                )
            if shadowing is None and always_holds(branch.if_, types):
                shadowing = index


def _check_sent(
    report: Report, node: LookupNode, surely_set: frozenset[str], lines: Mapping[str, int]
) -> None:
    """A lookup sends what the run holds: a key some path leaves unset would reach the
    endpoint on that path without it."""
    unset = [key for key in node.send if key not in surely_set]
    if unset:
        report.error(
            "unset_value",
            f"{node.id} sends {', '.join(unset)}, which some path to it leaves without a "
            "value: ask for "
            + ("it" if len(unset) == 1 else "each")
            + " on every path before the lookup (a required slot, an ask), or send only "
            "what every path gathers",
            at=(node.id, "send"),
            line=lines.get(f"{node.id}/send", lines.get(node.id)),
        )


def _fix(message: str, keys: Iterable[str]) -> str:
    unknown = re.search(r"undeclared reference to '([^']*)'", message)
    if unknown:
        close = closest(unknown.group(1), [*keys, TODAY], n=1)
        return (f"Did you mean {close[0]}? " if close else "") + (
            "Name only the flow's ask node ids, slot names and today"
        )
    if "no matching overload" in message:
        return (
            "Compare a value with one of its own type: a number slot with 100.0, an integer "
            "with 100, a date with today or timestamp('2024-01-01T00:00:00Z'), text with 'text'"
        )
    return "Write it in CEL, like amount > 100.0 or country in ['DE', 'FR']"


def set_on_every_path(flow: Flow) -> dict[str, frozenset[str]]:
    """Node id -> the keys that hold a value whenever a run arrives there, whatever path
    it took: an ask passed holds its answer, a collect passed its required slots, a lookup
    its label (``__error__`` when the call failed) and, left by a label of ``returns``, the
    keys it sets (left by ``__error__``, none: nothing came back to set them)."""
    preds: dict[str, list[str]] = {n: [] for n in flow.nodes}
    for node_id, targets in flow.successors.items():
        for target in targets:
            preds[target].append(node_id)
    arrive: dict[str, frozenset[str]] = {}
    leave: dict[tuple[str, str], frozenset[str]] = {}  # (node, target) -> keys set
    for node_id in topological_order(flow.successors):
        before = [leave[(p, node_id)] for p in preds[node_id] if (p, node_id) in leave]
        here = frozenset.intersection(*before) if before else frozenset()
        arrive[node_id] = here
        node = flow.nodes[node_id]
        answered: frozenset[str] = frozenset()  # set along the edges of a lookup's labels
        if isinstance(node, AskNode):
            here = here | {node.id}
        elif isinstance(node, CollectNode):
            here = here | {s.name for s in node.required_slots}
        elif isinstance(node, LookupNode):
            here = here | {node.id}  # its label, __error__ when the call failed
            answered = frozenset(node.sets)
        for target in flow.successors[node_id]:
            failed = isinstance(node, LookupNode) and node.next.get(ERROR) == target
            leave[(node_id, target)] = here if failed else here | answered
    return arrive
