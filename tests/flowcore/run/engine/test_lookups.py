"""Lookup nodes (ADR 0119): the engine calls nothing. At a lookup whose answer it was not
given it raises LookupNeeded with the values to send; given what the call came back with,
it judges the answer against ``returns`` and ``sets``, records the label and values, and
goes on in the same call; a failed call goes to ``__error__`` or stalls the run. What the
step records is all a replay needs: it never calls again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowcore.common.errors import InvalidInput
from flowcore.flow.model import Flow, LookupNode, frozen_mapping
from flowcore.run import engine
from flowcore.run.lookups import Looked, LookupNeeded
from flowcore.run.migration import replay_inputs
from flowcore.run.replay import StoredRun, StoredStep, replay_differences
from flowcore.run.results import result_status, start_result
from flowcore.run.state import PathEntry
from tests.flowcore.run.engine.test_transcripts import load_flow

# The lookup's place is held by an ask with its labels; with_lookup puts the lookup there.
ORDERS = """\
id: order_status
title: Order status
category: test
entry: c_order
on_unknown: escalate
nodes:
  - id: c_order
    kind: collect
    say: ask for the order number
    slots:
      order_id: {ask: the order number, required: true}
    next: l_status
  - id: l_status
    kind: ask
    say: placeholder
    accepts: {shipped: x, pending: x, broken: x}
    next: {shipped: a_received, pending: e_wait, broken: e_error}
  - id: a_received
    kind: ask
    say: did it arrive?
    accepts: {yes_arrived: it did, no: it did not}
    next: {yes_arrived: e_done, no: e_wait}
  - id: e_done
    kind: end
    say: done
    outcome: done
  - id: e_wait
    kind: end
    say: wait for it
    outcome: waiting
  - id: e_error
    kind: end
    say: we could not check
    outcome: unchecked
