"""flow_changes / describe_changes / line_diff: what a reviewer is told changes for agents."""

from __future__ import annotations

import pytest

from flowcore.flow.building import build_flow
from flowcore.flow.flow_diff import (
    CallChange,
    DiffLine,
    KindChange,
    Label,
    LookupRoute,
    NodeRef,
    Retarget,
    Route,
    SetChange,
    SlotRef,
    describe_changes,
    flow_changes,
    line_diff,
    node_marks,
)
from flowcore.flow.model import Category, Flow
from tests.support.paths import BUNDLED_FLOWS

REFUND_TEXT = (BUNDLED_FLOWS / "refund_request.yaml").read_text(encoding="utf-8")
CATEGORIES = {"payments": Category("payments", "決済")}


def flow(text: str) -> Flow:
    built, findings = build_flow(text, categories=CATEGORIES)
    assert built is not None, findings
    return built


def edited(replacements: dict[str, str]) -> Flow:
    text = REFUND_TEXT
    for before, after in replacements.items():
        assert before in text, before
        text = text.replace(before, after)
    return flow(text)


OLD = flow(REFUND_TEXT)


def test_identical_flows_have_no_changes() -> None:
    changes = flow_changes(OLD, flow(REFUND_TEXT))
    assert changes.empty
    assert describe_changes(changes) == []


def test_comments_and_formatting_alone_change_nothing_for_agents() -> None:
    reformatted = REFUND_TEXT.replace("    # money leaves", "  # money leaves") + "# trailing\n"
    assert flow_changes(OLD, flow(reformatted)).empty


def test_a_new_label_with_a_new_end_reports_the_label_the_node_and_the_outcome() -> None:
    new = edited(
        {
            "      not_arrived: The parcel has not reached them\n": (
                "      not_arrived: The parcel has not reached them\n"
                "      price_dropped: The price went down after they ordered\n"
            ),
            "      not_arrived: n_tracking\n": (
                "      not_arrived: n_tracking\n      price_dropped: n_price_match\n"
            ),
            "  - id: n_agent_review\n": (
                "  - id: n_price_match\n    kind: end\n    outcome: price_matched\n"
                "    say: Refund the difference\n\n  - id: n_agent_review\n"
            ),
        }
    )
    changes = flow_changes(OLD, new)
    assert changes.labels_added == (Label("n_reason", "price_dropped"),)
    assert changes.nodes_added == (NodeRef("n_price_match", "end"),)
    assert changes.outcomes_added == ("price_matched",)
    # The new label's route is part of the label, not reported twice.
    assert changes.routes_added == ()
    assert changes.retargeted == ()
    assert describe_changes(changes) == [
        "outcome 'price_matched' is new: runs can now end with it",
        "node n_price_match (end) is new",
        "n_reason accepts a new label 'price_dropped'",
    ]


def test_node_marks_name_new_nodes_and_nodes_agents_meet_differently() -> None:
    new = edited(
        {
            "      delivered: n_agent_review\n": "      delivered: n_wait\n",
            "    say: Ask why they want a refund for this order": "    say: Ask what went wrong",
        }
    )
    assert node_marks(flow_changes(OLD, new)) == {"n_tracking": "changed", "n_reason": "changed"}
    assert node_marks(flow_changes(OLD, flow(REFUND_TEXT))) == {}


def test_removing_a_branch_reports_the_label_nodes_and_outcome_gone() -> None:
    new = edited(
        {
            "      credit: Store credit on their account (available at once, and 10% more than "
            "the order value)\n": "",
            "      credit: n_credited\n": "",
            "  - id: n_credited\n    kind: end\n    outcome: credited\n    say: Confirm the store "
            "credit is now on their account and where they can see it, and close\n\n": "",
        }
    )
    changes = flow_changes(OLD, new)
    assert changes.labels_removed == (Label("n_refund_method", "credit"),)
    assert changes.nodes_removed == (NodeRef("n_credited", "end"),)
    assert changes.outcomes_gone == ("credited",)
    assert "outcome 'credited' is gone: no run can end with it any more" in describe_changes(
        changes
    )


