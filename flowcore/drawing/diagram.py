"""Flow diagrams drawn server-side as inline SVG.

``render_svg`` draws a ``Flow`` with the layered layout of ``graph_layout``, each node
and edge classed for its state on a run (``diagram_css`` styles them, ``legend_svg``
explains them); the classes and ids are a contract for pages and live updates. The
layout of a flow is cached by its content hash: a pinned version never changes, so
re-drawing it with new states costs no layout. Pure: no Django, no I/O, no clock;
the same input gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import NamedTuple

from flowcore.common.cache import BoundedCache
from flowcore.common.limits import DIAGRAM_LAYOUTS
from flowcore.drawing.graph_layout import (
    COUNT_UNITS,
    LABEL_LINE_PX,
    LABEL_PAD,
    LABEL_UNIT_PX,
    LINE_PX,
    PAD_X,
    PAD_Y,
    SAY_LINES,
    UNIT_PX,
    WRAP_UNITS,
    Box,
    EdgeSpec,
    Layout,
    NodeSpec,
    Point,
    Route,
    ask_inset,
    check_inset,
    clip,
    layout_graph,
    lookup_rim,
    text_units,
    wrap_balanced,
)
from flowcore.flow.model import (
    ERROR,
    AskNode,
    CheckNode,
    CollectNode,
    EndNode,
    Flow,
    LookupNode,
    TellNode,
)

# What each state means on a run, in the order a legend lists them. "plain" is the
# state of every node when no states are given (flow and draft pages).
STATE_LABELS: Mapping[str, str] = {
    "current": "current: the run waits here",
    "answered": "answered",
    "prefilled": "passed by a value given in advance",
    "told": "told",
    "checked": "checked: its conditions chose the way",
    "looked_up": "looked up: a system of record's answer chose the way",
    "folded": "folded (the person did not know)",
    "fold_branch": "a branch of a fold",
    "stalled": "stalled: handed to a person",
    "completed": "completed end",
    "unvisited": "not visited",
}
NODE_STATES: tuple[str, ...] = ("plain", *STATE_LABELS)
# What a draft's diagram marks, against the live flow (flowcore.flow.flow_diff.node_marks).
MARK_LABELS: Mapping[str, str] = {
    "new": "new: not in the live flow",
    "changed": "changed: agents meet it differently",
}
KIND_LABELS: Mapping[str, str] = {
    "ask": "ask: branches on the answer",
    "tell": "tell: gives guidance",
    "collect": "collect: gathers slots",
    "check": "check: decides on values",
    "lookup": "lookup: asks a system of record",
    "end": "end",
}


# --- flows: layout cache ----------------------------------------------------------------------


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    size: int


# Layouts by (flow content hash, notes); flows never change.
_cache: BoundedCache[tuple[str, bool], Layout] = BoundedCache(DIAGRAM_LAYOUTS)


def layout_cache_info() -> CacheInfo:
    return CacheInfo(_cache.hits, _cache.misses, len(_cache.items))


def flow_graph(flow: Flow) -> tuple[list[NodeSpec], list[EdgeSpec]]:
    """A flow's nodes (id line, wrapped ``say``, outcome or slots) and edges, in author order."""
    nodes: list[NodeSpec] = []
    edges: list[EdgeSpec] = []
    for n in flow.nodes.values():
        lines = [clip(n.id, WRAP_UNITS), *wrap_balanced(n.say, WRAP_UNITS, SAY_LINES)]
        if isinstance(n, EndNode):
            lines.append(clip(f"outcome: {n.outcome}", WRAP_UNITS))
        elif isinstance(n, CollectNode):
            names = ", ".join(s.name + ("*" if s.required else "") for s in n.slots)
            lines.append(clip(f"slots: {names}", WRAP_UNITS))
        elif isinstance(n, LookupNode):
            lines.append(clip(f"calls: {n.call}", WRAP_UNITS))
        nodes.append(NodeSpec(n.id, n.kind, tuple(lines)))
        if isinstance(n, AskNode):
            edges += [EdgeSpec(n.id, target, label) for label, target in n.next.items()]
        elif isinstance(n, TellNode | CollectNode):
            edges.append(EdgeSpec(n.id, n.next))
        elif isinstance(n, CheckNode):
            edges += [EdgeSpec(n.id, target, label) for label, target in n.edges()]
        elif isinstance(n, LookupNode):
            edges += [EdgeSpec(n.id, target, label) for label, target in n.next.items()]
    return nodes, edges


