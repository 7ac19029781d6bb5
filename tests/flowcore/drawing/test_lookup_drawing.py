"""A lookup drawn on every page: a cylinder (the usual shape of a data store) in the SVG
diagram and the Mermaid chart, its own line in the text tree naming the endpoint, its
edges labelled with the labels of returns and its ``__error__`` route drawn apart; on a
run, the lookup the run passed is ``looked_up`` and the edge its answer took is taken."""

from __future__ import annotations

from flowcore.drawing.diagram import render_svg
from flowcore.drawing.mermaid import render_mermaid
from flowcore.drawing.run_view import run_view, step_summary
from flowcore.drawing.text_tree import render_tree
from flowcore.run import engine
from flowcore.run.lookups import Looked
from flowcore.run.results import step_result
from tests.flowcore.checks.test_lookup_nodes import flow


def test_the_svg_draws_a_lookup_as_a_cylinder_with_its_labels_on_its_edges() -> None:
    svg = render_svg(flow())
    assert 'class="node kind-lookup state-plain' in svg
    shape = svg[svg.index('id="node-n_status"') :]
    shape = shape[: shape.index("</g>")]
    assert shape.count(" A") >= 3  # two arcs of its outline, one of its top rim
    assert "calls: orders" in shape
    assert 'data-label="shipped"' in svg


def test_the_svg_draws_the_error_route_apart_from_the_answers() -> None:
    svg = render_svg(flow())
    assert 'class="edge failed-call state-plain" data-from="n_status" data-to="n_human"' in svg
    assert 'class="edge state-plain" data-from="n_status" data-to="n_shipped"' in svg


def test_the_text_tree_names_the_endpoint_and_each_label() -> None:
    tree = render_tree(flow())
    assert "[lookup] n_status — look up the order's status ⇄ calls orders " in tree
    assert "(sends order_id; sets shipped_on: date)" in tree
    assert "shipped: the order has left the warehouse → [end] n_shipped" in tree
    assert "__error__ (the call failed) → [end] n_human" in tree


def test_mermaid_draws_a_cylinder_and_a_dotted_failed_call() -> None:
    chart = render_mermaid(flow())
    assert 'n2[("n_status: look up the order\'s status<br/>calls: orders")]' in chart
    assert 'n2 -->|"shipped"| n3' in chart
    assert 'n2 -.->|"call failed"| n5' in chart


def test_a_run_marks_the_lookup_looked_up_and_the_edge_its_answer_took_taken() -> None:
    moved = engine.start(
        flow(), {"order_id": "A-1"}, lookups={"n_status": Looked(response='{"label":"pending"}')}
    )
    view = run_view(flow(), moved.state)
    assert view.node_states["n_status"] == "looked_up"
    assert ("n_status", "pending") in view.taken
    assert ("n_status", "__error__") not in view.taken
    summary = step_summary("guide_start", step_result("r_1", moved))
    assert "looked up n_status (pending)" in summary