def test_retargeted_labels_and_next_are_reported_with_old_and_new_targets() -> None:
    new = edited(
        {
            "      delivered: n_agent_review\n": "      delivered: n_wait\n",
            "    next: n_wait\n\n  - id: n_refund_method": (
                "    next: n_agent_review\n\n  - id: n_refund_method"
            ),
        }
    )
    changes = flow_changes(OLD, new)
    assert changes.retargeted == (
        Retarget("n_tracking", "delivered", "n_agent_review", "n_wait"),
        Retarget("n_tracking_help", "next", "n_wait", "n_agent_review"),
    )
    assert describe_changes(changes) == [
        "n_tracking: 'delivered' now goes to n_wait (was n_agent_review)",
        "n_tracking_help: next now goes to n_agent_review (was n_wait)",
    ]


def test_other_and_unknown_routes_added_or_removed_are_routes_not_labels() -> None:
    new = edited(
        {
            "      __other__: n_agent_review     # e.g. price dropped, charged twice: not this "
            "procedure\n": "      __unknown__: n_agent_review\n",
        }
    )
    changes = flow_changes(OLD, new)
    assert changes.routes_removed == (Route("n_reason", "__other__", "n_agent_review"),)
    assert changes.routes_added == (Route("n_reason", "__unknown__", "n_agent_review"),)
    assert changes.labels_added == changes.labels_removed == ()


def test_slots_say_kind_and_flow_fields_are_compared() -> None:
    new = edited(
        {
            'version: "2024.3"': 'version: "2024.4"',
            "      order_email: Ask which email": "      order_phone: Ask which phone",
            "    say: Ask why they want a refund for this order": "    say: Ask what went wrong",
            "  - id: n_tracking_help\n    kind: tell\n": "  - id: n_tracking_help\n"
            "    kind: end\n    outcome: resolved\n",
            "    next: n_wait\n\n  - id: n_refund_method": "\n  - id: n_refund_method",
        }
    )
    changes = flow_changes(OLD, new)
    assert changes.slots_added == (SlotRef("n_order", "order_phone"),)
    assert changes.slots_removed == (SlotRef("n_order", "order_email"),)
    assert "n_reason" in changes.said_differently
    assert changes.kinds_changed == (KindChange("n_tracking_help", "tell", "end"),)
    assert [(c.key, c.old, c.new) for c in changes.fields] == [("version", "2024.3", "2024.4")]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("a\nb\nc\n", "a\nb\nc\n", []),
        (
            "a\nb\nc\n",
            "a\nB\nc\n",
            [
                [
                    DiffLine(" ", 1, 1, "a"),
                    DiffLine("-", 2, None, "b"),
                    DiffLine("+", None, 2, "B"),
                    DiffLine(" ", 3, 3, "c"),
                ]
            ],
        ),
        ("a\n", "a\n  b: 1\n", [[DiffLine(" ", 1, 1, "a"), DiffLine("+", None, 2, "  b: 1")]]),
    ],
    ids=["same", "changed-line", "added-indented-line"],
)
def test_line_diff_numbers_each_line_on_its_side(
    old: str, new: str, expected: list[list[DiffLine]]
) -> None:
    assert line_diff(old, new) == expected


def test_line_diff_splits_distant_changes_into_hunks_with_context() -> None:
    old = "".join(f"line {i}\n" for i in range(1, 21))
    new = old.replace("line 2\n", "line two\n").replace("line 19\n", "line nineteen\n")
    hunks = line_diff(old, new, context=2)
    assert len(hunks) == 2
    assert [d.old_number for d in hunks[0] if d.tag != "+"] == [1, 2, 3, 4]
    assert [d.text for d in hunks[1] if d.tag == "+"] == ["line nineteen"]


def test_a_changed_threshold_is_said_in_words_with_what_it_was() -> None:
    new = edited({"refund_amount > 100.0": "refund_amount > 200.0"})
    changes = flow_changes(OLD, new)
    assert describe_changes(changes) == [
        "n_amount_check: when refund_amount > 200.0 the run now goes to n_supervisor; "
        "before: when refund_amount > 100.0, to n_supervisor"
    ]
    assert node_marks(changes) == {"n_amount_check": "changed"}