def flow_layout(flow: Flow, *, notes: bool = False) -> Layout:
    """The layout of ``flow``, cached by ``flow.content_hash`` (not cached when empty).

    Raises ValueError if a ``next`` names a node the flow lacks (lint-clean flows never do).
    """
    key = (flow.content_hash, notes)
    if flow.content_hash and (hit := _cache.get(key)) is not None:
        return hit
    nodes, edges = flow_graph(flow)
    layout = layout_graph(nodes, edges, entry=flow.entry, notes=notes)
    return _cache.put(key, layout) if flow.content_hash else layout


# --- SVG -----------------------------------------------------------------------------------------


def _num(v: float) -> str:
    text = f"{v:.1f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _esc(text: str) -> str:
    # XML 1.0 forbids most control characters even as references: replace them.
    clean = "".join(c if c >= " " or c in "\t\n" else "\ufffd" for c in text)
    return escape(clean, quote=True).replace("\n", "&#10;")


def _outline(kind: str, x: float, y: float, w: float, h: float, grow: float = 0.0) -> str:
    """The outline of a node of ``kind``, grown by ``grow`` on every side (for the ring)."""
    x, y, w, h = x - grow, y - grow, w + 2 * grow, h + 2 * grow
    if kind == "ask":
        i = ask_inset(w, h)
        pts = [(x + i, y), (x + w - i, y), (x + w, y + h / 2), (x + w - i, y + h), (x + i, y + h)]
        pts.append((x, y + h / 2))
        return '<path d="M' + " L".join(f"{_num(a)},{_num(b)}" for a, b in pts) + ' Z"'
    if kind == "check":  # an octagon: its corners cut, unlike every other kind
        c = check_inset(h)
        pts = [(x + c, y), (x + w - c, y), (x + w, y + c), (x + w, y + h - c)]
        pts += [(x + w - c, y + h), (x + c, y + h), (x, y + h - c), (x, y + c)]
        return '<path d="M' + " L".join(f"{_num(a)},{_num(b)}" for a, b in pts) + ' Z"'
    if kind == "lookup":  # a cylinder, the usual shape of a data store: rims top and bottom
        r, a = lookup_rim(h), w / 2
        return (
            f'<path d="M{_num(x)},{_num(y + r)} A{_num(a)},{_num(r)} 0 0 1 {_num(x + w)},'
            f"{_num(y + r)} L{_num(x + w)},{_num(y + h - r)} A{_num(a)},{_num(r)} 0 0 1 "
            f"{_num(x)},{_num(y + h - r)} Z M{_num(x)},{_num(y + r)} A{_num(a)},{_num(r)} 0 0 0 "
            f'{_num(x + w)},{_num(y + r)}"'
        )
    rx = h / 2 if kind == "end" else (min(8.0, h / 5) if kind == "tell" else 2.0) + grow
    return f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}" rx="{_num(rx)}"'


def _path(points: Sequence[Point]) -> str:
    """Straight along a band, an S-curve with vertical ends across a gap."""
    (x, y), parts = points[0], [f"M{_num(points[0][0])},{_num(points[0][1])}"]
    for nx, ny in points[1:]:
        if nx == x or ny == y:
            parts.append(f"L{_num(nx)},{_num(ny)}")
        else:
            m = _num((y + ny) / 2)
            parts.append(f"C{_num(x)},{m} {_num(nx)},{m} {_num(nx)},{_num(ny)}")
        x, y = nx, ny
    return " ".join(parts)


_DEFS = (
    "<defs>"
    '<marker id="gp-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="10" '
    'markerHeight="10" markerUnits="userSpaceOnUse" orient="auto-start-reverse">'
    '<path class="head" d="M0,0 L10,5 L0,10 Z"/>'
    "</marker>"
    '<marker id="gp-arrow-taken" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="13" '
    'markerHeight="13" markerUnits="userSpaceOnUse" orient="auto-start-reverse">'
    '<path class="head" d="M0,0 L10,5 L0,10 Z"/>'
    "</marker>"
    '<pattern id="gp-hatch" width="8" height="8" patternUnits="userSpaceOnUse" '
    'patternTransform="rotate(45)"><rect class="ground" width="8" height="8"/>'
    '<rect class="mark" width="3" height="8"/></pattern>'
    '<pattern id="gp-lines" width="6" height="6" patternUnits="userSpaceOnUse">'
    '<rect class="ground" width="6" height="6"/><rect class="mark" y="5" width="6" height="1"/>'
    "</pattern>"
    '<pattern id="gp-dots" width="8" height="8" patternUnits="userSpaceOnUse">'
    '<rect class="ground" width="8" height="8"/><circle class="mark" cx="4" cy="4" r="1.2"/>'
    "</pattern>"
    "</defs>"
)

