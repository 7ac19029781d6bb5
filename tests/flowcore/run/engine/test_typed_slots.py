"""Typed slots (ADR 0116, spec §1.2, §2, §3.1): a value that fits its slot's type is
recorded as typed JSON; one that does not is refused like a pattern's misfit at the node
answered, ignored with the reason when given in advance, and refused in a person's
answer. One judge (``slot_types.fit``) decides all three.
"""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from flowcore.common.errors import InvalidInput, Refusal
from flowcore.common.limits import MAX_DIGITS
from flowcore.flow.model import UNKNOWN, Flow, Slot
from flowcore.flow.slot_types import as_text, fit
from flowcore.run import engine
from flowcore.run.state import RunState
from tests.flowcore.run.engine.strategies import flows
from tests.flowcore.run.engine.test_transcripts import load_flow

REFUND = """\
id: typed_refund
title: Typed refund
category: test
entry: a_kind
on_unknown: escalate
nodes:
  - id: a_kind
    kind: ask
    say: ask what went wrong
    accepts: {late: it came late, broken: it came broken}
    next: {late: c_order, broken: c_order}
  - id: c_order
    kind: collect
    say: collect the order's details
    slots:
      amount: {ask: the amount paid, required: true, type: number}
      items: {ask: how many items, type: integer}
      bought_on: {ask: the date of purchase, required: true, type: date}
      gift: {ask: whether it was a gift, type: boolean}
      paid_by: {ask: how it was paid, type: choice, options: [card, bank_transfer]}
      note: anything else
    next: a_more
  - id: a_more
    kind: ask
    say: ask whether there is more
    accepts: {"yes": there is more, "no": that is all}
    next: {"yes": e_done, "no": e_done}
  - id: e_done
    kind: end
    say: wrap up
    outcome: resolved
"""


@pytest.fixture(scope="module")
def flow() -> Flow:
    return load_flow(REFUND)


def at_order(flow: Flow) -> RunState:
    return engine.start(flow, {"a_kind": "late"}).state


def test_values_that_fit_are_recorded_as_typed_json(flow: Flow) -> None:
    moved = engine.answer(
        flow,
        at_order(flow),
        values={
            "amount": " 12.50 ",
            "items": "3",
            "bought_on": "2024-02-29",
            "gift": "Yes",
            "paid_by": "Bank transfer",
            "note": " as said ",
        },
    )

    assert moved.result["node"]["id"] == "a_more"
    assert dict(moved.state.values) == {
        "a_kind": "late",
        "amount": 12.5,
        "items": 3,
        "bought_on": "2024-02-29",
        "gift": True,
        "paid_by": "bank_transfer",
        "note": " as said ",  # a text slot is recorded exactly as sent, as ever
    }
    # What the stored state and guide_status's values hold: JSON numbers and booleans.
    assert json.dumps(moved.state.to_dict()["values"]) == (
        '{"a_kind": "late", "amount": 12.5, "items": 3, "bought_on": "2024-02-29", '
        '"gift": true, "paid_by": "bank_transfer", "note": " as said "}'
    )


def test_json_numbers_and_booleans_are_taken_by_typed_slots(flow: Flow) -> None:
    moved = engine.answer(
        flow,
        at_order(flow),
        values={"amount": 12.5, "items": 3, "bought_on": "2024-03-01", "gift": False},
    )

    assert moved.result["node"]["id"] == "a_more"
    assert (moved.state.values["amount"], moved.state.values["items"]) == (12.5, 3)
    assert moved.state.values["gift"] is False


def test_a_json_number_for_a_text_slot_is_still_refused(flow: Flow) -> None:
    with pytest.raises(InvalidInput) as refused:
        engine.answer(flow, at_order(flow), values={"note": 5})

    assert refused.value.error == "value is not a string"


def test_a_value_that_does_not_fit_is_unmatched_at_the_node_answered(flow: Flow) -> None:
    moved = engine.answer(
        flow, at_order(flow), values={"amount": "1,200.00", "bought_on": "2024-03-01"}
    )

    result = moved.result
    assert result["status"] == "unmatched"
    assert result["rejected"] == "1,200.00"
    assert result["rejected_slots"] == {"amount": "1,200.00"}
    assert (result["attempt"], moved.state.unmatched["c_order"]) == (1, 1)
    assert "does not fit slot amount: it must be a number (type number)" in result["next"]
    assert "e.g. 12.50" in result["next"]
    # The value that fits is kept; the one that does not is not recorded.
    assert dict(moved.state.values) == {"a_kind": "late", "bought_on": "2024-03-01"}
    assert list(result["node"]["slots"])[:1] == ["amount"]


