"""An ask's ``type`` (ADR 0120): it types the answer its ``__other__`` route takes. A label
still chooses its route; a value outside the labels goes down ``__other__`` only when it
fits the type, and is recorded typed, so a later check compares it as a number or a date;
anything else is unmatched, told what fits."""

from __future__ import annotations

import pytest

from flowcore.flow.building import build_flow
from flowcore.flow.model import Category
from flowcore.run import engine
from flowcore.run.state import PathEntry
from tests.flowcore.run.engine.test_transcripts import load_flow

DAMAGED = """\
id: damaged_items
title: Damaged items
category: test
entry: a_count
on_unknown: escalate
nodes:
  - id: a_count
    kind: ask
    say: Ask how many items arrived damaged
    type: integer
    accepts:
      none: none of them
      all: every item
    next:
      none: e_fine
      all: e_all
      __other__: k_many
  - id: k_many
    kind: check
    say: More than two damaged items go to a supervisor
    when:
      - if: a_count > 2
        next: e_supervisor
    else: e_some
  - id: e_fine
    kind: end
    say: nothing to do
    outcome: fine
  - id: e_all
    kind: end
    say: replace the order
    outcome: replaced
  - id: e_some
    kind: end
    say: replace the damaged items
    outcome: partly_replaced
  - id: e_supervisor
    kind: end
    say: a supervisor decides
    outcome: escalated
"""


@pytest.fixture(scope="module")
def flow():  # type: ignore[no-untyped-def]
    return load_flow(DAMAGED)


def answered(flow, choice: str):  # type: ignore[no-untyped-def]
    return engine.answer(flow, engine.start(flow).state, choice=choice)


def test_a_label_of_a_typed_ask_still_chooses_its_route(flow) -> None:  # type: ignore[no-untyped-def]
    assert answered(flow, "none").result["outcome"] == "fine"
    assert answered(flow, "All").result["outcome"] == "replaced"


def test_a_value_of_the_type_goes_down_other_recorded_typed(flow) -> None:  # type: ignore[no-untyped-def]
    moved = answered(flow, " 3 ")
    assert moved.result["outcome"] == "escalated"  # the check compared it as a number
    assert moved.result["other"] is True
    assert moved.state.values["a_count"] == 3
    assert moved.state.path[0] == PathEntry("a_count", "ask", "asked", "3")
    assert answered(flow, "2").result["outcome"] == "partly_replaced"


def test_a_json_number_given_in_advance_is_taken_as_its_text(flow) -> None:  # type: ignore[no-untyped-def]
    started = engine.start(flow, {"a_count": 2})
    assert started.result["outcome"] == "partly_replaced"
    assert started.state.values["a_count"] == 2
    assert started.result["skipped"] == ["a_count"]


def test_a_value_outside_the_labels_that_does_not_fit_is_unmatched_and_told_what_fits(
    flow,  # type: ignore[no-untyped-def]
) -> None:
    moved = answered(flow, "several")
    assert moved.result["status"] == "unmatched"
    assert moved.result["next"].startswith(
        "'several' is not a label of a_count and does not fit its type: as a whole number"
    )
    assert "send it as a whole number (type integer), e.g. 42" in moved.result["next"]
    assert "a_count" not in moved.state.values


def test_a_dont_know_at_a_typed_ask_offers_unknown(flow) -> None:  # type: ignore[no-untyped-def]
    moved = answered(flow, "dont know")
    assert moved.result["status"] == "unmatched"
    assert moved.result["candidates"] == ["__unknown__"]


def test_the_agent_is_told_the_type_where_the_run_waits_and_in_the_index(
    flow,  # type: ignore[no-untyped-def]
) -> None:
    waiting = engine.start(flow)
    assert waiting.result["node"]["type"] == "integer"
    assert waiting.result["next"].endswith(
        "If the answer is none of node.accepts, send it as a whole number (type integer), e.g. 42."
    )
    assert engine.index(flow)["a_count"].endswith(
        "| else as a whole number (type integer), e.g. 42"
    )


def test_a_typed_answer_given_again_as_a_json_number_is_the_same_answer() -> None:
    photo = """  - id: a_photo
    kind: ask
    say: Ask for a photo
    accepts: {sent: they sent one}
    next: {sent: e_some}
"""
    flow = load_flow(DAMAGED.replace("    else: e_some\n", "    else: a_photo\n" + photo))
    waiting = answered(flow, "2")
    assert waiting.state.node == "a_photo"
    same = engine.answer(flow, waiting.state, choice="sent", values={"a_count": 2})
    assert "ignored" not in same.result
    other = engine.answer(flow, waiting.state, choice="sent", values={"a_count": 5})
    assert [i["key"] for i in other.result["ignored"]] == ["a_count"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("      __other__: k_many\n", ""),
            "'type: integer' types an answer outside the labels, which only a __other__ route "
            "takes: add one to next, or remove the type",
        ),
        (
            ("    type: integer\n", "    type: choice\n"),
            "'type' of an ask node must be one of text, number, integer, date, boolean, not "
            "the text 'choice': its labels are its choices",
        ),
    ],
)
def test_lint_refuses_a_type_an_ask_cannot_use(change: tuple[str, str], message: str) -> None:
    # Without __other__ its check is unreachable too: only the type's finding is read.
    text = DAMAGED.replace(*change)
    _, findings = build_flow(text, categories={"test": Category("test", "test")})
    assert [f["message"] for f in findings if f["code"] == "bad_type"] == [message]
