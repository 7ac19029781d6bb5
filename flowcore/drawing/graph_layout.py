"""Layered (Sugiyama-style) layout of a directed graph of text boxes, top-down.

Pure and deterministic: plain data in (``NodeSpec``, ``EdgeSpec`` in author order),
plain data out (``Layout``: boxes and routed edges in pixels). The steps:

1. layers by longest path from the entry; nodes it does not reach go below; an edge
   closing a cycle is turned upwards;
2. nodes on even ranks; one dummy item per rank an edge crosses, the first one (on the
   odd rank right below its upper end) sized to hold the edge's label, so labels and
   long edges get room of their own and never cross a box;
3. barycentre sweeps, keeping the order with the fewest crossings (ties: author order);
4. x by least squares towards neighbours, under "keep the order, never overlap"
   (pool-adjacent-violators), dummies weighted so long edges run straight;
5. y by bands, each gap growing with the widest sideways jump that crosses it.

Text widths are estimated, not measured: one unit per narrow character, two per East
Asian wide or fullwidth one (a 13px CJK glyph is ~13px wide).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

Point = tuple[float, float]

UNIT_PX = 7.2
LINE_PX = 17.0
PAD_X = 12.0
PAD_Y = 8.0
WRAP_UNITS = 30
SAY_LINES = 3
MIN_BOX_W = 110.0
LABEL_UNIT_PX = 6.4
LABEL_LINE_PX = 14.0
LABEL_PAD = 4.0
LABEL_UNITS = 36
COUNT_UNITS = 6  # room kept beside each label for its note (a count: "12,345") when notes are on
ITEM_GAP = 26.0  # horizontal gap between two items of a layer
DUMMY_W = 8.0  # an unlabelled edge passing a layer
LOOP_W = 22.0  # a loop from a node to itself, right of its box
RANK_GAP = 18.0  # vertical gap between two bands, plus GAP_GROWTH per px of sideways jump
GAP_GROWTH = 0.04
GAP_GROWTH_CAP = 60.0
MARGIN = 16.0
SWEEPS = 8
PLACE_ROUNDS = 6
_NO_LINE_START = frozenset("、。，．・：；？！）」』】〉》ー…,.;:!?)]}")


def text_units(text: str) -> int:
    """Width of ``text`` in units: East Asian wide/fullwidth characters count 2.

    >>> text_units("ab"), text_units("決済"), text_units("a決")
    (2, 4, 3)
    """
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def clip(text: str, units: int) -> str:
    """``text`` cut to ``units`` units, an ellipsis marking the cut.

    >>> clip("abcdef", 4), clip("abc", 4), clip("決済エラー", 6)
    ('abc…', 'abc', '決済…')
    """
    if text_units(text) <= units:
        return text
    out, used = "", 0
    for ch in text:
        w = text_units(ch)
        if used + w > units - 1:
            break
        out, used = out + ch, used + w
    return out + "…"


def wrap(text: str, units: int, max_lines: int) -> list[str]:
    """Lines of at most ``units`` units: words where there are spaces, characters where
    there are none (Japanese), the last kept line ellipsed when text is left over.

    >>> wrap("one two three", 8, 2)
    ['one two', 'three']
    >>> wrap("決済画面に出ているエラー", 8, 2)
    ['決済画面', 'に出て…']
    """
    lines: list[str] = []
    cur, used = "", 0

    def flush() -> None:
        nonlocal cur, used
        lines.append(cur.rstrip())
        cur, used = "", 0

    for word in text.split():
        size = text_units(word)
        if size <= units:
            if cur and used + 1 + size > units:
                flush()
            cur, used = (f"{cur} {word}", used + 1 + size) if cur else (word, size)
            continue
        if cur:
            cur, used = cur + " ", used + 1
        for ch in word:
            w = text_units(ch)
            if used + w > units and ch not in _NO_LINE_START:
                flush()
            cur, used = cur + ch, used + w
    if cur.strip():
        flush()
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = clip(lines[-1] + "…", units)
    return lines


def wrap_balanced(text: str, units: int, max_lines: int) -> list[str]:
    """``wrap``, then as narrow as it can be without needing another line: no lone last word.

    >>> wrap("案内した対応のあとで、もう一度支払いを試してもらい、結果を聞く", 30, 3)[-1]
    'く'
    >>> wrap_balanced("案内した対応のあとで、もう一度支払いを試してもらい、結果を聞く", 30, 3)[-1]
    'てもらい、結果を聞く'
    """
    lines = wrap(text, units, max_lines)
    if len(lines) < 2 or lines[-1].endswith("…"):
        return lines
    narrow = units
    while narrow > 1 and len(wrap(text, narrow - 1, max_lines + 1)) == len(lines):
        narrow -= 1
    return wrap(text, narrow, max_lines)


@dataclass(frozen=True)
class NodeSpec:
    """A box to place: its kind decides its outline, its text lines its size."""

    id: str
    kind: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class EdgeSpec:
    """An edge in author order; ``label`` is "" for a tell's or collect's ``next``."""

    source: str
    target: str
    label: str = ""


@dataclass(frozen=True)
class Box:
    id: str
    kind: str
    lines: tuple[str, ...]
    x: float  # top-left corner
    y: float
    width: float
    height: float
    layer: int


@dataclass(frozen=True)
class Route:
    """One drawn edge: every label between the same two nodes, merged."""

    source: str
    target: str
    labels: tuple[str, ...]
    lines: tuple[str, ...]  # the label box's lines, as ``label_lines`` makes them
    points: tuple[Point, ...]  # from the source box's border to the target box's border
    label_x: float  # centre of the label box
    label_y: float
    label_width: float
    label_height: float


@dataclass(frozen=True)
class Layout:
    boxes: Mapping[str, Box]  # in author order
    routes: tuple[Route, ...]  # in author order of their first label
    width: float
    height: float
    layers: int
    notes: bool  # room is kept for a note in every box and on every edge


def box_size(kind: str, lines: Sequence[str], *, notes: bool = False) -> tuple[float, float]:
    """Width and height of a node's box for its text (plus a note line when ``notes``)."""
    h = (len(lines) + (1 if notes else 0)) * LINE_PX + 2 * PAD_Y
    inner = max((text_units(line) for line in lines), default=0) * UNIT_PX + 2 * PAD_X
    extra = 2 * ask_inset(inner, h) if kind == "ask" else (h * 0.6 if kind == "end" else 0.0)
    if kind == "check":
        extra = 2 * check_inset(h)
    return max(MIN_BOX_W, inner + extra), h