def test_a_json_number_that_does_not_fit_is_echoed_as_its_text(flow: Flow) -> None:
    moved = engine.answer(flow, at_order(flow), values={"items": 2.5})

    assert moved.result["rejected_slots"] == {"items": "2.5"}


def test_a_value_given_in_advance_that_does_not_fit_is_ignored_with_the_reason(
    flow: Flow,
) -> None:
    started = engine.start(flow, {"a_kind": "late", "amount": "12,50", "bought_on": "2024-3-1"})

    result = started.result
    assert result["status"] == "advanced"
    assert result["node"]["id"] == "c_order"
    assert result["ignored"] == [
        {
            "key": "amount",
            "reason": "the value does not fit amount: it must be a number (type number), "
            "digits with an optional decimal point and no thousands separators, e.g. 12.50",
        },
        {
            "key": "bought_on",
            "reason": "the value does not fit bought_on: it must be a date (type date) "
            "written YYYY-MM-DD, e.g. 2024-03-31",
        },
    ]
    assert "amount" not in started.state.values
    assert "c_order" not in started.state.unmatched  # nobody was asked there yet


def test_a_passed_slot_given_again_says_the_same_when_its_typed_value_is(flow: Flow) -> None:
    passed = engine.start(
        flow, {"a_kind": "late", "amount": "12.5", "bought_on": "2024-03-01"}
    ).state
    assert passed.node == "a_more"

    same = engine.answer(flow, passed, choice="no", values={"amount": "12.50"})
    other = engine.answer(flow, passed, choice="no", values={"amount": "13"})

    assert "ignored" not in same.result
    assert other.result["ignored"] == [
        {"key": "amount", "reason": "c_order was already answered; use guide_back to change it"}
    ]


def test_unknown_is_taken_by_a_typed_slot(flow: Flow) -> None:
    moved = engine.answer(flow, at_order(flow), values={"amount": UNKNOWN})

    assert moved.result["status"] == "stalled"


def test_the_node_and_index_say_each_slots_type(flow: Flow) -> None:
    started = engine.start(flow, {"a_kind": "late"})

    slots = started.result["node"]["slots"]
    assert slots["amount"] == {"ask": "the amount paid", "required": True, "type": "number"}
    assert slots["paid_by"]["options"] == ["card", "bank_transfer"]
    assert "type" not in slots["note"]
    lines = engine.index(flow)
    assert lines["bought_on"] == (
        "the date of purchase (required; it must be a date (type date) written YYYY-MM-DD, "
        "e.g. 2024-03-31)"
    )
    assert lines["note"] == "anything else (optional)"


def stalled_at_order(flow: Flow) -> RunState:
    stalled = engine.answer(flow, at_order(flow), values={"amount": UNKNOWN}).state
    assert stalled.state == "stalled"
    return stalled


def test_a_person_answer_that_does_not_fit_is_refused_naming_the_type(flow: Flow) -> None:
    with pytest.raises(InvalidInput) as refused:
        engine.resolve(
            flow, stalled_at_order(flow), values={"amount": "twelve", "bought_on": "2024-03-01"}
        )

    assert refused.value.error == "value does not fit"
    assert refused.value.reason.startswith(
        "'twelve' does not fit amount: it must be a number (type number)"
    )
    assert refused.value.candidates == ("amount",)


def test_a_person_answer_that_fits_is_recorded_typed(flow: Flow) -> None:
    moved = engine.resolve(
        flow, stalled_at_order(flow), values={"amount": "40", "bought_on": "2024-03-01"}
    )

    assert moved.state.node == "a_more"
    assert moved.state.values["amount"] == 40.0


# --- the judge ------------------------------------------------------------------------------

NUMBER = Slot("amount", "", type="number")
INTEGER = Slot("items", "", type="integer")
DATE = Slot("bought_on", "", type="date")
BOOLEAN = Slot("gift", "", type="boolean")
CHOICE = Slot("paid_by", "", type="choice", options=("card", "bank_transfer"))


@given(
    st.decimals(allow_nan=False, allow_infinity=False, places=2).filter(
        lambda d: len(d.normalize().as_tuple().digits) <= MAX_DIGITS - 2
    )
)
def test_a_number_that_fits_records_the_decimal_that_was_sent(sent: Decimal) -> None:
    recorded = fit(NUMBER, f"{sent:f}")

    assert isinstance(recorded, float)
    assert Decimal(repr(recorded)) == sent
    assert fit(NUMBER, as_text(recorded)) == recorded  # and reads back as itself


