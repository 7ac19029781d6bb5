"""A check drawn on every page (ADR 0117): its own shape in the SVG diagram, the text
tree and the Mermaid chart, its edges labelled with their conditions and ``else``; on a
run, the check the run passed is ``checked`` and the edge it took is taken."""

from __future__ import annotations

from datetime import date

from flowcore.drawing.diagram import render_svg
from flowcore.drawing.mermaid import render_mermaid
from flowcore.drawing.run_view import run_view, step_summary
from flowcore.drawing.text_tree import render_tree
from flowcore.run import engine
from flowcore.run.results import step_result
from tests.flowcore.checks.test_check_nodes import flow


def test_the_svg_draws_a_check_as_an_octagon_with_its_conditions_on_its_edges() -> None:
    svg = render_svg(flow())
    assert 'class="node kind-check state-plain' in svg
    shape = svg[svg.index('id="node-k_route"') :]
    shape = shape[: shape.index("</g>")]
    assert shape.count(" L") >= 7  # eight corners: its corners cut
    assert "amount &gt; 100.0" in svg
    assert ">else<" in svg


def test_the_text_tree_and_mermaid_write_each_condition_on_its_edge() -> None:
    tree = render_tree(flow())
    assert "if amount > 100.0" in tree and "else" in tree
    chart = render_mermaid(flow())
    assert '{{"k_route: big or old refunds go to a person"}}' in chart
    assert '-->|"amount #gt; 100.0"|' in chart
    assert '-.->|"else"|' in chart


def test_a_run_marks_the_check_checked_and_the_edge_it_took_taken() -> None:
    moved = engine.start(
        flow(), {"amount": "150", "bought_on": "2026-01-01"}, today=date(2026, 1, 2)
    )
    view = run_view(flow(), moved.state)
    assert view.node_states["k_route"] == "checked"
    assert ("k_route", "amount > 100.0") in view.taken
    assert ("k_route", "else") not in view.taken
    summary = step_summary("guide_start", step_result("r_1", moved))
    assert "checked k_route (amount > 100.0)" in summary
