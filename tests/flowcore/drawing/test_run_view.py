"""run_view: each node's state on a run, the edges it took and its folds, computed from
states the engine itself produced; step_summary: one line per step; usage aggregates."""

from __future__ import annotations

import doctest

import pytest

from flowcore.common.errors import StepNotAllowed
from flowcore.drawing import run_view as run_view_module
from flowcore.drawing.diagram import STATE_LABELS
from flowcore.drawing.run_view import edge_keys, run_view, step_summary
from flowcore.drawing.usage import SLOT_VALUE, flow_usage
from flowcore.flow.building import build_flow
from flowcore.flow.model import Category, Flow
from flowcore.run import engine
from flowcore.run.state import RunState

CATEGORIES = {"test": Category("test", "Test")}

# A small flow with every kind: a collect, asks with __other__ and __unknown__,
# a tell, two ends, and a foldable ask whose branches meet again at `a_retry`.
FLOW = """
id: support
title: Support
category: test
entry: c_order
on_unknown: broaden
branch_depth: 3
nodes:
  - id: c_order
    kind: collect
    say: get the order
    slots:
      order: {ask: order number, required: true, pattern: "A[0-9]{3}"}
    next: a_reason
  - id: a_reason
    kind: ask
    say: why
    accepts: {broken: it is broken, late: it is late}
    next: {broken: a_code, late: t_wait, __other__: a_agent}
  - id: a_code
    kind: ask
    say: which error code
    accepts: {E01: card, E02: balance}
    next: {E01: t_card, E02: t_balance}
  - id: t_card
    kind: tell
    say: call the card company
    next: a_retry
  - id: t_balance
    kind: tell
    say: check the balance
    next: a_retry
  - id: a_retry
    kind: ask
    say: did a retry work
    on_unknown: escalate
    accepts: {ok: worked, ng: failed}
    next: {ok: e_done, ng: e_human}
  - id: t_wait
    kind: tell
    say: wait two days
    next: e_done
  - id: a_agent
    kind: ask
    say: agent decides
    on_unknown: escalate
    accepts: {done: done}
    next: {done: e_done}
  - id: e_done
    kind: end
    say: done
    outcome: resolved
  - id: e_human
    kind: end
    say: a person takes over
    outcome: escalated
"""


@pytest.fixture(scope="module")
def flow() -> Flow:
    built, findings = build_flow(FLOW, categories=CATEGORIES)
    assert built is not None, findings
    return built


def walk(flow: Flow, *calls: dict[str, object]) -> RunState:
    """Run ``calls`` through the real engine: the first starts, the rest answer."""
    first, *rest = calls
    state = engine.start(flow, first).state
    for call in rest:
        if "back" in call:
            state = engine.back(flow, state, call["back"] or None).state  # type: ignore[arg-type]
        else:
            state = engine.answer(flow, state, **call).state  # type: ignore[arg-type]
    return state


def states_of(flow: Flow, state: RunState) -> dict[str, str]:
    """The nodes that are not unvisited."""
    return {k: v for k, v in run_view(flow, state).node_states.items() if v != "unvisited"}


def test_a_new_run_waits_at_its_entry_and_every_other_node_is_unvisited(flow: Flow) -> None:
    view = run_view(flow, walk(flow, {}))
    assert view.node_states["c_order"] == "current"
    assert set(view.node_states) == set(flow.nodes)
    assert [s for s in view.node_states.values() if s != "unvisited"] == ["current"]
    assert view.taken == frozenset()


def test_answered_prefilled_and_told_nodes_are_told_apart(flow: Flow) -> None:
    state = walk(flow, {"order": "A123", "a_reason": "late"})
    assert states_of(flow, state) == {
        "c_order": "prefilled",
        "a_reason": "prefilled",
        "t_wait": "told",
        "e_done": "completed",
    }
    assert run_view(flow, state).taken == {
        ("c_order", ""),
        ("a_reason", "late"),
        ("t_wait", ""),
    }
    asked = walk(flow, {}, {"values": {"order": "A123"}}, {"choice": "broken"})
    assert states_of(flow, asked) == {
        "c_order": "answered",
        "a_reason": "answered",
        "a_code": "current",
    }