_FONT = "'Noto Sans CJK JP', 'Noto Sans JP', sans-serif"


def _node_svg(box: Box, state: str, say: str, note: str | None, mark: str | None) -> str:
    x, y, w, h = box.x, box.y, box.width, box.height
    marked = f" mark-{mark}" if mark else ""
    out = [
        f'<g id="node-{_esc(box.id)}" class="node kind-{_esc(box.kind)} state-{state}{marked}" '
        f'data-node="{_esc(box.id)}">',
        f"<title>{_esc(f'{box.id} · {box.kind}')}&#10;{_esc(say)}</title>",
        _outline(box.kind, x, y, w, h, 4.0) + ' class="ring"/>',
        _outline(box.kind, x, y, w, h) + ' class="shape"/>',
    ]
    if box.kind == "collect":
        out.append(_outline(box.kind, x + 4, y + 4, w - 8, h - 8) + ' class="inner"/>')
    cx = _num(x + w / 2)
    for i, line in enumerate(box.lines):
        cls = "nid" if i == 0 else "say"
        out.append(
            f'<text class="{cls}" x="{cx}" y="{_num(y + PAD_Y + 13 + i * LINE_PX)}" '
            f'text-anchor="middle">{_esc(line)}</text>'
        )
    if note:
        units = round((w - 2 * PAD_X - (2 * ask_inset(w, h) if box.kind == "ask" else 0)) / UNIT_PX)
        out.append(
            f'<text class="note" x="{cx}" y="{_num(y + PAD_Y + 13 + len(box.lines) * LINE_PX)}" '
            f'text-anchor="middle">{_esc(clip(note, max(units, 4)))}</text>'
        )
    out.append("</g>")
    return "".join(out)


def _edge_svg(route: Route, state: str, notes: Sequence[str] | None) -> str:
    """An edge; ``notes`` (when the layout keeps room for them) holds one note per label,
    "" for none, drawn in a column beside the labels: "timeout 1", "__unknown__ 0"."""
    if notes is None:
        told = " / ".join(label for label in route.labels if label)
    else:
        pairs = zip(route.labels, notes, strict=True)
        told = " · ".join(f"{label} {note}".strip() for label, note in pairs if label or note)
    # A failed call's way out is drawn apart from the answers (dashed, see the CSS).
    failed = " failed-call" if ERROR in route.labels else ""
    out = [
        f'<g class="edge{failed} state-{state}" data-from="{_esc(route.source)}" '
        f'data-to="{_esc(route.target)}" data-label="{_esc(" ".join(route.labels))}">',
        f"<title>{_esc(route.source)} → {_esc(route.target)}"
        + (f": {_esc(told)}" if told else "")
        + "</title>",
        f'<path class="line" d="{_path(route.points)}" marker-end="url(#gp-arrow)"/>',
    ]
    shown = [clip(note, COUNT_UNITS) for note in notes or ()]
    if any(route.lines) or any(shown):
        out.append(_label_box(route, shown))
    out.append("</g>")
    return "".join(out)


def _label_box(route: Route, notes: Sequence[str]) -> str:
    """The label box: lines centred, or with ``notes`` labels left and notes right."""
    label_units = max(text_units(line) for line in route.lines)
    note_units = max((text_units(note) for note in notes), default=0)
    gap = 1 if label_units and note_units else 0
    text_w = (label_units + gap + note_units) * LABEL_UNIT_PX + 2 * LABEL_PAD
    lx, ly, lw = route.label_x, route.label_y, min(route.label_width, text_w)
    lh = len(route.lines) * LABEL_LINE_PX + 2 * LABEL_PAD
    left, right = lx - lw / 2 + LABEL_PAD, lx + lw / 2 - LABEL_PAD
    out = [
        f'<rect class="label-bg" x="{_num(lx - lw / 2)}" y="{_num(ly - lh / 2)}" '
        f'width="{_num(lw)}" height="{_num(lh)}" rx="3"/>'
    ]
    for i, line in enumerate(route.lines):
        y = _num(ly - lh / 2 + LABEL_PAD + 10.5 + i * LABEL_LINE_PX)
        if not notes:
            out.append(
                f'<text class="label" x="{_num(lx)}" y="{y}" text-anchor="middle">'
                f"{_esc(line)}</text>"
            )
            continue
        note = (
            f'<tspan class="note" x="{_num(right)}" text-anchor="end">{_esc(notes[i])}</tspan>'
            if notes[i]
            else ""
        )
        out.append(
            f'<text class="label" data-label="{_esc(route.labels[i])}" x="{_num(left)}" '
            f'y="{y}">{_esc(line)}{note}</text>'
        )
    return "".join(out)


