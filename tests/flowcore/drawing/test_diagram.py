"""The server-side flow diagram: layout invariants, the SVG contract, caching (ADR 0018)."""

from __future__ import annotations

import dataclasses
import doctest
import hashlib
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter

import pytest

from flowcore.drawing import diagram, graph_layout
from flowcore.drawing.diagram import (
    MARK_LABELS,
    NODE_STATES,
    STATE_LABELS,
    diagram_css,
    flow_layout,
    layout_cache_info,
    legend_svg,
    render_svg,
)
from flowcore.drawing.graph_layout import (
    ITEM_GAP,
    LABEL_LINE_PX,
    LABEL_PAD,
    RANK_GAP,
    Box,
    EdgeSpec,
    Layout,
    NodeSpec,
    ask_inset,
    check_inset,
    layout_graph,
)
from flowcore.flow.building import build_flow
from flowcore.flow.files import load_catalog
from flowcore.flow.model import (
    AskNode,
    CheckNode,
    CollectNode,
    EndNode,
    Flow,
    LookupNode,
    TellNode,
    frozen_mapping,
)
from flowcore.flow.model import Category as FlowCategory
from tests.flowcore.generated import generated_flow
from tests.flowcore.run.engine.strategies import flow_to_yaml
from tests.support.paths import BUNDLED_FLOWS, REPO

SVG = "{http://www.w3.org/2000/svg}"
BUNDLED = load_catalog(BUNDLED_FLOWS).flows
EPS = 0.11  # coordinates are written with one decimal


def from_yaml(flow: Flow) -> Flow:
    built, findings = build_flow(
        flow_to_yaml(flow), categories={"test": FlowCategory("test", "Test")}
    )
    assert built is not None, findings
    return built


def sized_flow(size: int) -> Flow:
    flow = generated_flow(size, seed=size)
    return from_yaml(flow) if size == 20 else flow


def expected_edges(flow: Flow) -> Counter[tuple[str, str, str]]:
    """(from, to, labels) per drawn edge: every label between two nodes on one edge."""
    merged: dict[tuple[str, str], list[str]] = {}
    for node in flow.nodes.values():
        if isinstance(node, AskNode | LookupNode):
            for label, target in node.next.items():
                merged.setdefault((node.id, target), []).append(label)
        elif isinstance(node, TellNode | CollectNode):
            merged.setdefault((node.id, node.next), []).append("")
        elif isinstance(node, CheckNode):
            for label, target in node.edges():
                merged.setdefault((node.id, target), []).append(label)
    return Counter((s, t, " ".join(labels)) for (s, t), labels in merged.items())


def next_entries(flow: Flow) -> int:
    return sum(
        len(n.next)
        if isinstance(n, AskNode | LookupNode)
        else len(n.edges())
        if isinstance(n, CheckNode)
        else (0 if isinstance(n, EndNode) else 1)
        for n in flow.nodes.values()
    )


def on_outline(point: tuple[float, float], box: Box) -> bool:
    """On the top or bottom border where the drawn outline is flat (or, for a loop to
    itself, on the right border)."""
    x, y = point
    inset = {
        "ask": ask_inset(box.width, box.height),
        "check": check_inset(box.height),
        "end": box.height / 2,
    }.get(box.kind, 0.0)
    flat = box.x + inset - EPS <= x <= box.x + box.width - inset + EPS
    top_or_bottom = abs(y - box.y) < EPS or abs(y - (box.y + box.height)) < EPS
    right = abs(x - (box.x + box.width)) < EPS and box.y <= y <= box.y + box.height
    return (flat and top_or_bottom) or right


