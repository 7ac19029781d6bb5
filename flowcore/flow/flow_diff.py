"""What changes between two versions of a flow: for agents (a summary) and as text (a line diff).

``flow_changes`` compares two built flows the way an agent would notice: nodes
that appear or go, labels an ask accepts, where a label or a ``next`` leads,
slots, what a lookup asks of which endpoint and what it may answer, what is
said, and the outcomes a run can end with. ``line_diff`` is the
plain line diff of the two texts (difflib), grouped into hunks with context.
Pure: no Django, no I/O.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal

from flowcore.common.text import a_kind
from flowcore.flow.model import (
    ELSE,
    ERROR,
    TEXT,
    AskNode,
    CheckNode,
    CollectNode,
    EndNode,
    Flow,
    LookupNode,
    Node,
)

# The route of a tell or collect node, which has one `next` and no label.
NEXT = "next"


@dataclass(frozen=True)
class NodeRef:
    """A node that appears or goes; ``call`` is the endpoint a lookup asks, which a
    reviewer weighs as much as the node: runs now reach, or no longer reach, that system."""

    id: str
    kind: str
    call: str | None = None


@dataclass(frozen=True)
class KindChange:
    node: str
    old: str
    new: str


@dataclass(frozen=True)
class Label:
    node: str
    label: str


@dataclass(frozen=True)
class Route:
    """Where ``route`` (a label, ``__other__``, ``__unknown__`` or ``next``) of ``node`` leads."""

    node: str
    route: str
    target: str


@dataclass(frozen=True)
class Retarget:
    node: str
    route: str
    old: str
    new: str


@dataclass(frozen=True)
class ConditionChange:
    """A check's condition at ``position`` (from 1): ``old`` and ``new`` are its ``if``
    and the node it leads to, None where the condition is new or removed."""

    node: str
    position: int
    old: tuple[str, str] | None
    new: tuple[str, str] | None


@dataclass(frozen=True)
class TypeChange:
    """An ask whose answer outside its labels is another type (``text``: a short code)."""

    node: str
    old: str
    new: str


@dataclass(frozen=True)
class CallChange:
    """A lookup that asks another endpoint (``old`` and ``new`` are endpoint names)."""

    node: str
    old: str
    new: str


@dataclass(frozen=True)
class SendChange:
    """A lookup that sends other value keys to its endpoint."""

    node: str
    old: tuple[str, ...]
    new: tuple[str, ...]


@dataclass(frozen=True)
class LookupRoute:
    """Where a lookup's label, or ``__error__`` (its failed call), leads: ``old`` and ``new``
    are node ids, None where a failed call stalled or now stalls the run for a person."""

    node: str
    label: str
    old: str | None
    new: str | None


@dataclass(frozen=True)
class SetChange:
    """A key of a lookup's ``sets``: ``old`` and ``new`` are its type, None where the key
    is new or removed."""

    node: str
    key: str
    old: str | None
    new: str | None


@dataclass(frozen=True)
class SlotRef:
    node: str
    slot: str


@dataclass(frozen=True)
class Changed:
    """One flow-level field whose value changed (shown as text)."""

    key: str
    old: str
    new: str


@dataclass(frozen=True)
class FlowChanges:
    """Everything ``flow_changes`` found; empty tuples where nothing changed."""

    fields: tuple[Changed, ...] = ()
    nodes_added: tuple[NodeRef, ...] = ()
    nodes_removed: tuple[NodeRef, ...] = ()
    kinds_changed: tuple[KindChange, ...] = ()
    labels_added: tuple[Label, ...] = ()
    labels_removed: tuple[Label, ...] = ()
    routes_added: tuple[Route, ...] = ()
    routes_removed: tuple[Route, ...] = ()
    retargeted: tuple[Retarget, ...] = ()
    conditions_changed: tuple[ConditionChange, ...] = ()
    types_changed: tuple[TypeChange, ...] = ()
    returns_added: tuple[Label, ...] = ()
    returns_removed: tuple[Label, ...] = ()
    lookup_routes: tuple[LookupRoute, ...] = ()
    calls_changed: tuple[CallChange, ...] = ()
    sends_changed: tuple[SendChange, ...] = ()
    slots_added: tuple[SlotRef, ...] = ()
    slots_removed: tuple[SlotRef, ...] = ()
    sets_changed: tuple[SetChange, ...] = ()
    said_differently: tuple[str, ...] = ()
    outcomes_added: tuple[str, ...] = ()
    outcomes_gone: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not any(getattr(self, name) for name in self.__dataclass_fields__)


_FIELDS = ("title", "category", "summary", "version", "entry", "on_unknown", "on_stuck")


def flow_changes(old: Flow, new: Flow) -> FlowChanges:
    """What an agent walking ``new`` meets that it did not meet on ``old``, and what is gone.

    Nodes are matched by id. A node whose kind changed is reported as such and
    its labels and routes are not compared further. Order follows the new flow
    (removed things: the old flow).
    """
    shared = [nid for nid in new.nodes if nid in old.nodes]
    kinds_changed: list[KindChange] = []
    labels_added: list[Label] = []
    labels_removed: list[Label] = []
    routes_added: list[Route] = []
    routes_removed: list[Route] = []
    retargeted: list[Retarget] = []
    conditions: list[ConditionChange] = []
    types: list[TypeChange] = []
    slots_added: list[SlotRef] = []
    slots_removed: list[SlotRef] = []
    said: list[str] = []
    lookups: list[FlowChanges] = []
    for nid in shared:
        before, after = old.nodes[nid], new.nodes[nid]
        if before.say != after.say:
            said.append(nid)
        if before.kind != after.kind:
            kinds_changed.append(KindChange(nid, before.kind, after.kind))
            continue
        if isinstance(before, LookupNode) and isinstance(after, LookupNode):
            lookups.append(_lookup_changes(before, after))
            continue
        old_labels, new_labels = _labels(before), _labels(after)
        labels_added += [Label(nid, lb) for lb in new_labels if lb not in old_labels]
        labels_removed += [Label(nid, lb) for lb in old_labels if lb not in new_labels]
        old_routes, new_routes = _routes(before), _routes(after)
        for route, target in new_routes.items():
            if route not in old_routes:
                if route not in new_labels:
                    routes_added.append(Route(nid, route, target))
            elif old_routes[route] != target:
                retargeted.append(Retarget(nid, route, old_routes[route], target))
        routes_removed += [
            Route(nid, route, target)
            for route, target in old_routes.items()
            if route not in new_routes and route not in old_labels
        ]
        if isinstance(before, CheckNode) and isinstance(after, CheckNode):
            conditions += _conditions(before, after)
        if isinstance(before, AskNode) and isinstance(after, AskNode) and before.type != after.type:
            types.append(TypeChange(nid, before.type, after.type))
        old_slots, new_slots = _slots(before), _slots(after)
        slots_added += [SlotRef(nid, s) for s in new_slots if s not in old_slots]
        slots_removed += [SlotRef(nid, s) for s in old_slots if s not in new_slots]
    old_outcomes, new_outcomes = _outcomes(old), _outcomes(new)
    return FlowChanges(
        fields=tuple(
            Changed(key, _shown(getattr(old, key)), _shown(getattr(new, key)))
            for key in _FIELDS
            if getattr(old, key) != getattr(new, key)
        ),
        nodes_added=tuple(_ref(n) for nid, n in new.nodes.items() if nid not in old.nodes),
        nodes_removed=tuple(_ref(n) for nid, n in old.nodes.items() if nid not in new.nodes),
        kinds_changed=tuple(kinds_changed),
        labels_added=tuple(labels_added),
        labels_removed=tuple(labels_removed),
        routes_added=tuple(routes_added),
        routes_removed=tuple(routes_removed),
        retargeted=tuple(retargeted),
        conditions_changed=tuple(conditions),
        types_changed=tuple(types),
        slots_added=tuple(slots_added),
        slots_removed=tuple(slots_removed),
        said_differently=tuple(said),
        outcomes_added=tuple(o for o in new_outcomes if o not in old_outcomes),
        outcomes_gone=tuple(o for o in old_outcomes if o not in new_outcomes),
        **{name: tuple(x for c in lookups for x in getattr(c, name)) for name in _LOOKUP_FIELDS},
    )


# What _lookup_changes fills, gathered over every lookup the two flows share.
_LOOKUP_FIELDS = (
    "returns_added",
    "returns_removed",
    "lookup_routes",
    "calls_changed",
    "sends_changed",
    "sets_changed",
)


def _ref(node: Node) -> NodeRef:
    return NodeRef(node.id, node.kind, node.call if isinstance(node, LookupNode) else None)


def _lookup_changes(before: LookupNode, after: LookupNode) -> FlowChanges:
    """A lookup's changes, its labels and routes included: they are said as what the
    endpoint answers and what a failed call does, which a route's words do not say."""
    nid = after.id
    routes = [
        LookupRoute(nid, label, before.next.get(label), after.next.get(label))
        for label in dict.fromkeys([*after.next, *before.next])
        if before.next.get(label) != after.next.get(label)
        # A label added or removed brings its route with it, as an ask's does.
        and (label == ERROR or (label in before.next and label in after.next))
    ]
    sets = [
        SetChange(nid, key, before.sets.get(key), after.sets.get(key))
        for key in dict.fromkeys([*after.sets, *before.sets])
        if before.sets.get(key) != after.sets.get(key)
    ]
    return FlowChanges(
        returns_added=tuple(Label(nid, lb) for lb in after.returns if lb not in before.returns),
        returns_removed=tuple(Label(nid, lb) for lb in before.returns if lb not in after.returns),
        lookup_routes=tuple(routes),
        calls_changed=(CallChange(nid, before.call, after.call),)
        if before.call != after.call
        else (),
        # The values are posted as one object: the order of send means nothing to the endpoint.
        sends_changed=(SendChange(nid, before.send, after.send),)
        if set(before.send) != set(after.send)
        else (),
        sets_changed=tuple(sets),
    )