def render_svg(
    flow: Flow,
    *,
    node_states: Mapping[str, str] | None = None,
    edge_states: Mapping[tuple[str, str], str] | None = None,
    node_notes: Mapping[str, str] | None = None,
    edge_notes: Mapping[tuple[str, str], str] | None = None,
    node_marks: Mapping[str, str] | None = None,
    standalone: bool = False,
) -> str:
    """The flow as an inline ``<svg>`` (no script, no external resource), 1 unit = 1 px.

    ``node_states`` maps node ids to a state of ``STATE_LABELS``; when given, a node it
    omits is "unvisited", when omitted every node is "plain". ``edge_states`` maps
    ``(source, label)`` (label "" for a tell's or collect's ``next``) to "taken"; a
    merged edge is taken when one of its labels is. ``node_notes``/``edge_notes`` (same
    keys) are short texts such as "12 runs", drawn in room the layout keeps for them
    (a second cached layout); on an edge, each label then has a line of its own with its
    note beside it, so labels sharing an edge keep their own counts apart.
    ``node_marks`` maps node ids to a mark of ``MARK_LABELS`` (a draft against the live
    flow): the node is classed ``mark-new`` or ``mark-changed``.
    ``standalone`` embeds ``diagram_css()`` in the SVG. Classes and ids are a contract:
    see ADR 0018. Raises ValueError for an unknown state, or a ``next`` naming no node.
    """
    for state in (node_states or {}).values():
        if state not in STATE_LABELS:
            raise ValueError(f"unknown node state {state!r}")
    for state in (edge_states or {}).values():
        if state != "taken":
            raise ValueError(f"unknown edge state {state!r}")
    marks = node_marks or {}
    for mark in marks.values():
        if mark not in MARK_LABELS:
            raise ValueError(f"unknown node mark {mark!r}")
    layout = flow_layout(flow, notes=bool(node_notes or edge_notes))
    default = "plain" if node_states is None else "unvisited"
    states, taken, notes = node_states or {}, edge_states or {}, edge_notes or {}
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="gp-diagram" '
        f'viewBox="0 0 {_num(layout.width)} {_num(layout.height)}" '
        f'width="{_num(layout.width)}" height="{_num(layout.height)}" role="img" '
        f'aria-label="Diagram of the flow {_esc(flow.id)}" font-family="{_FONT}" font-size="13">',
        f"<style>{diagram_css()}</style>" if standalone else "",
        _DEFS,
        '<g class="edges">',
    ]
    for route in layout.routes:
        keys = [(route.source, label) for label in route.labels]
        state = "taken" if any(k in taken for k in keys) else "plain"
        label_notes = [notes.get(k, "") for k in keys] if layout.notes else None
        out.append(_edge_svg(route, state, label_notes))
    out.append('</g><g class="nodes">')
    node_notes = node_notes or {}
    for box in layout.boxes.values():
        say = flow.nodes[box.id].say
        state = states.get(box.id, default)
        out.append(_node_svg(box, state, say, node_notes.get(box.id), marks.get(box.id)))
    out.append("</g></svg>")
    return "".join(out)