def apart(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    """Two rectangles (x, y, w, h) that do not come closer than the smallest gap."""
    gap = min(ITEM_GAP, RANK_GAP) - EPS
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    return ax + aw + gap <= bx or bx + bw + gap <= ax or ay + ah + gap <= by or by + bh + gap <= ay


def assert_diagram_invariants(flow: Flow, layout: Layout, svg: str) -> None:
    root = ET.fromstring(svg)  # well-formed XML
    # Every node drawn exactly once, as a group with its id.
    nodes = [g for g in root.iter(f"{SVG}g") if "node" in g.get("class", "").split()]
    assert Counter(g.get("data-node") for g in nodes) == Counter(list(flow.nodes))
    assert all(g.get("id") == f"node-{g.get('data-node')}" for g in nodes)
    ids = [e.get("id") for e in root.iter() if e.get("id")]
    assert len(ids) == len(set(ids))
    assert list(layout.boxes) == list(flow.nodes)
    # Every next entry drawn: one edge per (from, to), carrying every label between them.
    edges = [g for g in root.iter(f"{SVG}g") if "edge" in g.get("class", "").split()]
    drawn = Counter((g.get("data-from"), g.get("data-to"), g.get("data-label")) for g in edges)
    assert drawn == expected_edges(flow)
    assert sum(len(r.labels) for r in layout.routes) == next_entries(flow)
    # No two boxes overlap, nor come closer than the gap; labels sit clear of boxes.
    rects = [(b.x, b.y, b.width, b.height) for b in layout.boxes.values()]
    for i, a in enumerate(rects):
        for b in rects[i + 1 :]:
            assert apart(a, b), (a, b)
    boxes = {(g.get("data-from"), g.get("data-to")): g.find(f"{SVG}rect") for g in edges}
    for route in layout.routes:
        if route.lines:
            w, h = route.label_width, route.label_height
            label = (route.label_x - w / 2, route.label_y - h / 2, w, h)
            assert all(not _overlap(label, r) for r in rects), (route, label)
        drawn_box = boxes[route.source, route.target]
        if drawn_box is not None:  # the label box drawn stays in the room the layout kept
            x, y = float(drawn_box.get("x", 0)), float(drawn_box.get("y", 0))
            dw, dh = float(drawn_box.get("width", 0)), float(drawn_box.get("height", 0))
            assert label[0] - EPS <= x and x + dw <= label[0] + label[2] + EPS, route
            assert label[1] - EPS <= y and y + dh <= label[1] + label[3] + EPS, route
    # Each route leaves its source's outline and ends on its target's; the drawn path too.
    paths = {(g.get("data-from"), g.get("data-to")): g.find(f"{SVG}path") for g in edges}
    for route in layout.routes:
        assert on_outline(route.points[0], layout.boxes[route.source]), route
        assert on_outline(route.points[-1], layout.boxes[route.target]), route
        path = paths[route.source, route.target]
        assert path is not None
        numbers = [float(n) for n in re.findall(r"-?[0-9.]+", path.get("d", ""))]
        assert numbers[:2] == pytest.approx(route.points[0], abs=EPS)
        assert numbers[-2:] == pytest.approx(route.points[-1], abs=EPS)
    # Drawn at its size (pages scroll it), everything inside the canvas.
    assert root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}"
    for x, y, w, h in rects:
        assert 0 <= x and x + w <= layout.width and 0 <= y and y + h <= layout.height
    assert "<script" not in svg and "href" not in svg


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


@pytest.mark.parametrize("size", [1, 20, 150])
def test_generated_flows_draw_every_node_once_every_edge_and_no_overlap(size: int) -> None:
    flow = sized_flow(size)
    assert len(flow.nodes) == size
    assert_diagram_invariants(flow, flow_layout(flow), render_svg(flow))


@pytest.mark.parametrize("flow_id", sorted(BUNDLED))
def test_bundled_flows_draw_every_node_once_every_edge_and_no_overlap(flow_id: str) -> None:
    flow = BUNDLED[flow_id]
    assert_diagram_invariants(flow, flow_layout(flow), render_svg(flow))


def test_bundled_flows_are_all_checked() -> None:
    assert len(BUNDLED) >= 6


def longest_path(flow: Flow) -> int:
    memo: dict[str, int] = {}

    def depth(node_id: str) -> int:
        if node_id not in memo:
            memo[node_id] = 1 + max(
                (depth(t) for t in flow.nodes[node_id].successors()), default=-1
            )
        return memo[node_id]

    return depth(flow.entry)