@given(st.integers(min_value=-(10**MAX_DIGITS) + 1, max_value=10**MAX_DIGITS - 1))
def test_an_integer_that_fits_round_trips(sent: int) -> None:
    assert fit(INTEGER, str(sent)) == sent
    assert fit(INTEGER, as_text(sent)) == sent


def test_digits_past_the_limit_do_not_fit() -> None:
    assert fit(INTEGER, "9" * MAX_DIGITS) == int("9" * MAX_DIGITS)
    assert fit(INTEGER, "9" * (MAX_DIGITS + 1)) is None
    assert fit(NUMBER, "0." + "1" * (MAX_DIGITS + 1)) is None
    assert fit(NUMBER, "1." + "0" * 40) == 1.0  # zeros that change nothing are no digits


@pytest.mark.parametrize(
    "text",
    ["1,200", "1 200", "1e3", "12.", ".5", "+5", "0x10", "NaN", "inf", "١٢", "12,5", ""],
)
def test_numbers_in_other_forms_do_not_fit(text: str) -> None:
    assert fit(NUMBER, text) is None


def test_negative_zero_is_zero() -> None:
    assert repr(fit(NUMBER, "-0.0")) == "0.0"


@given(st.dates())
def test_a_date_that_fits_round_trips(sent: date) -> None:
    recorded = fit(DATE, sent.isoformat())

    assert recorded == sent.isoformat()
    assert isinstance(recorded, str)
    assert date.fromisoformat(recorded) == sent


@pytest.mark.parametrize("text", ["20240301", "2024-W09-5", "2024-3-1", "01/03/2024", "2023-02-29"])
def test_dates_in_other_forms_do_not_fit(text: str) -> None:
    assert fit(DATE, text) is None


@pytest.mark.parametrize(
    ("text", "recorded"),
    [("true", True), ("FALSE", False), (" yes ", True), ("No", False), ("y", None), ("1", None)],
)
def test_booleans_take_true_false_yes_and_no(text: str, recorded: bool | None) -> None:
    assert fit(BOOLEAN, text) is recorded


@pytest.mark.parametrize(
    ("text", "recorded"),
    [("card", "card"), ("CARD", "card"), ("bank-transfer", "bank_transfer"), ("cash", None)],
)
def test_a_choice_takes_an_option_exactly_or_in_normal_form(
    text: str, recorded: str | None
) -> None:
    assert fit(CHOICE, text) == recorded


@given(st.text())
def test_a_text_slot_takes_any_text_as_sent(sent: str) -> None:
    assert fit(Slot("note", ""), sent) == sent


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_flow_without_types_records_each_slot_value_exactly_as_sent(
    data: st.DataObject,
) -> None:
    flow = data.draw(flows())
    assume(flow.slots)
    texts = st.text(st.characters(exclude_categories=["Cc", "Cs"]), min_size=1, max_size=20)
    padded = st.builds(lambda t, pad: pad + t + pad, texts, st.sampled_from(["", " ", "\t"]))
    values = data.draw(st.dictionaries(st.sampled_from(list(flow.slots)), padded, max_size=4))
    try:
        state = engine.start(flow, values).state
    except Refusal:
        return
    for key, recorded in state.values.items():
        if key in flow.slots:
            assert recorded == UNKNOWN or (type(recorded) is str and recorded == values[key])


@given(
    st.sampled_from([NUMBER, INTEGER, DATE, BOOLEAN, CHOICE]),
    st.sampled_from(["12.50", "-3", "007", "2024-02-29", "Yes", "false", "bank-transfer", "x"]),
)
def test_a_recorded_value_sent_back_as_json_is_recorded_the_same(slot: Slot, sent: str) -> None:
    flow = typed_flow(slot)
    first = engine.start(flow, {slot.name: sent}).state.values.get(slot.name)
    assume(first is not None)

    again = engine.start(flow, {slot.name: first}).state.values.get(slot.name)

    assert again == first and type(again) is type(first)


def typed_flow(slot: Slot) -> Flow:
    options = f", options: [{', '.join(slot.options)}]" if slot.options else ""
    return load_flow(
        "id: one_slot\ntitle: One slot\ncategory: test\nentry: c_one\nnodes:\n"
        "  - id: c_one\n    kind: collect\n    say: collect it\n    slots:\n"
        f"      {slot.name}: {{ask: it, required: true, type: {slot.type}{options}}}\n"
        "    next: e_done\n"
        "  - id: e_done\n    kind: end\n    say: done\n    outcome: resolved\n"
    )