# Every colour is a variable, defined once here with its light and its dark value
# (light-dark() follows the page's color-scheme: the admin's and the ops pages' theme).
_CSS = """
.gp-diagram {
  --gp-text: light-dark(#1f2937, #e5e7eb);
  --gp-muted: light-dark(#64748b, #94a3b8);
  --gp-note: light-dark(#9a3412, #fdba74);
  --gp-node: light-dark(#ffffff, #1e293b);
  --gp-node-line: light-dark(#475569, #94a3b8);
  --gp-edge: light-dark(#64748b, #94a3b8);
  --gp-label-bg: light-dark(#ffffff, #0f172a);
  --gp-label-line: light-dark(#cbd5e1, #475569);
  --gp-label-text: light-dark(#334155, #cbd5e1);
  --gp-taken: light-dark(#1d4ed8, #60a5fa);
  --gp-taken-text: light-dark(#1e3a8a, #bfdbfe);
  --gp-current: light-dark(#dbeafe, #1e3a8a);
  --gp-answered: light-dark(#dcfce7, #14532d);
  --gp-answered-line: light-dark(#15803d, #4ade80);
  --gp-prefilled: light-dark(#ecfccb, #365314);
  --gp-prefilled-line: light-dark(#4d7c0f, #a3e635);
  --gp-told: light-dark(#ccfbf1, #134e4a);
  --gp-told-mark: light-dark(#99f6e4, #115e59);
  --gp-told-line: light-dark(#0f766e, #2dd4bf);
  --gp-folded: light-dark(#ede9fe, #4c1d95);
  --gp-folded-line: light-dark(#6d28d9, #a78bfa);
  --gp-branch: light-dark(#f5f3ff, #2e1065);
  --gp-branch-mark: light-dark(#c4b5fd, #6d28d9);
  --gp-branch-line: light-dark(#7c3aed, #c4b5fd);
  --gp-stalled: light-dark(#ffedd5, #431407);
  --gp-stalled-mark: light-dark(#fdba74, #7c2d12);
  --gp-stalled-line: light-dark(#c2410c, #fb923c);
  --gp-completed: light-dark(#bbf7d0, #166534);
  --gp-completed-line: light-dark(#14532d, #86efac);
  --gp-unvisited: light-dark(#f8fafc, #0f172a);
  --gp-unvisited-line: light-dark(#94a3b8, #475569);
  --gp-new: light-dark(#dcfce7, #052e16);
  --gp-new-line: light-dark(#15803d, #4ade80);
  --gp-changed: light-dark(#fef3c7, #3b2204);
  --gp-changed-line: light-dark(#b45309, #fbbf24);
  font-family: 'Noto Sans CJK JP', 'Noto Sans JP', sans-serif;
}
.gp-diagram text { font-size: 13px; fill: var(--gp-text); }
.gp-diagram text.nid { font-size: 12px; font-weight: 700; }
.gp-diagram .note { font-size: 11px; font-weight: 700; fill: var(--gp-note); }
.gp-diagram .shape { fill: var(--gp-node); stroke: var(--gp-node-line); stroke-width: 1.5; }
.gp-diagram .inner { fill: none; stroke: var(--gp-node-line); stroke-width: 1; }
.gp-diagram .ring { fill: none; stroke: none; }
.gp-diagram #gp-arrow .head { fill: var(--gp-edge); }
.gp-diagram #gp-arrow-taken .head { fill: var(--gp-taken); }
.gp-diagram #gp-hatch .ground { fill: var(--gp-stalled); }
.gp-diagram #gp-hatch .mark { fill: var(--gp-stalled-mark); }
.gp-diagram #gp-lines .ground { fill: var(--gp-told); }
.gp-diagram #gp-lines .mark { fill: var(--gp-told-mark); }
.gp-diagram #gp-dots .ground { fill: var(--gp-branch); }
.gp-diagram #gp-dots .mark { fill: var(--gp-branch-mark); }
.gp-diagram .edge .line { fill: none; stroke: var(--gp-edge); stroke-width: 1.5; }
.gp-diagram .edge .label-bg { fill: var(--gp-label-bg); stroke: var(--gp-label-line); }
.gp-diagram .edge text { font-size: 11px; fill: var(--gp-label-text); }
.gp-diagram .edge .note { fill: var(--gp-note); font-weight: 700; }
.gp-diagram .edge.failed-call .line { stroke-dasharray: 6 3; }
.gp-diagram .state-looked_up .shape { fill: var(--gp-answered); stroke: var(--gp-taken);
  stroke-width: 2; stroke-dasharray: 1 2; }
.gp-diagram .edge.state-taken .line { stroke: var(--gp-taken); stroke-width: 3;
  marker-end: url(#gp-arrow-taken); }
.gp-diagram .edge.state-taken .label-bg { stroke: var(--gp-taken); stroke-width: 1.5; }
.gp-diagram .edge.state-taken text.label { fill: var(--gp-taken-text); font-weight: 700; }
.gp-diagram .state-current .shape { fill: var(--gp-current); stroke: var(--gp-taken);
  stroke-width: 3; }
.gp-diagram .state-current .ring { stroke: var(--gp-taken); stroke-width: 2; }
.gp-diagram .state-answered .shape { fill: var(--gp-answered); stroke: var(--gp-answered-line);
  stroke-width: 2; }
.gp-diagram .state-prefilled .shape { fill: var(--gp-prefilled);
  stroke: var(--gp-prefilled-line); stroke-width: 2; stroke-dasharray: 7 4; }
.gp-diagram .state-checked .shape { fill: var(--gp-answered); stroke: var(--gp-taken);
  stroke-dasharray: 4 2; }
.gp-diagram .state-told .shape { fill: url(#gp-lines); stroke: var(--gp-told-line);
  stroke-width: 2; }
.gp-diagram .state-folded .shape { fill: var(--gp-folded); stroke: var(--gp-folded-line);
  stroke-width: 2.5; stroke-dasharray: 2 3; }
.gp-diagram .state-fold_branch .shape { fill: url(#gp-dots); stroke: var(--gp-branch-line);
  stroke-width: 1.5; stroke-dasharray: 9 3 2 3; }
.gp-diagram .state-stalled .shape { fill: url(#gp-hatch); stroke: var(--gp-stalled-line);
  stroke-width: 3; }
.gp-diagram .state-completed .shape { fill: var(--gp-completed);
  stroke: var(--gp-completed-line); stroke-width: 4.5; }
.gp-diagram .state-unvisited .shape { fill: var(--gp-unvisited);
  stroke: var(--gp-unvisited-line); stroke-width: 1; }
.gp-diagram .state-unvisited .inner { stroke: var(--gp-unvisited-line); }
.gp-diagram .state-unvisited text { fill: var(--gp-muted); }
.gp-diagram .mark-new .shape { fill: var(--gp-new); stroke: var(--gp-new-line);
  stroke-width: 3; }
.gp-diagram .mark-new .ring { stroke: var(--gp-new-line); stroke-width: 1.5; }
.gp-diagram .mark-changed .shape { fill: var(--gp-changed); stroke: var(--gp-changed-line);
  stroke-width: 3; stroke-dasharray: 8 3; }
.gp-diagram .mark-changed .ring { stroke: var(--gp-changed-line); stroke-width: 1.5; }
"""