def test_a_new_condition_and_a_new_else_are_each_said() -> None:
    new = edited(
        {
            "        next: n_supervisor\n    else: n_refund_timeline": (
                "        next: n_supervisor\n"
                "      - if: refund_amount > 50.0\n"
                "        next: n_refund_timeline\n"
                "    else: n_refunded"
            )
        }
    )
    assert describe_changes(flow_changes(OLD, new)) == [
        "n_amount_check: else now goes to n_refunded (was n_refund_timeline)",
        "n_amount_check: new condition #2: when refund_amount > 50.0 the run goes to "
        "n_refund_timeline",
    ]


# The delivery date of an order, asked of the order system rather than the customer.
DELIVERY_TEXT = """\
id: delivery_window
title: Is the order inside the return window
category: payments
entry: n_order
nodes:
  - id: n_order
    kind: collect
    say: Find the order
    slots:
      order_number: {ask: the order number, required: true}
      email: {ask: the email the order was placed with, required: true}
    next: n_delivery
  - id: n_delivery
    kind: lookup
    say: Look up when the order was delivered
    call: orders
    send: [order_number]
    returns:
      delivered: the order was delivered (delivered_on says when)
      in_transit: the order is on its way
      not_found: no order has this number
    sets: {delivered_on: date}
    next: {delivered: n_window, in_transit: n_wait, not_found: n_ask_date}
  - id: n_window
    kind: end
    outcome: checked
    say: Tell them whether the order is inside the 30-day window
  - id: n_wait
    kind: end
    outcome: waiting
    say: Tell them the order is on its way
  - id: n_review
    kind: end
    outcome: escalated
    say: A colleague reviews the case
  - id: n_ask_date
    kind: ask
    say: Ask them when it arrived
    accepts: {recent: 30 days ago or less, earlier: more than 30 days ago}
    next: {recent: n_window, earlier: n_review}
"""
DELIVERY = flow(DELIVERY_TEXT)


def delivery_edited(replacements: dict[str, str]) -> Flow:
    text = DELIVERY_TEXT
    for before, after in replacements.items():
        assert before in text, before
        text = text.replace(before, after)
    return flow(text)


WITH_ERROR = delivery_edited(
    {"not_found: n_ask_date}": "not_found: n_ask_date, __error__: n_review}"}
)


def test_a_lookup_asking_another_endpoint_names_both() -> None:
    changes = flow_changes(DELIVERY, delivery_edited({"call: orders": "call: orders_v2"}))
    assert changes.calls_changed == (CallChange("n_delivery", "orders", "orders_v2"),)
    assert describe_changes(changes) == [
        "n_delivery now asks the endpoint orders_v2; before: orders"
    ]
    assert node_marks(changes) == {"n_delivery": "changed"}


def test_a_lookup_sending_more_values_says_what_it_sends_now_and_before() -> None:
    new = delivery_edited({"send: [order_number]": "send: [order_number, email]"})
    assert describe_changes(flow_changes(DELIVERY, new)) == [
        "n_delivery now sends order_number and email; before: order_number"
    ]


def test_a_lookup_sending_the_same_values_in_another_order_changes_nothing() -> None:
    sent = delivery_edited({"send: [order_number]": "send: [order_number, email]"})
    reordered = delivery_edited({"send: [order_number]": "send: [email, order_number]"})
    assert flow_changes(sent, reordered).empty


def test_a_lookup_sending_nothing_says_so() -> None:
    new = delivery_edited({"send: [order_number]": "send: []"})
    assert describe_changes(flow_changes(DELIVERY, new)) == [
        "n_delivery now sends nothing; before: order_number"
    ]


def test_answers_a_lookup_takes_are_said_as_the_endpoints_not_as_labels_an_agent_gives() -> None:
    new = delivery_edited(
        {
            "      in_transit: the order is on its way\n": (
                "      returned: the order came back to the warehouse\n"
            ),
            "in_transit: n_wait": "returned: n_wait",
        }
    )
    changes = flow_changes(DELIVERY, new)
    assert changes.returns_added == (Label("n_delivery", "returned"),)
    assert changes.returns_removed == (Label("n_delivery", "in_transit"),)
    assert changes.labels_added == changes.labels_removed == ()
    # A label's route comes and goes with it, as an ask's does.
    assert changes.lookup_routes == changes.routes_added == changes.routes_removed == ()
    assert describe_changes(changes) == [
        "n_delivery takes a new answer 'returned' from its endpoint",
        "n_delivery no longer takes the answer 'in_transit': given, it counts as a failed call",
    ]
    assert node_marks(changes) == {"n_delivery": "changed"}