def _labels(node: Node) -> tuple[str, ...]:
    return tuple(node.accepts) if isinstance(node, AskNode) else ()


def _routes(node: Node) -> dict[str, str]:
    if isinstance(node, AskNode):
        return dict(node.next)
    if isinstance(node, EndNode | LookupNode):
        return {}  # a lookup's routes are compared with its labels (_lookup_changes)
    if isinstance(node, CheckNode):
        return {ELSE: node.else_}  # its conditions are compared by position (_conditions)
    return {NEXT: node.next}


def _conditions(before: CheckNode, after: CheckNode) -> list[ConditionChange]:
    """The conditions of a check that differ, position by position: an author edits a
    threshold in place, and reads the change as that condition's before and after."""
    old = [(b.if_, b.next) for b in before.when]
    new = [(b.if_, b.next) for b in after.when]
    changes: list[ConditionChange] = []
    for i in range(max(len(old), len(new))):
        was = old[i] if i < len(old) else None
        now = new[i] if i < len(new) else None
        if was != now:
            changes.append(ConditionChange(after.id, i + 1, was, now))
    return changes


def _slots(node: Node) -> tuple[str, ...]:
    return tuple(s.name for s in node.slots) if isinstance(node, CollectNode) else ()


def _outcomes(flow: Flow) -> tuple[str, ...]:
    found = (n.outcome for n in flow.nodes.values() if isinstance(n, EndNode))
    return tuple(dict.fromkeys(found))