def diagram_css() -> str:
    """The stylesheet for ``render_svg`` and ``legend_svg`` output (scoped to ``.gp-diagram``).

    Each state differs by colour and by a second channel: stroke width, a ring (double
    stroke), dashes, dots or a fill pattern, so it reads without colour too.
    """
    return _CSS.strip() + "\n"


def legend_svg(
    *,
    states: Iterable[str] = tuple(STATE_LABELS),
    marks: Iterable[str] = (),
    kinds: bool = True,
    taken: bool = True,
) -> str:
    """A small SVG explaining node ``states``, node ``marks``, the node kinds and a taken
    edge, using the same classes (and so the same ``diagram_css``) as ``render_svg``; no
    ``node-`` ids."""
    # (the swatch's classes, its kind, its text)
    rows: list[tuple[str, str, str]] = []
    for state in states:
        if state not in NODE_STATES:
            raise ValueError(f"unknown node state {state!r}")
        rows.append((f"state-{state}", "tell", STATE_LABELS.get(state, state)))
    for mark in marks:
        if mark not in MARK_LABELS:
            raise ValueError(f"unknown node mark {mark!r}")
        rows.append((f"state-plain mark-{mark}", "tell", MARK_LABELS[mark]))
    if kinds:
        rows += [("state-plain", kind, text) for kind, text in KIND_LABELS.items()]
    out: list[str] = []
    y = 6.0
    for classes, kind, text in rows:
        out.append(
            f'<g class="swatch kind-{kind} {classes}">'
            + _outline(kind, 10, y + 4, 40, 18, 3.0)
            + ' class="ring"/>'
            + _outline(kind, 10, y + 4, 40, 18)
            + ' class="shape"/>'
            + (_outline(kind, 13, y + 7, 34, 12) + ' class="inner"/>' if kind == "collect" else "")
            + f'<text x="62" y="{_num(y + 18)}">{_esc(text)}</text></g>'
        )
        y += 28
    if taken:
        for state, text in (("plain", "path not taken"), ("taken", "path taken")):
            out.append(
                f'<g class="edge state-{state}"><path class="line" d="M8,{_num(y + 13)} '
                f'L50,{_num(y + 13)}" marker-end="url(#gp-arrow)"/>'
                f'<text x="62" y="{_num(y + 18)}">{_esc(text)}</text></g>'
            )
            y += 28
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="gp-diagram gp-legend" '
        f'viewBox="0 0 300 {_num(y + 4)}" width="300" height="{_num(y + 4)}" '
        f'font-family="{_FONT}" font-size="13">{_DEFS}{"".join(out)}</svg>'
    )