def test_an_answer_outside_the_labels_takes_the_other_edge(flow: Flow) -> None:
    state = walk(flow, {"order": "A123"}, {"choice": "price_dropped"})
    view = run_view(flow, state)
    assert view.node_states["a_agent"] == "current"
    assert ("a_reason", "__other__") in view.taken


def test_a_fold_marks_the_folded_node_and_its_branches_and_continues_at_common(
    flow: Flow,
) -> None:
    state = walk(flow, {"order": "A123", "a_reason": "broken"}, {"choice": "__unknown__"})
    view = run_view(flow, state)
    assert states_of(flow, state) == {
        "c_order": "prefilled",
        "a_reason": "prefilled",
        "a_code": "folded",
        "t_card": "fold_branch",
        "t_balance": "fold_branch",
        "a_retry": "current",
    }
    assert [(f.node, f.common) for f in view.folds] == [("a_code", "a_retry")]
    assert [(b.label, b.nodes) for b in view.folds[0].branches] == [
        ("E01", ("t_card",)),
        ("E02", ("t_balance",)),
    ]
    # The fold jumped to common: no edge out of the folded node was taken.
    assert not any(source == "a_code" for source, _ in view.taken)


def test_a_stalled_run_marks_where_it_stalled(flow: Flow) -> None:
    state = walk(flow, {"order": "A123", "a_reason": "broken", "a_code": "E01"})
    state = engine.answer(flow, state, choice="__unknown__").state
    assert state.state == "stalled"
    view = run_view(flow, state)
    assert view.node_states["a_retry"] == "stalled"
    assert view.node_states["t_card"] == "told"
    assert ("t_card", "") in view.taken


def test_back_unmarks_the_nodes_it_undid(flow: Flow) -> None:
    state = walk(
        flow,
        {"order": "A123"},
        {"choice": "broken"},
        {"choice": "E02"},
        {"back": "a_reason"},
    )
    assert states_of(flow, state) == {"c_order": "prefilled", "a_reason": "current"}
    assert run_view(flow, state).taken == {("c_order", "")}


def test_a_closed_run_keeps_the_state_of_the_node_it_stopped_at(flow: Flow) -> None:
    waiting = engine.close(walk(flow, {"order": "A123"}))
    assert run_view(flow, waiting).node_states["a_reason"] == "current"
    # guide_close refuses a completed run now (spec §5.6); runs closed after completing
    # before that still show their end as reached.
    ended = walk(flow, {"order": "A123", "a_reason": "late"})._replace(state="closed")
    assert run_view(flow, ended).node_states["e_done"] == "completed"
    with pytest.raises(StepNotAllowed, match="run already ended"):
        engine.close(walk(flow, {"order": "A123", "a_reason": "late"}))
    handed = walk(flow, {"order": "A123", "a_reason": "broken", "a_code": "E01"})
    handed = engine.close(engine.answer(flow, handed, choice="__unknown__").state)
    assert run_view(flow, handed).node_states["a_retry"] == "stalled"


def test_every_state_run_view_gives_is_one_the_diagram_draws(flow: Flow) -> None:
    runs = [
        walk(flow, {}),
        walk(flow, {"order": "A123", "a_reason": "late"}),
        walk(flow, {"order": "A123", "a_reason": "broken"}, {"choice": "__unknown__"}),
    ]
    seen = {s for state in runs for s in run_view(flow, state).node_states.values()}
    assert seen <= set(STATE_LABELS)


def test_node_ids_the_flow_lacks_are_ignored(flow: Flow) -> None:
    state = walk(flow, {"order": "A123"})
    older = state._replace(path=(*state.path, state.path[0]._replace(id="gone")), node="gone2")
    view = run_view(flow, older)
    assert "gone" not in view.node_states and "gone2" not in view.node_states
    assert view.node_states["c_order"] == "prefilled"