def ask_inset(w: float, h: float) -> float:
    return min(16.0, h / 3, w * 0.12)


def check_inset(h: float) -> float:
    """How far a check's octagon cuts its corners."""
    return min(10.0, h / 4)


def lookup_rim(h: float) -> float:
    """How tall the half of a lookup's cylinder rim is."""
    return min(6.0, h / 8)


def label_lines(labels: Sequence[str], notes: bool) -> tuple[str, ...]:
    """The lines of an edge's label box, each clipped. Without notes, the labels share one
    line; with notes, line i is ``labels[i]`` (empty for a tell's or collect's edge), so
    each label's note stands beside its own label instead of a row of numbers.

    >>> label_lines(["timeout", "__unknown__"], False), label_lines([""], False)
    (('timeout / __unknown__',), ())
    >>> label_lines(["timeout", "__unknown__"], True), label_lines([""], True)
    (('timeout', '__unknown__'), ('',))
    """
    if notes:
        return tuple(clip(label, LABEL_UNITS) for label in labels)
    joined = " / ".join(label for label in labels if label)
    return (clip(joined, LABEL_UNITS),) if joined else ()


def label_size(lines: Sequence[str], notes: bool) -> tuple[float, float]:
    """Room for a label box: its lines, and with notes a column of ``COUNT_UNITS`` beside them."""
    if not lines:
        return DUMMY_W, 0.0
    units = max(text_units(line) for line in lines)
    if notes:
        units += COUNT_UNITS + (1 if units else 0)
    return units * LABEL_UNIT_PX + 2 * LABEL_PAD, len(lines) * LABEL_LINE_PX + 2 * LABEL_PAD