def test_a_new_way_out_of_a_failed_call_says_the_run_stalled_before() -> None:
    changes = flow_changes(DELIVERY, WITH_ERROR)
    assert changes.lookup_routes == (LookupRoute("n_delivery", "__error__", None, "n_review"),)
    assert changes.routes_added == ()
    assert describe_changes(changes) == [
        "n_delivery: when the call fails the run now goes to n_review; "
        "before: it stalled for a person"
    ]
    assert describe_changes(flow_changes(WITH_ERROR, DELIVERY)) == [
        "n_delivery: when the call fails the run now stalls for a person; "
        "before: it went to n_review"
    ]


def test_a_failed_call_or_an_answer_leading_elsewhere_names_the_old_node() -> None:
    swapped = delivery_edited(
        {"not_found: n_ask_date}": "not_found: n_review, __error__: n_ask_date}"}
    )
    assert describe_changes(flow_changes(WITH_ERROR, swapped)) == [
        "n_delivery: when the endpoint answers 'not_found' the run now goes to n_review; "
        "before: to n_ask_date",
        "n_delivery: when the call fails the run now goes to n_ask_date; before: to n_review",
    ]


def test_keys_a_lookup_fills_are_said_when_added_removed_or_retyped() -> None:
    added = delivery_edited(
        {"sets: {delivered_on: date}": "sets: {delivered_on: date, carrier: text}"}
    )
    assert describe_changes(flow_changes(DELIVERY, added)) == [
        "n_delivery may fill a new value 'carrier' (text) from the answer"
    ]
    removed = delivery_edited({"    sets: {delivered_on: date}\n": ""})
    assert describe_changes(flow_changes(DELIVERY, removed)) == [
        "n_delivery no longer fills 'delivered_on' from the answer"
    ]
    retyped = delivery_edited({"sets: {delivered_on: date}": "sets: {delivered_on: integer}"})
    changes = flow_changes(DELIVERY, retyped)
    assert changes.sets_changed == (SetChange("n_delivery", "delivered_on", "date", "integer"),)
    assert describe_changes(changes) == [
        "n_delivery now fills 'delivered_on' as an integer from the answer; before: as a date"
    ]


def test_a_new_lookup_and_a_removed_one_name_the_endpoint_runs_reach() -> None:
    carrier = delivery_edited(
        {
            "in_transit: n_wait": "in_transit: n_carrier",
            "  - id: n_window\n": (
                "  - id: n_carrier\n    kind: lookup\n    say: Ask the carrier if it is late\n"
                "    call: carriers\n    send: [order_number]\n"
                "    returns: {late: it is late, on_time: it is on time}\n"
                "    next: {late: n_review, on_time: n_wait}\n"
                "  - id: n_window\n"
            ),
        }
    )
    assert describe_changes(flow_changes(DELIVERY, carrier)) == [
        "node n_carrier (lookup) is new: it asks the endpoint carriers",
        "n_delivery: when the endpoint answers 'in_transit' the run now goes to n_carrier; "
        "before: to n_wait",
    ]
    assert describe_changes(flow_changes(carrier, DELIVERY))[0] == (
        "node n_carrier (lookup) is removed: runs no longer ask the endpoint carriers"
    )


def test_an_ask_that_now_takes_a_typed_answer_outside_its_labels_says_so() -> None:
    typed = edited(
        {
            "    say: Ask why they want a refund for this order\n": (
                "    say: Ask why they want a refund for this order\n    type: integer\n"
            ),
        }
    )
    changes = flow_changes(OLD, typed)
    assert describe_changes(changes) == [
        "n_reason now takes an answer outside its labels as a value of type integer; "
        "before: as a short code"
    ]
    assert node_marks(changes) == {"n_reason": "changed"}