"""
SAY = "Look up the order's status in the order system"


def with_lookup(*, error: bool) -> Flow:
    flow = load_flow(ORDERS)
    routes = {"shipped": "a_received", "pending": "e_wait"}
    if error:
        routes["__error__"] = "e_error"
    lookup = LookupNode(
        id="l_status",
        say=SAY,
        call="orders",
        send=("order_id",),
        returns=frozen_mapping({"shipped": "it has left", "pending": "still in the warehouse"}),
        next=frozen_mapping(routes),
        sets=frozen_mapping({"shipped_on": "date", "parcels": "integer"}),
    )
    nodes = {k: (lookup if k == "l_status" else v) for k, v in flow.nodes.items()}
    return replace(flow, nodes=frozen_mapping(nodes))


def answer(label: str, **values: object) -> Looked:
    return Looked(response=json.dumps({"label": label, "values": values}), ms=12.0)


ORDER = {"order_id": "A-17"}


def test_a_lookup_without_its_answer_asks_for_the_call_with_the_values_to_send() -> None:
    flow = with_lookup(error=True)
    with pytest.raises(LookupNeeded) as needed:
        engine.start(flow, ORDER)
    assert needed.value.node.id == "l_status"
    assert needed.value.node.call == "orders"
    assert needed.value.sent == {"order_id": "A-17"}


def test_the_label_answered_chooses_the_next_node_and_its_values_are_recorded() -> None:
    flow = with_lookup(error=True)
    moved = engine.start(
        flow, ORDER, lookups={"l_status": answer("shipped", shipped_on="2026-03-01", parcels=2)}
    )
    assert moved.state.node == "a_received"
    assert moved.result["looked_up"] == [
        {"id": "l_status", "say": SAY, "took": "shipped", "next": "a_received"}
    ]
    assert dict(moved.state.values) == {
        "order_id": "A-17",
        "l_status": "shipped",
        "shipped_on": "2026-03-01",
        "parcels": 2,
    }
    assert moved.state.path[-1] == PathEntry(
        "l_status", "lookup", "lookup", "shipped", (("order_id", "A-17"),)
    )


def test_a_lookup_after_an_answer_moves_the_run_in_the_same_call() -> None:
    flow = with_lookup(error=True)
    waiting = engine.start(flow)
    assert waiting.state.node == "c_order"
    moved = engine.answer(
        flow, waiting.state, values=ORDER, lookups={"l_status": answer("pending")}
    )
    assert moved.result["status"] == "completed"
    assert moved.result["outcome"] == "waiting"


def test_a_failed_call_goes_to_the_error_route_with_its_reason() -> None:
    flow = with_lookup(error=True)
    failed = Looked(failed="HTTP 500: 'database down'", ms=30.0)
    moved = engine.start(flow, ORDER, lookups={"l_status": failed})
    assert moved.result["outcome"] == "unchecked"
    assert moved.result["looked_up"] == [
        {
            "id": "l_status",
            "say": SAY,
            "took": "__error__",
            "failed": "lookup failed: HTTP 500: 'database down'",
            "next": "e_error",
        }
    ]
    assert moved.state.values["l_status"] == "__error__"


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        ('{"label": "lost"}', "lookup failed: label 'lost' is not one of: shipped, pending"),
        (
            '{"label": "shipped", "values": {"shipped_on": "1 March"}}',
            "lookup failed: value 'shipped_on' does not fit its type date: '1 March'",
        ),
        (
            '{"label": "shipped", "values": {"carrier": "DHL"}}',
            "lookup failed: value 'carrier' is not one it may set "
            "(it may set: shipped_on, parcels)",
        ),
        ("[1, 2]", 'lookup failed: the answer is an array, not an object {"label": …}'),
        ("not json", "lookup failed: the answer is not JSON"),
    ],
)
def test_an_answer_that_does_not_fit_the_node_is_a_failed_call(response: str, reason: str) -> None:
    moved = engine.start(
        with_lookup(error=True), ORDER, lookups={"l_status": Looked(response=response)}
    )
    assert moved.result["looked_up"][0]["failed"] == reason
    assert moved.result["outcome"] == "unchecked"
    # Nothing the answer held is recorded.
    assert "shipped_on" not in moved.state.values


def test_a_failed_call_without_an_error_route_stalls_the_run_for_a_person() -> None:
    flow = with_lookup(error=False)
    moved = engine.start(flow, ORDER, lookups={"l_status": Looked(failed="timed out")})
    assert moved.result["status"] == "stalled"
    assert moved.result["reason"] == "lookup_failed"
    assert moved.result["looked_up"][0]["failed"] == "lookup failed: timed out"
    assert moved.result["next"].startswith("The lookup l_status failed")
    assert moved.result["node"]["returns"] == {
        "shipped": "it has left",
        "pending": "still in the warehouse",
    }
    assert moved.state.state == "stalled" and moved.state.node == "l_status"
    assert moved.state.path[-1] == PathEntry(
        "l_status", "lookup", "lookup", "__error__", (("order_id", "A-17"),)
    )


def test_an_agent_cannot_give_what_a_lookup_answers() -> None:
    flow = with_lookup(error=True)
    with pytest.raises(LookupNeeded):
        engine.start(flow, {**ORDER, "l_status": "shipped", "shipped_on": "2026-01-01"})
    moved = engine.start(
        flow,
        {**ORDER, "l_status": "shipped", "shipped_on": "2026-01-01"},
        lookups={"l_status": answer("pending")},
    )
    assert moved.result["outcome"] == "waiting"
    assert [i["key"] for i in moved.result["ignored"]] == ["l_status", "shipped_on"]
    assert "shipped_on" not in moved.state.values


def stalled() -> tuple[Flow, engine.Transition]:
    flow = with_lookup(error=False)
    return flow, engine.start(flow, ORDER, lookups={"l_status": Looked(failed="timed out")})


def test_a_person_answers_a_stalled_lookup_with_a_label_and_values() -> None:
    flow, stall = stalled()
    resolved = engine.resolve(
        flow, stall.state, choice="shipped", values={"shipped_on": "2026-02-27", "parcels": "1"}
    )
    assert resolved.state.node == "a_received"
    assert resolved.result["next"].startswith("A person answered l_status. ")
    assert resolved.state.values["shipped_on"] == "2026-02-27"
    assert resolved.state.values["parcels"] == 1
    # The stall gives way to the person's answer; nothing was called, nothing looked up.
    assert resolved.state.path[-1] == PathEntry(
        "l_status", "lookup", "person", "shipped", (("order_id", "A-17"),)
    )
    assert "looked_up" not in resolved.result


@pytest.mark.parametrize(
    ("choice", "values", "error"),
    [
        ("lost", {}, "not a label"),
        ("__error__", {}, "a person must answer"),
        (None, {"shipped_on": "2026-02-27"}, "a person must answer"),
        ("shipped", {"shipped_on": "yesterday"}, "value does not fit"),
    ],
)
def test_a_person_answer_that_does_not_settle_the_lookup_is_refused(
    choice: str | None, values: dict[str, str], error: str
) -> None:
    flow, stall = stalled()
    with pytest.raises(InvalidInput) as refused:
        engine.resolve(flow, stall.state, choice=choice, values=values)
    assert refused.value.error == error


def test_back_from_a_stalled_lookup_reopens_the_last_node_answered() -> None:
    flow = with_lookup(error=False)
    waiting = engine.start(flow)
    stall = engine.answer(
        flow, waiting.state, values=ORDER, lookups={"l_status": Looked(failed="x")}
    )
    reopened = engine.back(flow, stall.state)
    assert reopened.state.state == "active" and reopened.state.node == "c_order"


def recorded(flow: Flow, looked: Looked) -> tuple[StoredRun, list[StoredStep]]:
    """A run started with ORDER through the lookup, as the services record it."""
    moved = engine.start(flow, ORDER, lookups={"l_status": looked})
    digest = hashlib.sha256((looked.response or "").encode()).hexdigest()
    given = {"values": ORDER, "lookups": {"l_status": looked.recorded(digest)}}
    result = json.loads(json.dumps(start_result("r_1", flow, moved)))
    step = StoredStep(1, "guide_start", given, result, result_status(result), "", "a_received")
    run = StoredRun(
        "r_1", json.loads(json.dumps(moved.state.to_dict())), "active", "a_received", ""
    )
    return run, [step]


def test_a_replay_decides_each_lookup_on_its_recorded_answer_and_calls_nothing() -> None:
    flow = with_lookup(error=True)
    run, steps = recorded(flow, answer("shipped", parcels=1))
    assert replay_differences(flow, run, steps) == []
    # Another answer recorded in its place leads elsewhere: the replay tells them apart.
    other = answer("pending").recorded(hashlib.sha256(b"").hexdigest())
    changed = [replace(steps[0], input={**steps[0].input, "lookups": {"l_status": other}})]
    assert replay_differences(flow, run, changed) != []


def test_a_replay_finds_a_recorded_answer_changed_under_its_digest() -> None:
    flow = with_lookup(error=True)
    run, steps = recorded(flow, answer("shipped", parcels=1))
    item = dict(steps[0].input["lookups"]["l_status"])
    item["response"] = item["response"].replace("1", "1 ")  # the same answer, other bytes
    changed = [replace(steps[0], input={**steps[0].input, "lookups": {"l_status": item}})]
    assert replay_differences(flow, run, changed) == [
        "step 1 (guide_start): the recorded answer of the lookup l_status differs from its digest"
    ]


def test_a_replay_of_a_step_without_its_lookup_answer_says_so() -> None:
    flow = with_lookup(error=True)
    run, steps = recorded(flow, answer("shipped"))
    bare = [replace(steps[0], input={"values": ORDER})]
    assert replay_differences(flow, run, bare) == [
        "step 1 (guide_start): it reaches the lookup l_status but recorded no answer of it"
    ]


@given(
    label=st.sampled_from(["shipped", "pending", "lost"]),
    parcels=st.one_of(st.none(), st.integers(-5, 5), st.text(alphabet="abc", max_size=3)),
    failed=st.booleans(),
)
def test_the_branch_is_a_function_of_the_answer_alone(
    label: str, parcels: object, failed: bool
) -> None:
    flow = with_lookup(error=True)
    values = {} if parcels is None else {"parcels": parcels}
    looked = Looked(failed="down") if failed else answer(label, **values)
    first = engine.start(flow, ORDER, lookups={"l_status": looked})
    # The same answer with another duration decides the same.
    again = engine.start(flow, ORDER, lookups={"l_status": replace(looked, ms=9999.0)})
    assert first == again
    fits = not failed and label != "lost" and (parcels is None or isinstance(parcels, int))
    assert (first.state.values["l_status"] != "__error__") is fits


def test_a_move_replays_recorded_answers_and_refuses_a_lookup_never_called() -> None:
    flow = with_lookup(error=True)
    _, steps = recorded(flow, answer("shipped", parcels=1))
    moved = replay_inputs(flow, steps)
    assert moved.state is not None and moved.state.values["l_status"] == "shipped"
    # The live version asks the order system before the collect as well: the run's inputs
    # reach a lookup it never called, and a move calls nothing.
    earlier = replace(
        flow.nodes["l_status"], id="l_first", next=frozen_mapping({"shipped": "c_order"})
    )
    live = replace(flow, entry="l_first", nodes=frozen_mapping({"l_first": earlier, **flow.nodes}))
    stays = replay_inputs(live, steps)
    assert stays.state is None
    assert stays.reason == "the start's values reach the lookup l_first, which the run never called"