def _shown(value: object) -> str:
    return "(none)" if value is None else str(value)


def describe_changes(changes: FlowChanges) -> list[str]:
    """The summary as sentences for a reviewer, most consequential first.

    >>> from flowcore.flow.flow_diff import FlowChanges, Label
    >>> describe_changes(FlowChanges(labels_added=(Label("n_reason", "late"),)))
    ["n_reason accepts a new label 'late'"]
    """
    lines: list[str] = []
    lines += [f"outcome '{o}' is new: runs can now end with it" for o in changes.outcomes_added]
    lines += [
        f"outcome '{o}' is gone: no run can end with it any more" for o in changes.outcomes_gone
    ]
    lines += [f"node {n.id} ({n.kind}) is new{_asks(n, 'it asks')}" for n in changes.nodes_added]
    lines += [
        f"node {n.id} ({n.kind}) is removed{_asks(n, 'runs no longer ask')}"
        for n in changes.nodes_removed
    ]
    lines += [f"node {k.node} changes from {k.old} to {k.new}" for k in changes.kinds_changed]
    lines += [f"{lb.node} accepts a new label '{lb.label}'" for lb in changes.labels_added]
    lines += [f"{lb.node} no longer accepts '{lb.label}'" for lb in changes.labels_removed]
    lines += [
        f"{lb.node} takes a new answer '{lb.label}' from its endpoint"
        for lb in changes.returns_added
    ]
    lines += [
        f"{lb.node} no longer takes the answer '{lb.label}': given, it counts as a failed call"
        for lb in changes.returns_removed
    ]
    lines += [
        f"{r.node}: {_route_name(r.route)} now goes to {r.new} (was {r.old})"
        for r in changes.retargeted
    ]
    lines += [
        f"{r.node}: new route {_route_name(r.route)} to {r.target}" for r in changes.routes_added
    ]
    lines += [
        f"{r.node}: route {_route_name(r.route)} (to {r.target}) is removed"
        for r in changes.routes_removed
    ]
    lines += [_lookup_route_line(r) for r in changes.lookup_routes]
    lines += [_condition_line(c) for c in changes.conditions_changed]
    lines += [
        f"{t.node} now takes an answer outside its labels as {_outside(t.new)}; "
        f"before: as {_outside(t.old)}"
        for t in changes.types_changed
    ]
    lines += [
        f"{c.node} now asks the endpoint {c.new}; before: {c.old}" for c in changes.calls_changed
    ]
    lines += [
        f"{c.node} now sends {_keys(c.new)}; before: {_keys(c.old)}" for c in changes.sends_changed
    ]
    lines += [f"{s.node} collects a new slot '{s.slot}'" for s in changes.slots_added]
    lines += [f"{s.node} no longer collects '{s.slot}'" for s in changes.slots_removed]
    lines += [_set_line(c) for c in changes.sets_changed]
    lines += [f"{nid} says something different" for nid in changes.said_differently]
    lines += [f"{c.key}: {c.old} → {c.new}" for c in changes.fields]
    return lines


