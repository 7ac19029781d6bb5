"""A lookup's answer judged against its node (issue 45): the label one of ``returns``, each
value one the node ``sets`` and fitting its type, and otherwise one reason in words, the
``lookup failed: …`` a run will say. The types' own judge is tested with the server's
(tests/events_app/test_lookups.py); here a judge that takes strings alone stands in."""

from __future__ import annotations

import pytest

from flowcore.common.limits import MAX_SLOT_VALUE_LENGTH
from flowcore.common.lookups import Fitted, Misfit, answer_fits, endpoint_name_problem

RETURNS = {"found": "the customer is known", "missing": "no such customer"}
SETS = {"tier": "text", "since": "date"}


def strings_only(kind: str, raw: object) -> str | None:
    return raw if isinstance(raw, str) else None


def judged(answer: object, sets: dict[str, str] = SETS) -> Fitted | Misfit:
    return answer_fits(answer, returns=RETURNS, sets=sets, fit=strings_only)


def test_an_answer_that_fits_gives_its_label_and_values() -> None:
    assert judged({"label": "found", "values": {"tier": "gold"}}) == Fitted(
        "found", {"tier": "gold"}
    )
    assert judged({"label": "missing"}) == Fitted("missing", {}), "values are optional"


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"label": "lost"}, "label 'lost' is not one of: found, missing"),
        ({"label": "Found"}, "label 'Found' is not one of: found, missing"),
        ({"values": {}}, "the answer has no label"),
        ({"label": 3}, "the label is a number, not text"),
        (["found"], 'the answer is an array, not an object {"label": …}'),
        ("found", 'the answer is a string, not an object {"label": …}'),
        ({"label": "found", "note": "x"}, "the answer holds 'note' beside label and values"),
        ({"label": "found", "values": ["gold"]}, "values is an array, not an object"),
        (
            {"label": "found", "values": {"tier": "gold", "credit": "9000"}},
            "value 'credit' is not one it may set (it may set: tier, since)",
        ),
        (
            {"label": "found", "values": {"tier": 3}},
            "value 'tier' does not fit its type text: 3",
        ),
        (
            {"label": "found", "values": {"tier": "x" * (MAX_SLOT_VALUE_LENGTH + 1)}},
            f"value 'tier' does not fit its type text: {MAX_SLOT_VALUE_LENGTH + 1} characters, "
            f"over {MAX_SLOT_VALUE_LENGTH}",
        ),
        (
            {"label": "found", "values": {"tier": "gold\x00"}},
            "value 'tier' does not fit its type text: it holds the control character U+0000",
        ),
        (
            {"label": "found", "values": {"tier": "  "}},
            "value 'tier' does not fit its type text: it is empty",
        ),
        (
            {"label": "found", "values": {"tier": "__unknown__"}},
            "value 'tier' does not fit its type text: '__unknown__' starts with __, which only "
            "the engine's own values do",
        ),
    ],
)
def test_an_answer_that_does_not_fit_says_why(answer: object, reason: str) -> None:
    assert judged(answer) == Misfit(reason)


def test_a_node_that_sets_nothing_takes_no_value() -> None:
    assert judged({"label": "found", "values": {"tier": "gold"}}, sets={}) == Misfit(
        "value 'tier' is not one it may set (it may set: none)"
    )


def test_what_an_endpoint_sent_is_quoted_cut_and_escaped() -> None:
    misfit = judged({"label": "a\x1b[2J" + "x" * 500})
    assert isinstance(misfit, Misfit)
    assert "\x1b" not in misfit.reason and len(misfit.reason) < 120


def test_a_type_that_is_not_a_lookups_is_the_flows_error_not_the_endpoints() -> None:
    with pytest.raises(ValueError, match="choice"):
        judged({"label": "found"}, sets={"via": "choice"})


@pytest.mark.parametrize("name", ["crm", "crm_orders_2", "x" * 64])
def test_an_endpoint_is_named_as_a_flow_is(name: str) -> None:
    assert endpoint_name_problem(name) is None


@pytest.mark.parametrize("name", ["", "CRM", "crm-orders", "crm orders", "x" * 65, "crm\n"])
def test_other_names_are_refused_saying_the_rule(name: str) -> None:
    assert "lower-case letters, digits and '_'" in (endpoint_name_problem(name) or "")