# --- step summaries ---------------------------------------------------------------------------


def test_step_summary_says_what_each_status_did(flow: Flow) -> None:
    started = engine.start(flow, {"order": "A123", "a_reason": "late"}).result
    assert step_summary("guide_start", started) == (
        "completed at e_done (outcome: resolved); told t_wait; skipped c_order, a_reason"
    )
    state = walk(flow, {"order": "A123"})
    ignored = engine.answer(flow, state, values={"bogus": "x", "order": "B1"}).result
    assert step_summary("guide_answer", ignored) == "waits at a_reason; ignored bogus, order"
    folded = engine.answer(
        flow, walk(flow, {"order": "A123", "a_reason": "broken"}), choice="__unknown__"
    ).result
    assert step_summary("guide_answer", folded) == (
        "folded into branches E01 / E02; then waits at a_retry"
    )
    at_retry = walk(flow, {"order": "A123", "a_reason": "broken", "a_code": "E01"})
    stalled = engine.answer(flow, at_retry, choice="__unknown__").result
    assert step_summary("guide_answer", stalled) == "stalled at a_retry (escalate)"
    unmatched = engine.answer(flow, at_retry, choice="maybe").result
    assert step_summary("guide_answer", unmatched) == (
        'rejected "maybe" at a_retry (attempt 1 of 3)'
    )
    assert step_summary("guide_close", {"state": "closed", "reason": "left"}) == "closed: left"


def test_the_module_doctests_pass() -> None:
    assert doctest.testmod(run_view_module).failed == 0


# --- usage ------------------------------------------------------------------------------------


def test_flow_usage_counts_runs_per_node_and_edge_and_ranks_leaks(flow: Flow) -> None:
    late = walk(flow, {"order": "A123", "a_reason": "late"})
    waiting = walk(flow, {"order": "A123"})
    other = walk(flow, {"order": "A123"}, {"choice": "price_dropped"})
    stalled = engine.answer(
        flow,
        walk(flow, {"order": "A123", "a_reason": "broken", "a_code": "E01"}),
        choice="__unknown__",
    ).state
    usage = flow_usage(
        flow,
        [late, waiting, other, stalled],
        rejected=[("a_reason", "refund_now", 4), ("c_order", None, 2), ("gone", "x", 9)],
    )
    assert usage.runs == 4
    assert usage.nodes["c_order"].reached == 4
    assert usage.nodes["a_reason"].reached == 4
    assert usage.nodes["a_reason"].waiting == 1
    assert usage.nodes["a_retry"].stalled == 1
    assert usage.nodes["e_done"].completed == 1
    assert usage.nodes["e_human"].reached == 0
    assert usage.edges[("c_order", "")] == 4
    assert usage.edges[("a_reason", "__other__")] == 1
    assert usage.stalls() == [("a_retry", 1)]
    assert [(leak.node, leak.label, leak.kind, leak.count) for leak in usage.leaks] == [
        ("a_reason", "refund_now", "rejected", 4),
        ("c_order", SLOT_VALUE, "rejected", 2),
        ("a_reason", "price_dropped", "other", 1),
        ("a_retry", "__unknown__", "unknown", 1),
    ]
    assert usage.node_notes()["a_reason"] == "4 runs, 5 off, 1 waiting"
    assert usage.node_notes()["a_retry"] == "1 run, 1 stalled, 1 off"
    assert "e_human" not in usage.node_notes()
    notes = usage.edge_notes(flow)
    assert notes[("c_order", "")] == "4"
    assert list(notes) == edge_keys(flow)  # every edge, an untaken one too: "0"
    assert notes[("a_reason", "__other__")] == "1"
    assert notes[("a_code", "E02")] == "0"


def test_flow_usage_of_no_runs_is_empty(flow: Flow) -> None:
    usage = flow_usage(flow, [])
    assert usage.runs == 0 and usage.leaks == () and usage.node_notes() == {}