def _outside(kind: str) -> str:
    """What an ask of type ``kind`` takes outside its labels, in words."""
    return "a short code" if kind == TEXT else f"a value of type {kind}"


def node_marks(changes: FlowChanges) -> dict[str, str]:
    """Node id -> "new" or "changed", for the nodes an agent meets differently.

    >>> from flowcore.flow.flow_diff import FlowChanges, Label, NodeRef
    >>> node_marks(FlowChanges(nodes_added=(NodeRef("n_b", "end"),), said_differently=("n_a",)))
    {'n_b': 'new', 'n_a': 'changed'}
    """
    marks = {n.id: "new" for n in changes.nodes_added}
    touched = [
        *(k.node for k in changes.kinds_changed),
        *(lb.node for lb in changes.labels_added + changes.labels_removed),
        *(r.node for r in changes.routes_added + changes.routes_removed),
        *(r.node for r in changes.retargeted),
        *(c.node for c in changes.conditions_changed),
        *(lb.node for lb in changes.returns_added + changes.returns_removed),
        *(r.node for r in changes.lookup_routes),
        *(c.node for c in changes.calls_changed),
        *(t.node for t in changes.types_changed),
        *(c.node for c in changes.sends_changed),
        *(s.node for s in changes.slots_added + changes.slots_removed),
        *(c.node for c in changes.sets_changed),
        *changes.said_differently,
    ]
    for nid in touched:
        marks.setdefault(nid, "changed")
    return marks


def _route_name(route: str) -> str:
    return route if route in (NEXT, ELSE) else f"'{route}'"