def layout_graph(
    nodes: Sequence[NodeSpec],
    edges: Sequence[EdgeSpec],
    *,
    entry: str | None = None,
    notes: bool = False,
) -> Layout:
    """Place ``nodes`` top-down from ``entry`` (default: the first node) and route ``edges``.

    Every node is placed once; nodes the entry does not reach get the layers after the
    others. Edges between the same two nodes become one route with all their labels.
    A cycle is drawn by turning its closing edge upwards. Ties are broken by author
    order, so the same input always gives the same layout. Raises ValueError for a
    duplicate node id, or an entry or edge naming no node.
    """
    index = {n.id: i for i, n in enumerate(nodes)}
    if len(index) != len(nodes):
        raise ValueError("two nodes share an id")
    start = entry if entry is not None else (nodes[0].id if nodes else "")
    if nodes and start not in index:
        raise ValueError(f"entry {start!r} names no node")
    merged: dict[tuple[str, str], list[str]] = {}
    for e in edges:
        if e.source not in index or e.target not in index:
            raise ValueError(f"edge {e.source} -> {e.target} names no node")
        merged.setdefault((e.source, e.target), []).append(e.label)
    pairs = list(merged)
    succ: dict[str, list[str]] = {n.id: [] for n in nodes}
    for s, t in pairs:
        if s != t:
            succ[s].append(t)
    layer = _layers([n.id for n in nodes], succ, start)
    sizes = {n.id: box_size(n.kind, n.lines, notes=notes) for n in nodes}

    box_lines = [label_lines(merged[p], notes) for p in pairs]

    # Items: every node, then one dummy per edge per rank it crosses. Nodes sit on even
    # ranks; the odd rank right below an edge's upper end holds its label. A node with a
    # loop to itself is wider by the room the loop and its label take on its right.
    width = [sizes[n.id][0] for n in nodes]
    for p, (s, t) in enumerate(pairs):
        if s == t:
            width[index[s]] += LOOP_W + label_size(box_lines[p], notes)[0] + ITEM_GAP / 2
    height = [sizes[n.id][1] for n in nodes]
    rank = [2 * layer[n.id] for n in nodes]
    key: list[tuple[int, int, int]] = [(i, -1, 0) for i in range(len(nodes))]
    chains: list[list[int]] = []
    label_item: list[int] = []
    for p, (s, t) in enumerate(pairs):
        if s == t:
            chains.append([index[s]])
            label_item.append(-1)
            continue
        top, bottom = (s, t) if layer[s] < layer[t] else (t, s)
        chain = [index[top]]
        for r in range(2 * layer[top] + 1, 2 * layer[bottom]):
            chain.append(len(width))
            width.append(DUMMY_W)
            height.append(0.0)
            rank.append(r)
            key.append((index[s], p, r))
        chain.append(index[bottom])
        carrier = chain[1] if top == s else chain[-2]
        width[carrier], height[carrier] = label_size(box_lines[p], notes)
        chains.append(chain)
        label_item.append(carrier)

    ranks: list[list[int]] = [[] for _ in range(max(rank, default=0) + 1)]
    for k in sorted(range(len(width)), key=lambda k: key[k]):
        ranks[rank[k]].append(k)
    up: list[list[tuple[int, float]]] = [[] for _ in width]
    down: list[list[tuple[int, float]]] = [[] for _ in width]
    for chain in chains:
        for a, b in zip(chain, chain[1:], strict=False):
            w = 1.0 + (a >= len(nodes)) + (b >= len(nodes))
            w = 8.0 if w == 3.0 else w
            down[a].append((b, w))
            up[b].append((a, w))

    ranks = _order(ranks, up, down)
    xs = _place(ranks, up, down, width)
    ys, band_bottom, total_h = _bands(ranks, height, down, xs)

    left = min((xs[k] - width[k] / 2 for k in range(len(width))), default=MARGIN)
    xs = [x - left + MARGIN for x in xs]
    boxes = {
        n.id: Box(
            n.id, n.kind, n.lines, xs[i] - width[i] / 2, ys[rank[i]], *sizes[n.id], layer[n.id]
        )
        for i, n in enumerate(nodes)
    }
    total_w = max((xs[k] + width[k] / 2 for k in range(len(width))), default=0.0) + MARGIN
    ports = _ports(chains, nodes, boxes, xs)

    routes: list[Route] = []
    for p, (s, t) in enumerate(pairs):
        chain = chains[p]
        if s == t:
            own = boxes[s]
            lw, lh = label_size(box_lines[p], notes)
            right, y1, y2 = own.x + own.width, own.y + own.height * 0.35, own.y + own.height * 0.65
            loop = right + LOOP_W - 4
            pts: list[Point] = [(right, y1), (loop, y1), (loop, y2), (right, y2)]
            label = (right + LOOP_W + lw / 2, own.y + own.height / 2, lw, lh)
        else:
            pts = [ports[p, 0], (ports[p, 0][0], band_bottom[rank[chain[0]]])]
            for k in chain[1:-1]:
                pts += [(xs[k], ys[rank[k]]), (xs[k], band_bottom[rank[k]])]
            pts.append(ports[p, 1])
            if layer[s] > layer[t]:
                pts.reverse()
            c = label_item[p]
            label = (xs[c], ys[rank[c]] + height[c] / 2, width[c], height[c])
        routes.append(Route(s, t, tuple(merged[s, t]), box_lines[p], _simplify(pts), *label))
    layers = max(layer.values(), default=-1) + 1
    return Layout(MappingProxyType(boxes), tuple(routes), total_w, total_h, layers, notes)


