"""A flow as a readable text tree, for ``show`` and for reviewing drafts."""

from __future__ import annotations

from flows_app.domain.model import AskNode, CollectNode, EndNode, Flow, Node


def render_tree(flow: Flow) -> str:
    """The flow depth-first from its entry, one node per line; never raises for a lint-clean Flow.

    Edges carry their label (``next`` for tell and collect); a node reached again is
    printed once and then referenced as ``→ id (see above)``. Nodes not reachable from
    the entry follow at the end.
    """
    version = "-" if flow.version is None else str(flow.version)
    lines = [f"{flow.id} — {flow.title} (version {version}, category {flow.category})"]
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
        return list(node.next.items())
    if isinstance(node, EndNode):
        return []
    return [("next", node.next)]


def describe_node(node: Node) -> str:
    """One line for a node: kind, id, what it conveys, and its slots or outcome.

    >>> describe_node(EndNode(id="n_done", say="締める", outcome="resolved"))
    '[end] n_done — 締める ⇒ outcome: resolved'
    """
    text = f"[{node.kind}] {node.id} — {node.say}"
    if isinstance(node, EndNode):
        return f"{text} ⇒ outcome: {node.outcome}"
    if isinstance(node, CollectNode):
        slots = ", ".join(f"{s.name} (required)" if s.required else s.name for s in node.slots)
        return f"{text} [slots: {slots}]"
    return text