def test_dense_150_node_flow_takes_exactly_its_longest_path_in_layers() -> None:
    flow = generated_flow(150, seed=7, cross=1.0)
    crossing = sum(len(set(n.successors())) for n in flow.nodes.values()) - (len(flow.nodes) - 1)
    assert crossing >= 100  # well beyond a tree: many edges cross between branches
    layout = flow_layout(flow)
    assert layout.layers == longest_path(flow) + 1 < len(flow.nodes) // 3
    assert {b.layer for b in layout.boxes.values()} == set(range(layout.layers))
    assert_diagram_invariants(flow, layout, render_svg(flow))


def test_every_edge_points_down_to_a_later_layer_in_a_flow() -> None:
    layout = flow_layout(BUNDLED["payment_failed"])
    for route in layout.routes:
        assert layout.boxes[route.source].layer < layout.boxes[route.target].layer
        assert route.points[0][1] < route.points[-1][1]


def test_two_labels_to_one_node_are_one_edge_with_both_labels() -> None:
    flow = BUNDLED["payment_failed"]  # n_charged: charged and __unknown__ both go to n_identity
    root = ET.fromstring(render_svg(flow))
    edges = [g for g in root.iter(f"{SVG}g") if g.get("data-from") == "n_charged"]
    assert sorted((g.get("data-to"), g.get("data-label")) for g in edges) == [
        ("n_identity", "charged __unknown__"),
        ("n_retry", "not_charged"),
    ]
    texts = ["".join(t.itertext()) for g in edges for t in g.iter(f"{SVG}text")]
    assert "charged / __unknown__" in texts


def label_rows(svg: str, source: str, target: str) -> list[tuple[str, str]]:
    """(label, its note) per line of the label box of the edge from ``source`` to ``target``."""
    edge = ET.fromstring(svg).find(f".//{SVG}g[@data-from='{source}'][@data-to='{target}']")
    assert edge is not None
    rows = []
    for text in edge.iter(f"{SVG}text"):
        note = text.find(f"{SVG}tspan[@class='note']")
        rows.append((text.text or "", "" if note is None else note.text or ""))
    return rows


def test_labels_sharing_an_edge_each_show_their_own_count() -> None:
    flow = BUNDLED["vpn_cannot_connect"]  # timeout and __unknown__ both go to n_internet
    counts = {("n_error_message", "timeout"): "12", ("n_error_message", "__unknown__"): "0"}
    svg = render_svg(flow, edge_notes=counts)
    assert label_rows(svg, "n_error_message", "n_internet") == [
        ("timeout", "12"),
        ("__unknown__", "0"),
    ]
    edge = ET.fromstring(svg).find(
        f".//{SVG}g[@data-to='n_internet'][@data-from='n_error_message']"
    )
    assert edge is not None
    title = edge.find(f"{SVG}title")
    assert title is not None and title.text == (
        "n_error_message → n_internet: timeout 12 · __unknown__ 0"
    )
    texts = list(edge.iter(f"{SVG}text"))
    assert [t.get("data-label") for t in texts] == ["timeout", "__unknown__"]
    # Two lines, one label each, and the notes in a column at the right of the box.
    box = edge.find(f"{SVG}rect")
    assert box is not None
    ys = [float(t.get("y", 0)) for t in texts]
    assert ys[1] - ys[0] == pytest.approx(LABEL_LINE_PX)
    rights = [float(n.get("x", 0)) for t in texts for n in t.iter(f"{SVG}tspan")]
    right = float(box.get("x", 0)) + float(box.get("width", 0)) - LABEL_PAD
    assert rights == pytest.approx([right, right], abs=EPS)
    assert_diagram_invariants(flow, flow_layout(flow, notes=True), svg)


def test_without_notes_labels_sharing_an_edge_share_one_line() -> None:
    svg = render_svg(BUNDLED["vpn_cannot_connect"])
    assert label_rows(svg, "n_error_message", "n_internet") == [("timeout / __unknown__", "")]


