"""Hypothesis strategies: random acyclic flows that are valid by construction.

Nodes are generated in topological order (every ``next`` points to a later node)
and the last node is an end, so every node reaches an end and there is no cycle;
nodes not reachable from the entry are dropped.
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import strategies as st

from flowcore.common.limits import MAX_LABEL_LENGTH, MAX_SLOT_VALUE_LENGTH
from flowcore.flow.model import (
    OTHER,
    UNKNOWN,
    AskNode,
    CollectNode,
    EndNode,
    Flow,
    Node,
    Slot,
    TellNode,
    frozen_mapping,
)

ON_UNKNOWN = st.sampled_from(["broaden", "escalate"])


@st.composite
def flows(draw: st.DrawFn, max_nodes: int = 12) -> Flow:
    count = draw(st.integers(min_value=2, max_value=max_nodes))
    ids = [f"n{i}" for i in range(count)]
    nodes: list[Node] = []
    slot_number = 0
    for i, node_id in enumerate(ids):
        later = ids[i + 1 :]
        kind = (
            "end" if not later else draw(st.sampled_from(["ask", "ask", "tell", "collect", "end"]))
        )
        if kind == "end":
            nodes.append(EndNode(node_id, f"say {node_id}", draw(st.sampled_from(["ok", "no"]))))
        elif kind == "tell":
            nodes.append(TellNode(node_id, f"say {node_id}", draw(st.sampled_from(later))))
        elif kind == "ask":
            labels = draw(st.lists(st.sampled_from("abcde"), min_size=1, max_size=4, unique=True))
            targets = {label: draw(st.sampled_from(later)) for label in labels}
            for reserved in (OTHER, UNKNOWN):
                if draw(st.booleans()) and draw(st.booleans()):
                    targets[reserved] = draw(st.sampled_from(later))
            nodes.append(
                AskNode(
                    node_id,
                    f"say {node_id}",
                    frozen_mapping({label: f"when {label}" for label in labels}),
                    frozen_mapping(targets),
                    on_unknown=draw(st.none() | ON_UNKNOWN),
                )
            )
        else:
            slots = []
            for _ in range(draw(st.integers(min_value=1, max_value=3))):
                slot_number += 1
                slots.append(
                    Slot(
                        f"s{slot_number}",
                        f"ask s{slot_number}",
                        required=draw(st.booleans()),
                        pattern=draw(st.none() | st.just("[0-9]+")),
                    )
                )
            nodes.append(
                CollectNode(
                    node_id,
                    f"say {node_id}",
                    tuple(slots),
                    draw(st.sampled_from(later)),
                    on_unknown=draw(st.none() | ON_UNKNOWN),
                )
            )
    by_id = {n.id: n for n in nodes}
    reachable = {ids[0]}
    for node in nodes:  # topological order: parents come first
        if node.id in reachable:
            reachable.update(node.successors())
    return Flow(
        id="generated",
        title="Generated",
        category="test",
        entry=ids[0],
        nodes=frozen_mapping({i: by_id[i] for i in ids if i in reachable}),
        max_unmatched=draw(st.integers(min_value=1, max_value=3)),
        max_branch_fanout=draw(st.integers(min_value=1, max_value=4)),
        branch_depth=draw(st.integers(min_value=1, max_value=4)),
        on_unknown=draw(ON_UNKNOWN),
    )


def valid_answers(flow: Flow, draw: st.DrawFn) -> dict[str, str]:
    """One answer per key that always passes its node: a label, or a matching slot value.

    ``__unknown__`` is used only where an ask routes it, so no fold or stall happens.
    """
    answers: dict[str, str] = {}
    for node in flow.nodes.values():
        if isinstance(node, AskNode):
            options = list(node.accepts) + ([UNKNOWN] if UNKNOWN in node.next else [])
            answers[node.id] = draw(st.sampled_from(options))
        elif isinstance(node, CollectNode):
            for slot in node.slots:
                answers[slot.name] = str(draw(st.integers(min_value=0, max_value=999)))
    return answers


# Values at and just past each limit of spec §2 (a label 64 characters, a slot
# value 1,000), blank ones, and reserved ones: where a refusal starts or stops.
BOUNDARY_VALUES = [
    "",
    " ",
    " \t\n",
    "a" * MAX_LABEL_LENGTH,
    "a" * (MAX_LABEL_LENGTH + 1),
    "9" * MAX_SLOT_VALUE_LENGTH,
    "9" * (MAX_SLOT_VALUE_LENGTH + 1),
    "__other__",
    "__",
    "_a",
]


def any_value(flow: Flow) -> st.SearchStrategy[Any]:
    """Anything an agent might send: labels, unknown, junk, values at the limits, wrong types."""
    labels = sorted(
        {label for n in flow.nodes.values() if isinstance(n, AskNode) for label in n.accepts}
    )
    return st.one_of(
        st.sampled_from(labels or ["a"]),
        st.just(UNKNOWN),
        st.text(max_size=80),
        st.sampled_from(BOUNDARY_VALUES),
        st.integers(),
        st.none(),
    )


def any_values(flow: Flow) -> st.SearchStrategy[dict[str, Any]]:
    keys = st.sampled_from([*flow.value_keys, *flow.nodes, "nope"])
    return st.dictionaries(keys, any_value(flow), max_size=6)


def flow_to_yaml(flow: Flow) -> str:
    """The flow as a file an author would write (for checking lint and the loader)."""
    nodes: list[dict[str, Any]] = []
    for node in flow.nodes.values():
        item: dict[str, Any] = {"id": node.id, "kind": node.kind, "say": node.say}
        if isinstance(node, AskNode):
            item.update(accepts=dict(node.accepts), next=dict(node.next))
        elif isinstance(node, CollectNode):
            item["slots"] = {
                s.name: {
                    "ask": s.ask,
                    "required": s.required,
                    **({"pattern": s.pattern} if s.pattern else {}),
                }
                for s in node.slots
            }
            item["next"] = node.next
        elif isinstance(node, TellNode):
            item["next"] = node.next
        else:
            item["outcome"] = node.outcome
        if isinstance(node, AskNode | CollectNode) and node.on_unknown:
            item["on_unknown"] = node.on_unknown
        nodes.append(item)
    document = {
        "id": flow.id,
        "title": flow.title,
        "category": flow.category,
        "entry": flow.entry,
        "max_unmatched": flow.max_unmatched,
        "max_branch_fanout": flow.max_branch_fanout,
        "branch_depth": flow.branch_depth,
        "on_unknown": flow.on_unknown,
        "nodes": nodes,
    }
    return yaml.safe_dump(document, allow_unicode=True, sort_keys=False)