def _layers(ids: list[str], succ: Mapping[str, list[str]], entry: str) -> dict[str, int]:
    """Longest-path layers: from the entry, then the nodes it does not reach below them."""
    # Depth-first from the entry (then the rest) in author order; an edge back to a node
    # still on the stack closes a cycle and is turned around for layering. The reverse
    # finishing order is then a topological order of the turned graph.
    state: dict[str, int] = {}
    turned: set[tuple[str, str]] = set()
    finished: list[str] = []
    for root in [entry, *ids] if ids else []:
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(succ[root]))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                finished.append(node)
                stack.pop()
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(succ[child])))
            elif state[child] == 1:
                turned.add((node, child))
    dag: dict[str, list[str]] = {n: [] for n in ids}
    for s in ids:
        for t in succ[s]:
            a, b = (t, s) if (s, t) in turned else (s, t)
            dag[a].append(b)
    reached = {entry} if ids else set()
    todo = [entry] if ids else []
    while todo:
        for t in succ[todo.pop()]:
            if t not in reached:
                reached.add(t)
                todo.append(t)
    order = finished[::-1]
    layer = {n: 0 for n in ids}
    for group, base in ((reached, 0), (set(ids) - reached, None)):
        if base is None:
            base = max((layer[n] for n in reached), default=-1) + 1
            for n in group:
                layer[n] = base
        for n in order:
            if n in group:
                for t in dag[n]:
                    if t in group:
                        layer[t] = max(layer[t], layer[n] + 1)
    return layer


def _order(
    ranks: list[list[int]], up: list[list[tuple[int, float]]], down: list[list[tuple[int, float]]]
) -> list[list[int]]:
    """Barycentre sweeps (down, up, ...) keeping the order with the fewest crossings."""

    def sweep(current: list[list[int]], downward: bool) -> list[list[int]]:
        out = [list(r) for r in current]
        pos = {k: i for r in out for i, k in enumerate(r)}
        nbrs = up if downward else down

        def bary(k: int) -> float:
            ws = nbrs[k]
            if not ws:
                return float(pos[k])
            return sum(pos[n] * w for n, w in ws) / sum(w for _, w in ws)

        for r in range(1, len(out)) if downward else range(len(out) - 2, -1, -1):
            out[r].sort(key=bary)  # stable: ties keep the current (author-derived) order
            pos.update((k, i) for i, k in enumerate(out[r]))
        return out

    best = sweep(ranks, True)
    best_count = _crossings(best, down)
    current = best
    for i in range(SWEEPS):
        current = sweep(current, i % 2 == 1)
        count = _crossings(current, down)
        if count < best_count:
            best, best_count = current, count
    return best


def _crossings(ranks: list[list[int]], down: list[list[tuple[int, float]]]) -> int:
    """Edge crossings between consecutive ranks, counted as inversions (Fenwick tree)."""
    total = 0
    for r in range(len(ranks) - 1):
        lower = {k: i for i, k in enumerate(ranks[r + 1])}
        ends = [b for a in ranks[r] for b in sorted(lower[n] for n, _ in down[a])]
        tree = [0] * (len(lower) + 1)
        for seen, e in enumerate(ends):
            i, below = e + 1, 0
            while i > 0:
                below += tree[i]
                i -= i & -i
            total += seen - below
            i = e + 1
            while i <= len(lower):
                tree[i] += 1
                i += i & -i
    return total


def _place(
    ranks: list[list[int]],
    up: list[list[tuple[int, float]]],
    down: list[list[tuple[int, float]]],
    width: list[float],
) -> list[float]:
    """Centre x of every item: each rank in turn pulled towards its neighbours' mean,
    solved exactly in the least-squares sense under "no overlap, keep the order"."""
    xs = [0.0] * len(width)
    for r in ranks:
        cursor = 0.0
        for k in r:
            xs[k] = cursor + width[k] / 2
            cursor += width[k] + ITEM_GAP
    plan = [(r, up) for r in ranks[1:]] + [(r, down) for r in reversed(ranks[:-1])]
    for _ in range(PLACE_ROUNDS):
        for r, nbrs in plan:
            _fit(r, [(_mean(nbrs[k], xs) if nbrs[k] else (xs[k], 1.0)) for k in r], width, xs)
    both = [[*u, *d] for u, d in zip(up, down, strict=True)]
    for r in ranks:
        _fit(r, [(_mean(both[k], xs) if both[k] else (xs[k], 1.0)) for k in r], width, xs)
    return xs


