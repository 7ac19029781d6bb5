"""A flow as a Mermaid flowchart, for ``show --format mermaid``: GitHub, GitLab, most
documentation sites and ticket systems draw it where the text is pasted.

Each node is drawn in its kind's shape (an ask a rhombus, a tell a rectangle, a collect
a parallelogram listing its slots, a check a hexagon, a lookup a cylinder naming the
endpoint it calls, an end a stadium with its outcome),
labelled with its id and what it says; an ask's edges carry their labels, its
``__other__`` route reads "other" and its ``__unknown__`` route is dotted; a check's
edges carry their conditions, and its ``else`` is dotted; a lookup's edges carry its
labels, and its ``__error__`` route reads "call failed" and is dotted. Mermaid's node
names are ``n1``, ``n2``… in the author's order, never the flow's ids: ``end``,
``graph`` or ``style`` would end or break the chart. Every text is quoted and its
``"``, ``#``, ``&``, ``<`` and ``>`` written as Mermaid's entity codes, so what an author
wrote is shown, never read as syntax or HTML.
"""

from __future__ import annotations

from flowcore.flow.model import (
    ERROR,
    AskNode,
    CheckNode,
    CollectNode,
    EndNode,
    Flow,
    LookupNode,
    Node,
    TellNode,
)

SAY_SHOWN = 80  # characters of a node's ``say`` on the chart (the text tree has it whole)
_ENTITIES = {"#": "#35;", '"': "#quot;", "&": "#amp;", "<": "#lt;", ">": "#gt;"}
_ROUTES = {"__other__": "other", "__unknown__": "unknown", ERROR: "call failed"}


def render_mermaid(flow: Flow) -> str:
    """The flow as a Mermaid ``flowchart TD``, top to bottom from its entry.

    >>> from flowcore.flow.model import TellNode, EndNode, Flow
    >>> flow = Flow(id="f", title="T", category="c", entry="hi", nodes={
    ...     "hi": TellNode(id="hi", say='Say "hello" & wave', next="end"),
    ...     "end": EndNode(id="end", say="Done", outcome="resolved")})
    >>> print(render_mermaid(flow))
    flowchart TD
      %% f — T
      n1["hi: Say #quot;hello#quot; #amp; wave"]
      n2(["end: Done → resolved"])
      n1 --> n2
    """
    names = {node_id: f"n{i}" for i, node_id in enumerate(flow.nodes, start=1)}
    version = "" if flow.version is None else f" (version {flow.version})"
    lines = ["flowchart TD", f"  %% {_one_line(flow.id)} — {_one_line(flow.title)}{version}"]
    lines += [f"  {names[node.id]}{_shape(node)}" for node in _entry_first(flow)]
    for node in _entry_first(flow):
        for label, target in _edges(node):
            dotted = label in ("__unknown__", ERROR) or (
                label == "else" and isinstance(node, CheckNode)
            )
            arrow = "-.->" if dotted else "-->"
            shown = f'|"{_text(_ROUTES.get(label, label))}"|' if label else ""
            lines.append(f"  {names[node.id]} {arrow}{shown} {names[target]}")
    return "\n".join(lines)


def _entry_first(flow: Flow) -> list[Node]:
    return [flow.nodes[flow.entry], *(n for n in flow.nodes.values() if n.id != flow.entry)]


def _shape(node: Node) -> str:
    said = node.say if len(node.say) <= SAY_SHOWN else node.say[: SAY_SHOWN - 1] + "…"
    text = f"{node.id}: {said}"
    if isinstance(node, AskNode):
        return f'{{"{_text(text)}"}}'
    if isinstance(node, CollectNode):
        slots = ", ".join(slot.name + ("*" if slot.required else "") for slot in node.slots)
        return f'[/"{_text(text)}<br/>slots: {_text(slots)}"/]'
    if isinstance(node, EndNode):
        return f'(["{_text(f"{text} → {node.outcome}")}"])'
    if isinstance(node, CheckNode):
        return f'{{{{"{_text(text)}"}}}}'
    if isinstance(node, LookupNode):
        return f'[("{_text(text)}<br/>calls: {_text(node.call)}")]'
    return f'["{_text(text)}"]'


def _edges(node: Node) -> list[tuple[str, str]]:
    """(label, target) of each edge; the label is "" for a tell's or a collect's next."""
    if isinstance(node, AskNode | LookupNode):
        return list(node.next.items())
    if isinstance(node, TellNode | CollectNode):
        return [("", node.next)]
    if isinstance(node, CheckNode):
        return list(node.edges())
    return []


def _text(text: str) -> str:
    """``text`` safe inside a quoted Mermaid label.

    >>> _text('a "b" #1 <i>&')
    'a #quot;b#quot; #35;1 #lt;i#gt;#amp;'
    """
    return "".join(_ENTITIES.get(char, char) for char in _one_line(text))


def _one_line(text: str) -> str:
    return " ".join(text.split())
