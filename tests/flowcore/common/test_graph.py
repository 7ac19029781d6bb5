"""The flow graph's analyses: post-dominators (the nearest node every path to an exit
passes, on any acyclic graph), strongly connected components, and where a fold stops."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowcore.common.graph import immediate_postdominators, strongly_connected
from flowcore.flow.building import build_flow
from flowcore.flow.files import AnyCategory
from flowcore.flow.folding import Unfoldable, plan_fold
from tests.support.paths import REPO


def postdominators(succ: Mapping[str, Sequence[str]], node: str) -> set[str]:
    """By the definition: the node, and what every one of its successors' paths passes.

    Successors that are not nodes of the graph are left out; a node with none is an exit.
    """
    children = [child for child in succ[node] if child in succ]
    if not children:
        return {node}
    shared = set.intersection(*(postdominators(succ, child) for child in children))
    return shared | {node}


def nearest(succ: Mapping[str, Sequence[str]], node: str) -> str | None:
    """The strict post-dominator that every other strict post-dominator post-dominates."""
    strict = postdominators(succ, node) - {node}
    found = [d for d in strict if postdominators(succ, d) == strict]
    assert len(found) == (1 if strict else 0)
    return found[0] if found else None


@st.composite
def acyclic_graphs(draw: st.DrawFn) -> dict[str, list[str]]:
    """Nodes n0.. with edges only forward (no cycle), some to ids that are not nodes, in
    any order of the mapping; several exits and several roots are allowed."""
    size = draw(st.integers(min_value=1, max_value=12))
    names = [f"n{i}" for i in range(size)]
    succ: dict[str, list[str]] = {}
    for i in draw(st.permutations(range(size))):
        later = names[i + 1 :] + ["ghost"]
        succ[names[i]] = draw(st.lists(st.sampled_from(later), max_size=4))
    return succ


@settings(max_examples=300, deadline=None)
@given(acyclic_graphs())
def test_the_immediate_postdominator_is_the_nearest_node_every_path_to_an_exit_passes(
    succ: dict[str, list[str]],
) -> None:
    ipdom = immediate_postdominators(succ)
    assert set(ipdom) == set(succ)
    assert ipdom == {node: nearest(succ, node) for node in succ}


def test_branches_that_meet_only_at_different_exits_have_no_common_postdominator() -> None:
    ipdom = immediate_postdominators(
        {"a": ["b", "c"], "b": ["d", "e"], "c": ["e"], "d": [], "e": []}
    )
    assert ipdom == {"e": None, "d": None, "c": "e", "b": None, "a": None}


def test_a_component_is_found_through_any_child_of_a_node_not_only_the_first() -> None:
    # The cycle a -> b -> a leaves a by its second child.
    succ = {"a": ["c", "b"], "b": ["a"], "c": []}

    assert strongly_connected(succ, ["a", "b", "c"]) == [["c"], ["a", "b"]]


def test_a_components_nodes_come_in_the_given_order_not_by_name() -> None:
    assert strongly_connected({"b": ["a"], "a": ["b"]}, ["b", "a"]) == [["b", "a"]]


def test_folding_a_collect_node_is_refused_naming_it() -> None:
    text = (REPO / "flows" / "refund_request.yaml").read_text(encoding="utf-8")
    flow, findings = build_flow(text, categories=AnyCategory())
    assert flow is not None, findings

    with pytest.raises(Unfoldable) as refused:
        plan_fold(flow, "n_order")

    assert (refused.value.reason, refused.value.at) == ("collect", "n_order")