def _mean(nbrs: list[tuple[int, float]], xs: list[float]) -> tuple[float, float]:
    weight = sum(w for _, w in nbrs)
    return sum(xs[n] * w for n, w in nbrs) / weight, weight


def _fit(
    r: list[int], wanted: list[tuple[float, float]], width: list[float], xs: list[float]
) -> None:
    # With c_i the packed offset of item i, x_i = v_i + c_i and "no overlap" is v_i <= v_i+1:
    # an isotonic regression of (desired_i - c_i), solved by pooling adjacent violators.
    offsets, c = [], 0.0
    for i, k in enumerate(r):
        if i:
            c += width[r[i - 1]] / 2 + ITEM_GAP + width[k] / 2
        offsets.append(c)
    pools: list[list[float]] = []  # [weight, weighted sum, count]
    for (d, w), c in zip(wanted, offsets, strict=True):
        pools.append([w, w * (d - c), 1])
        while len(pools) > 1 and pools[-2][1] / pools[-2][0] > pools[-1][1] / pools[-1][0]:
            w2, s2, n2 = pools.pop()
            pools[-1] = [pools[-1][0] + w2, pools[-1][1] + s2, pools[-1][2] + n2]
    i = 0
    for w, s, n in pools:
        for _ in range(int(n)):
            xs[r[i]] = s / w + offsets[i]
            i += 1


def _bands(
    ranks: list[list[int]],
    height: list[float],
    down: list[list[tuple[int, float]]],
    xs: list[float],
) -> tuple[list[float], list[float], float]:
    """Top and bottom of every rank's band, and the total height. A gap grows with the
    widest sideways jump crossing it, so long crossings slope instead of running flat."""
    tops, bottoms, y = [], [], MARGIN
    for i, r in enumerate(ranks):
        if i:
            above = ranks[i - 1]
            jump = max((abs(xs[k] - xs[n]) for k in above for n, _ in down[k]), default=0.0)
            y += RANK_GAP + min(GAP_GROWTH * jump, GAP_GROWTH_CAP)
        tops.append(y)
        y += max((height[k] for k in r), default=0.0)
        bottoms.append(y)
    return tops, bottoms, y + MARGIN


def _ports(
    chains: list[list[int]], nodes: Sequence[NodeSpec], boxes: Mapping[str, Box], xs: list[float]
) -> dict[tuple[int, int], Point]:
    """Where each route leaves its upper box (end 0) and enters its lower box (end 1):
    spread along the flat part of the border, in the order of where they go."""
    leaving: dict[int, list[tuple[float, int]]] = {}
    entering: dict[int, list[tuple[float, int]]] = {}
    for p, chain in enumerate(chains):
        if len(chain) > 1:
            leaving.setdefault(chain[0], []).append((xs[chain[1]], p))
            entering.setdefault(chain[-1], []).append((xs[chain[-2]], p))
    ports: dict[tuple[int, int], Point] = {}
    for end, groups in ((0, leaving), (1, entering)):
        for k, group in groups.items():
            b = boxes[nodes[k].id]
            inset = {
                "ask": ask_inset(b.width, b.height),
                "check": check_inset(b.height),
                "end": b.height / 2,
            }.get(b.kind, 0.0)
            edge = max(inset + 4, b.width * (0.2 if end == 0 else 0.1))
            lo, hi = b.x + edge, b.x + b.width - edge
            y = b.y + b.height if end == 0 else b.y
            for i, (_, p) in enumerate(sorted(group)):
                ports[p, end] = (lo + (hi - lo) * (i + 1) / (len(group) + 1), y)
    return ports


def _simplify(points: list[Point]) -> tuple[Point, ...]:
    """Drop repeated points and the middle of three points on one vertical line."""
    out: list[Point] = []
    for p in points:
        if out and out[-1] == p:
            continue
        if len(out) >= 2 and out[-2][0] == out[-1][0] == p[0]:
            out[-1] = p
        else:
            out.append(p)
    return tuple(out)