def test_shared_node_is_drawn_once_with_every_incoming_edge() -> None:
    flow = BUNDLED["payment_failed"]
    svg = render_svg(flow)
    assert svg.count('id="node-n_retry"') == 1
    senders = {"n_generic", "n_update_card", "n_activate_card", "n_card_issuer", "n_topup"}
    senders |= {"n_3ds", "n_charged"}
    assert Counter(re.findall(r'data-from="(\w+)" data-to="n_retry"', svg)) == Counter(senders)


def test_unreachable_nodes_and_cycles_are_still_drawn() -> None:
    base = BUNDLED["vpn_cannot_connect"]
    nodes = dict(base.nodes)
    nodes["n_orphan_end"] = EndNode("n_orphan_end", "alone", "lost")
    nodes["n_loop"] = AskNode(
        "n_loop",
        "goes back",
        frozen_mapping({"again": "a", "stay": "s"}),
        frozen_mapping({"again": base.entry, "stay": "n_loop"}),
    )
    nodes["n_orphan"] = TellNode("n_orphan", "nobody leads here", "n_loop")
    flow = dataclasses.replace(base, nodes=frozen_mapping(nodes), content_hash="")
    layout = flow_layout(flow)
    assert_diagram_invariants(flow, layout, render_svg(flow))
    reached = max(b.layer for i, b in layout.boxes.items() if i in base.nodes)
    assert {layout.boxes[i].layer for i in ("n_orphan", "n_orphan_end")} == {reached + 1}
    assert layout.boxes["n_loop"].layer > reached + 1


def test_same_flow_gives_byte_identical_svg_without_the_cache() -> None:
    flow = dataclasses.replace(sized_flow(150), content_hash="")
    states = {"n0": "answered", "n3": "current"}
    first = render_svg(flow, node_states=states)
    again = render_svg(dataclasses.replace(flow), node_states=dict(states))
    assert first == again