def _condition_line(change: ConditionChange) -> str:
    """A changed condition of a check in words, its old form after ``before``.

    >>> _condition_line(ConditionChange("n_check", 1, ("amount > 200.0", "n_sup"),
    ...                                 ("amount > 100.0", "n_sup")))
    'n_check: when amount > 100.0 the run now goes to n_sup; before: when amount > 200.0, to n_sup'
    >>> _condition_line(ConditionChange("n_check", 2, None, ("vip", "n_fast")))
    'n_check: new condition #2: when vip the run goes to n_fast'
    """
    node, n = change.node, change.position
    if change.old is None and change.new is not None:
        when, to = change.new
        return f"{node}: new condition #{n}: when {when} the run goes to {to}"
    if change.new is None and change.old is not None:
        when, to = change.old
        return f"{node}: condition #{n} (when {when}, to {to}) is removed"
    assert change.old is not None and change.new is not None
    (was, was_to), (now, now_to) = change.old, change.new
    return f"{node}: when {now} the run now goes to {now_to}; before: when {was}, to {was_to}"


def _asks(node: NodeRef, who: str) -> str:
    return f": {who} the endpoint {node.call}" if node.call else ""


def _keys(keys: tuple[str, ...]) -> str:
    """Value keys as a sentence reads them.

    >>> _keys(("order_number", "email", "postcode")), _keys(("order_number",)), _keys(())
    ('order_number, email and postcode', 'order_number', 'nothing')
    """
    if not keys:
        return "nothing"
    return keys[0] if len(keys) == 1 else f"{', '.join(keys[:-1])} and {keys[-1]}"


def _lookup_route_line(route: LookupRoute) -> str:
    """Where a lookup's answer, or its failed call, now leads, and where it led before.

    >>> _lookup_route_line(LookupRoute("n_order", "__error__", None, "n_ask"))
    'n_order: when the call fails the run now goes to n_ask; before: it stalled for a person'
    >>> _lookup_route_line(LookupRoute("n_order", "sent", "n_wait", "n_track"))
    "n_order: when the endpoint answers 'sent' the run now goes to n_track; before: to n_wait"
    """
    when = (
        "when the call fails"
        if route.label == ERROR
        else f"when the endpoint answers '{route.label}'"
    )
    now = f"goes to {route.new}" if route.new else "stalls for a person"
    if route.old is None:
        was = "it stalled for a person"
    else:
        was = f"it went to {route.old}" if route.new is None else f"to {route.old}"
    return f"{route.node}: {when} the run now {now}; before: {was}"


def _set_line(change: SetChange) -> str:
    """A key of a lookup's ``sets`` that is new, removed or of another type, in words.

    >>> _set_line(SetChange("n_delivery", "delivered_on", "date", "text"))
    "n_delivery now fills 'delivered_on' as a text from the answer; before: as a date"
    """
    node, key = change.node, change.key
    if change.old is None:
        return f"{node} may fill a new value '{key}' ({change.new}) from the answer"
    if change.new is None:
        return f"{node} no longer fills '{key}' from the answer"
    return (
        f"{node} now fills '{key}' as {a_kind(change.new)} from the answer;"
        f" before: as {a_kind(change.old)}"
    )


# --- line diff ------------------------------------------------------------------------------

Tag = Literal[" ", "-", "+"]


@dataclass(frozen=True)
class DiffLine:
    """One line of a diff: kept (" "), removed ("-") or added ("+"), with its line numbers."""

    tag: Tag
    old_number: int | None
    new_number: int | None
    text: str


def line_diff(old: str, new: str, *, context: int = 3) -> list[list[DiffLine]]:
    """The changed lines of ``new`` against ``old`` in hunks with ``context`` lines around.

    Identical texts give no hunks.

    >>> [[(d.tag, d.text) for d in hunk] for hunk in line_diff("a\\nb\\n", "a\\nc\\n")]
    [[(' ', 'a'), ('-', 'b'), ('+', 'c')]]
    """
    old_lines, new_lines = old.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    hunks: list[list[DiffLine]] = []
    for group in matcher.get_grouped_opcodes(context):
        hunk: list[DiffLine] = []
        for op, i1, i2, j1, j2 in group:
            if op == "equal":
                hunk += [
                    DiffLine(" ", i + 1, j + 1, old_lines[i])
                    for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
                ]
                continue
            hunk += [DiffLine("-", i + 1, None, old_lines[i]) for i in range(i1, i2)]
            hunk += [DiffLine("+", None, j + 1, new_lines[j]) for j in range(j1, j2)]
        hunks.append(hunk)
    return hunks
