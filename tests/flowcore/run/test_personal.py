"""``personal: true`` on an ask node or a slot (spec §1.2): built into the flow's
``personal_keys``, and lint takes only true or false; masks keep at most the last four
characters of a long value (ADR 0087)."""

from __future__ import annotations

import textwrap

from flowcore.flow.building import build_flow
from flowcore.flow.model import Category
from flowcore.run.personal import mask, masked_step

FLOW = """\
id: demo
title: Demo
category: payments
entry: n_kind
nodes:
  - id: n_kind
    kind: ask
    say: Ask which condition they have
    personal: {ask_flag}
    accepts:
      asthma: asthma
      other_condition: anything else
    next:
      asthma: n_id
      other_condition: n_id
  - id: n_id
    kind: collect
    say: Ask for their member id and their city
    slots:
      member_id: {{ask: the member id, required: true, personal: {slot_flag}}}
      city: the city
    next: n_done
  - id: n_done
    kind: end
    say: Close
    outcome: resolved
"""
CATEGORIES = {"payments": Category(id="payments", title="Payments")}


def build(
    ask_flag: str = "true", slot_flag: str = "true"
) -> tuple[object, list[dict[str, object]]]:
    text = textwrap.dedent(FLOW.format(ask_flag=ask_flag, slot_flag=slot_flag))
    flow, findings = build_flow(text, categories=CATEGORIES)
    return flow, list(findings)


def test_personal_keys_are_the_ask_nodes_and_slots_marked_personal() -> None:
    flow, findings = build()
    assert findings == []
    assert flow.personal_keys == frozenset({"n_kind", "member_id"})  # type: ignore[attr-defined]
    unmarked, _ = build("false", "false")
    assert unmarked.personal_keys == frozenset()  # type: ignore[attr-defined]


def test_lint_takes_only_true_or_false_for_personal() -> None:
    _, findings = build(ask_flag="yes", slot_flag="1")
    messages = [str(f["message"]) for f in findings]
    assert [f["code"] for f in findings] == ["schema", "schema"]
    assert "'personal' of this ask node must be true or false, not the text 'yes'" in messages[0]
    assert "'personal' of slot 'member_id' must be true or false, not the number 1" in messages[1]


def test_a_mask_keeps_the_last_four_characters_of_a_long_value_only() -> None:
    assert mask("4929123412341234") == "••••1234"
    assert mask("1984-02-11") == "••••2-11"
    assert mask("A0011") == "••••"
    assert mask("") == "••••"


def test_a_personal_json_number_echoed_in_a_result_is_masked_as_its_text() -> None:
    given = {"values": {"customer_no": 123456789.5}}
    result = {"rejected": "123456789.5", "next": "'123456789.5' does not fit slot customer_no"}

    shown, masked = masked_step(given, result, frozenset({"customer_no"}), "c_order")

    assert shown == {"values": {"customer_no": "••••89.5"}}
    assert "123456789.5" not in str(masked)
