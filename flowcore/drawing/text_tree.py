"""A flow as a readable text tree, for ``show`` and for reviewing drafts.

Everything a reviewer needs to judge the procedure is printed: each label's
condition on its edge, each slot's question, pattern and hint, and where an
unknown answer goes (the flow's ``on_unknown`` and fold limits, and a node's own).
"""

from __future__ import annotations

from flowcore.flow.model import (
    ELSE,
    TEXT,
    AskNode,
    CheckNode,
    CollectNode,
    EndNode,
    Flow,
    LookupNode,
    Node,
    Slot,
)


def render_tree(flow: Flow) -> str:
    """The flow depth-first from its entry, one node per line; never raises for a lint-clean Flow.

    Edges carry their label (``next`` for tell and collect); a node reached again is
    printed once and then referenced as ``→ id (see above)``. Nodes not reachable from
    the entry follow at the end.
    """
    version = "-" if flow.version is None else str(flow.version)
    lines = [
        f"{flow.id} — {flow.title} (version {version}, category {flow.category})",
        f"on_unknown: {flow.on_unknown} · max_unmatched: {flow.max_unmatched} · "
        f"max_branch_fanout: {flow.max_branch_fanout} · branch_depth: {flow.branch_depth}",
    ]
    seen: set[str] = set()
    roots = [flow.entry, *(node_id for node_id in flow.nodes if node_id != flow.entry)]
    for root in roots:
        if root in seen:
            continue
        if root != flow.entry:
            lines.append("(not reachable from the entry)")
        lines.extend(_render_from(flow, root, seen))
    return "\n".join(lines)


def _render_from(flow: Flow, root: str, seen: set[str]) -> list[str]:
    lines: list[str] = []
    # (node id, prefix of this line, prefix of its children's lines, edge label); iterative
    # so a long chain of nodes cannot hit the recursion limit.
    stack: list[tuple[str, str, str, str | None]] = [(root, "", "", None)]
    while stack:
        node_id, prefix, child_prefix, label = stack.pop()
        edge = "" if label is None else f"{label} → "
        if node_id in seen:
            lines.append(f"{prefix}{edge}{node_id} (see above)")
            continue
        seen.add(node_id)
        node = flow.nodes[node_id]
        lines.append(f"{prefix}{edge}{describe_node(node)}")
        edges = _edges(node)
        if isinstance(node, CollectNode):
            bar = "│  " if edges else "   "
            lines.extend(f"{child_prefix}{bar}{describe_slot(slot)}" for slot in node.slots)
        children = []
        for i, (edge_label, target) in enumerate(edges):
            last = i == len(edges) - 1
            children.append(
                (
                    target,
                    child_prefix + ("└─ " if last else "├─ "),
                    child_prefix + ("   " if last else "│  "),
                    edge_label,
                )
            )
        stack.extend(reversed(children))
    return lines


def _edges(node: Node) -> list[tuple[str, str]]:
    if isinstance(node, AskNode):
        return [
            (f"{label}: {node.accepts[label]}" if label in node.accepts else label, target)
            for label, target in node.next.items()
        ]
    if isinstance(node, EndNode):
        return []
    if isinstance(node, CheckNode):
        return [(label if label == ELSE else f"if {label}", to) for label, to in node.edges()]
    if isinstance(node, LookupNode):
        return [
            (
                f"{label}: {node.returns[label]}"
                if label in node.returns
                else f"{label} (the call failed)",
                target,
            )
            for label, target in node.next.items()
        ]
    return [("next", node.next)]


def describe_node(node: Node) -> str:
    """One line for a node: kind, id, what it conveys, and its outcome or own on_unknown.

    >>> describe_node(EndNode(id="n_done", say="締める", outcome="resolved"))
    '[end] n_done — 締める ⇒ outcome: resolved'
    """
    text = f"[{node.kind}] {node.id} — {node.say}"
    if isinstance(node, EndNode):
        return f"{text} ⇒ outcome: {node.outcome}"
    if isinstance(node, AskNode | CollectNode) and node.on_unknown:
        return f"{text} (on_unknown: {node.on_unknown})"
    if isinstance(node, LookupNode):
        sent = ", ".join(node.send) or "nothing"
        sets = "".join(f"; sets {key}: {kind}" for key, kind in node.sets.items())
        return f"{text} ⇄ calls {node.call} (sends {sent}{sets})"
    return text


def describe_slot(slot: Slot) -> str:
    """One line for a collect's slot: its name, what to ask, its type (when not text),
    pattern and hint.

    >>> describe_slot(Slot(name="order_id", ask="注文番号", required=True, pattern="A[0-9]{5}"))
    '· order_id (required): 注文番号 · pattern: A[0-9]{5}'
    >>> describe_slot(Slot(name="via", ask="支払方法", type="choice", options=("card", "cash")))
    '· via: 支払方法 · type: choice (card, cash)'
    """
    text = f"· {slot.name}{' (required)' if slot.required else ''}: {slot.ask}"
    if slot.type != TEXT:
        text += f" · type: {slot.type}"
        text += f" ({', '.join(slot.options)})" if slot.options else ""
    if slot.pattern:
        text += f" · pattern: {slot.pattern}"
    if slot.hint:
        text += f" · hint: {slot.hint}"
    return text