def test_same_flow_gives_byte_identical_svg_in_other_processes() -> None:
    code = (
        "import hashlib, sys; sys.path.insert(0, '.');"
        "from tests.flowcore.generated import generated_flow;"
        "from flowcore.drawing.diagram import render_svg;"
        "print(hashlib.sha256(render_svg(generated_flow(150, seed=150)).encode()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    here = hashlib.sha256(render_svg(generated_flow(150, seed=150)).encode()).hexdigest()
    assert digests == {here + "\n"}


def test_agent_text_is_escaped_and_the_full_say_is_in_the_title() -> None:
    say = 'Check <script>alert(1)</script> & "quotes"\x00 here'
    flow = Flow(
        id="x",
        title="x",
        category="test",
        entry="a",
        nodes=frozen_mapping({"a": EndNode("a", say, "done")}),
    )
    svg = render_svg(flow, node_notes={"a": "<b>unmatched: <i>"})
    assert "<script" not in svg and "<b>" not in svg and "<i>" not in svg
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in svg
    node = ET.fromstring(svg).find(f".//{SVG}g[@id='node-a']")
    assert node is not None
    title = node.find(f"{SVG}title")
    assert title is not None and title.text == "a · end\n" + say.replace("\x00", "\ufffd")
    texts = "".join(node.itertext())
    assert "<b>unmatched: <i>" in texts


def _classes(svg: str) -> dict[str, set[str]]:
    root = ET.fromstring(svg)
    found = {g.get("data-node", ""): set(g.get("class", "").split()) for g in root.iter(f"{SVG}g")}
    found.pop("", None)
    return found


def test_node_states_become_classes_and_omitted_nodes_are_unvisited() -> None:
    flow = BUNDLED["payment_failed"]
    states = {"n_error_code": "answered", "n_card_age": "prefilled", "n_retry": "current"}
    classes = _classes(render_svg(flow, node_states=states))
    assert classes["n_retry"] == {"node", "kind-ask", "state-current"}
    assert classes["n_card_age"] == {"node", "kind-ask", "state-prefilled"}
    assert classes["n_identity"] == {"node", "kind-collect", "state-unvisited"}
    assert classes["n_resolved"] == {"node", "kind-end", "state-unvisited"}
    assert {c for cs in _classes(render_svg(flow)).values() for c in cs if "state" in c} == {
        "state-plain"
    }


@pytest.mark.parametrize("state", sorted(STATE_LABELS))
def test_every_run_state_is_accepted_and_styled(state: str) -> None:
    flow = BUNDLED["payment_failed"]
    assert "state-" + state in _classes(render_svg(flow, node_states={"n_retry": state}))["n_retry"]
    assert f".state-{state} .shape" in diagram_css()


def test_unknown_states_are_refused() -> None:
    flow = BUNDLED["payment_failed"]
    with pytest.raises(ValueError, match="unknown node state"):
        render_svg(flow, node_states={"n_retry": "done"})
    with pytest.raises(ValueError, match="unknown edge state"):
        render_svg(flow, edge_states={("n_retry", "success"): "walked"})


def test_a_drafts_new_and_changed_nodes_are_classed_and_styled_apart() -> None:
    flow = BUNDLED["payment_failed"]
    svg = render_svg(flow, node_marks={"n_retry": "new", "n_identity": "changed"})
    classes = _classes(svg)
    assert classes["n_retry"] == {"node", "kind-ask", "state-plain", "mark-new"}
    assert classes["n_identity"] == {"node", "kind-collect", "state-plain", "mark-changed"}
    unmarked = {n: cs for n, cs in classes.items() if n not in ("n_retry", "n_identity")}
    assert not any(c.startswith("mark-") for cs in unmarked.values() for c in cs)
    css = diagram_css()
    new = re.search(r"\.mark-new \.shape \{([^}]*)\}", css)
    changed = re.search(r"\.mark-changed \.shape \{([^}]*)\}", css)
    assert new and changed
    # Apart by more than colour: a dashed outline for a changed node, a solid one for new.
    assert "stroke-dasharray" in changed.group(1) and "stroke-dasharray" not in new.group(1)
    with pytest.raises(ValueError, match="unknown node mark"):
        render_svg(flow, node_marks={"n_retry": "moved"})


def test_the_legend_explains_the_marks_it_is_given() -> None:
    root = ET.fromstring(legend_svg(states=(), marks=("new", "changed"), taken=False))
    classes = [set(g.get("class", "").split()) for g in root.iter(f"{SVG}g")]
    assert {"swatch", "mark-new"} <= classes[0] and {"swatch", "mark-changed"} <= classes[1]
    texts = {"".join(t.itertext()) for t in root.iter(f"{SVG}text")}
    assert set(MARK_LABELS.values()) <= texts
    with pytest.raises(ValueError, match="unknown node mark"):
        legend_svg(marks=("moved",))


def test_a_merged_edge_is_taken_when_one_of_its_labels_is() -> None:
    flow = BUNDLED["payment_failed"]
    svg = render_svg(
        flow, edge_states={("n_charged", "__unknown__"): "taken", ("n_generic", ""): "taken"}
    )
    root = ET.fromstring(svg)
    taken = {
        (g.get("data-from"), g.get("data-to"))
        for g in root.iter(f"{SVG}g")
        if "state-taken" in g.get("class", "").split()
    }
    assert taken == {("n_charged", "n_identity"), ("n_generic", "n_retry")}
    assert svg.count('class="edge state-plain"') == len(flow_layout(flow).routes) - 2


def _shape_style(css: str, state: str) -> tuple[str, ...]:
    """What tells a state apart without colour: width, dashes, a pattern fill, a ring."""
    shape = re.search(rf"\.state-{state} \.shape \{{([^}}]*)\}}", css)
    ring = re.search(rf"\.state-{state} \.ring \{{([^}}]*)\}}", css)
    body = shape.group(1) if shape else ""
    width = re.search(r"stroke-width:\s*([0-9.]+)", body)
    dashes = re.search(r"stroke-dasharray:\s*([0-9 ]+)", body)
    pattern = re.search(r"fill:\s*(url\([^)]*\))", body)
    return (
        width.group(1) if width else "",
        dashes.group(1) if dashes else "",
        pattern.group(1) if pattern else "",
        "ring" if ring else "",
    )


def test_states_differ_by_more_than_colour() -> None:
    css = diagram_css()
    styles = {state: _shape_style(css, state) for state in STATE_LABELS}
    assert len(set(styles.values())) == len(styles), styles
    for pattern in {p for _, _, p, _ in styles.values() if p}:
        assert f'id="{pattern[5:-1]}"' in render_svg(BUNDLED["payment_failed"])


def test_legend_lists_every_state_and_kind_with_the_diagram_classes() -> None:
    svg = legend_svg()
    root = ET.fromstring(svg)
    classes = [set(g.get("class", "").split()) for g in root.iter(f"{SVG}g")]
    for state in STATE_LABELS:
        assert any({"swatch", f"state-{state}"} <= c for c in classes), state
    for kind in ("ask", "tell", "collect", "check", "lookup", "end"):
        assert any(f"kind-{kind}" in c for c in classes), kind
    assert any({"edge", "state-taken"} <= c for c in classes)
    assert 'id="node-' not in svg
    texts = {"".join(t.itertext()) for t in root.iter(f"{SVG}text")}
    assert set(STATE_LABELS.values()) <= texts


def test_notes_are_drawn_in_room_the_layout_keeps_for_them() -> None:
    flow = BUNDLED["payment_failed"]
    svg = render_svg(
        flow,
        node_notes={"n_error_code": "12 runs"},
        edge_notes={("n_error_code", "E01"): "9 runs", ("n_generic", ""): "3 runs"},
    )
    assert_diagram_invariants(flow, flow_layout(flow, notes=True), svg)
    notes = [t for t in ET.fromstring(svg).iter() if t.get("class") == "note"]
    assert sorted(t.text or "" for t in notes) == ["12 runs", "3 runs", "9 runs"]
    plain, noted = flow_layout(flow), flow_layout(flow, notes=True)
    assert all(
        noted.boxes[i].height > plain.boxes[i].height and noted.boxes[i].width >= b.width
        for i, b in plain.boxes.items()
    )


def test_layout_is_cached_by_content_hash_and_reused_for_new_states() -> None:
    flow = dataclasses.replace(BUNDLED["identity_check"], content_hash="test-cache-identity")
    layout = flow_layout(flow)
    before = layout_cache_info()
    render_svg(flow, node_states={flow.entry: "current"})
    render_svg(flow, node_states={flow.entry: "answered"}, edge_states={})
    after = layout_cache_info()
    assert (after.hits - before.hits, after.misses - before.misses) == (2, 0)
    assert flow_layout(flow) is layout
    assert flow_layout(dataclasses.replace(flow)) is layout  # another object, same content
    assert flow_layout(flow, notes=True) is not layout


def test_flows_without_a_content_hash_are_laid_out_each_time() -> None:
    flow = dataclasses.replace(BUNDLED["identity_check"], content_hash="")
    first, second = flow_layout(flow), flow_layout(flow)
    assert first is not second and first == second


def test_layout_graph_refuses_edges_to_missing_nodes_and_duplicate_ids() -> None:
    a = NodeSpec("a", "tell", ("a",))
    with pytest.raises(ValueError, match="names no node"):
        layout_graph([a], [EdgeSpec("a", "b")])
    with pytest.raises(ValueError, match="share an id"):
        layout_graph([a, a], [])
    with pytest.raises(ValueError, match="entry"):
        layout_graph([a], [], entry="z")


def test_wide_characters_make_wider_boxes() -> None:
    narrow = layout_graph([NodeSpec("a", "tell", ("abcdefghijklmnopqrst",))], [])
    wide = layout_graph([NodeSpec("a", "tell", ("あいうえおかきくけこさしすせそたちつてと",))], [])
    assert wide.boxes["a"].width > narrow.boxes["a"].width * 1.8


def test_doctests_of_the_diagram_modules_pass() -> None:
    for module in (graph_layout, diagram):
        assert doctest.testmod(module).failed == 0


def test_node_states_and_labels_cover_the_same_states() -> None:
    assert set(NODE_STATES) == {"plain", *STATE_LABELS}
