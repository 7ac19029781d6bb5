"""Lookup nodes in lint: the shape of call, send, returns, sets and next, the values a
lookup sends and sets, and what a check may read after one."""

from __future__ import annotations

from typing import get_args

from flowcore.common.lookups import LOOKUP_TYPES
from flowcore.flow.building import build_flow
from flowcore.flow.findings import Finding
from flowcore.flow.model import Category, LookupNode, SlotType
from tests.flowcore.flow.lint.test_lint import HEADER

CATEGORIES = {"payments": Category(id="payments", title="決済")}

# A collect (a required order_id, an optional note), the lookup n_status (call at line 16,
# send 17, sets' shipped_on 22), a check that reads its label and date, then n_done.
LOOKUP = (
    HEADER
    + """\
nodes:
  - id: n_start
    kind: collect
    say: 注文番号を聞く
    slots:
      order_id: {ask: 注文番号, required: true}
      note: メモ
    next: n_status
  - id: n_status
    kind: lookup
    say: 注文の状態を調べる
    call: orders
    send: [order_id]
    returns:
      shipped: 出荷済み
      pending: 準備中
    sets:
      shipped_on: date
    next:
      shipped: n_check
      pending: n_done
      __error__: n_done
  - id: n_check
    kind: check
    say: 古い出荷か
    when:
      - if: n_status == 'shipped' && shipped_on < today
        next: n_done
    else: n_done
  - id: n_done
    kind: end
    say: 締める
    outcome: resolved
"""
)


def edit(text: str, *changes: tuple[str, str]) -> str:
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new)
    return text


def lint(text: str) -> list[Finding]:
    return build_flow(text, categories=CATEGORIES, file="flows/demo.yaml")[1]


def errors(text: str, code: str) -> list[Finding]:
    return [f for f in lint(text) if f["code"] == code]


def test_lookup_builds_with_its_call_send_returns_sets_and_next() -> None:
    flow, findings = build_flow(LOOKUP, categories=CATEGORIES)
    assert findings == []
    assert flow is not None
    node = flow.nodes["n_status"]
    assert isinstance(node, LookupNode)
    assert (node.call, node.send) == ("orders", ("order_id",))
    assert dict(node.returns) == {"shipped": "出荷済み", "pending": "準備中"}
    assert dict(node.sets) == {"shipped_on": "date"}
    assert dict(node.next) == {"shipped": "n_check", "pending": "n_done", "__error__": "n_done"}


def test_lookup_send_is_optional_and_defaults_to_nothing() -> None:
    flow, _ = build_flow(edit(LOOKUP, ("    send: [order_id]\n", "")), categories=CATEGORIES)
    assert flow is not None
    node = flow.nodes["n_status"]
    assert isinstance(node, LookupNode)
    assert node.send == ()


def test_a_personal_lookup_makes_the_keys_it_sets_personal() -> None:
    flow, _ = build_flow(
        edit(LOOKUP, ("    call: orders\n", "    call: orders\n    personal: true\n")),
        categories=CATEGORIES,
    )
    assert flow is not None
    assert flow.personal_keys == {"shipped_on"}
    (found,) = errors(
        edit(LOOKUP, ("    call: orders\n", "    call: orders\n    personal: 1\n")), "schema"
    )
    assert "personal" in found["message"] and found["where"] == "demo/n_status"


def test_lookup_without_call_is_schema_error() -> None:
    (found,) = errors(edit(LOOKUP, ("    call: orders\n", "")), "schema")
    assert "has no 'call'" in found["message"]


def test_lookup_call_that_is_not_a_name_is_schema_error() -> None:
    (found,) = errors(edit(LOOKUP, ("call: orders", "call: Orders API")), "schema")
    assert found["where"] == "demo/n_status/call"
    assert "'Orders API' is not a name" in found["message"]
    assert found["line"] == 16


def test_lookup_send_that_is_not_a_list_of_keys_is_schema_error() -> None:
    (found,) = errors(edit(LOOKUP, ("send: [order_id]", "send: order_id")), "schema")
    assert "'send' must be a list" in found["message"]


def test_lookup_send_naming_no_value_suggests_the_closest() -> None:
    (found,) = errors(edit(LOOKUP, ("send: [order_id]", "send: [ordr_id]")), "unset_value")
    assert found["message"].startswith(
        "send names 'ordr_id', which no node of the flow sets (did you mean 'order_id'?)"
    )
    assert found["line"] == 17


def test_lookup_sending_an_optional_slot_is_unset_value() -> None:
    (found,) = errors(edit(LOOKUP, ("send: [order_id]", "send: [order_id, note]")), "unset_value")
    assert found["where"] == "demo/n_status/send"
    assert found["message"].startswith("n_status sends note, which some path")
    assert found["line"] == 17


def test_lookup_sending_its_own_label_is_unset_value() -> None:
    (found,) = errors(edit(LOOKUP, ("send: [order_id]", "send: [n_status]")), "unset_value")
    assert "n_status sends n_status" in found["message"]


def test_lookup_without_returns_or_with_empty_returns_is_schema_error() -> None:
    without = edit(LOOKUP, ("    returns:\n      shipped: 出荷済み\n      pending: 準備中\n", ""))
    assert any("needs 'returns'" in f["message"] for f in errors(without, "schema"))
    empty = edit(
        LOOKUP,
        ("    returns:\n      shipped: 出荷済み\n      pending: 準備中\n", "    returns: {}\n"),
    )
    assert any("'returns' is empty" in f["message"] for f in errors(empty, "schema"))


def test_lookup_label_follows_the_rules_of_an_ask_label() -> None:
    text = edit(
        LOOKUP,
        (
            "      pending: 準備中\n",
            "      pending: 準備中\n      __late: 遅延\n      on hold: 保留\n",
        ),
    )
    messages = [f["message"] for f in errors(text, "schema")]
    assert (
        "label '__late' starts with __, which is reserved: rename it (__error__ goes in next only)"
        in messages
    )
    assert any(m.startswith("label 'on hold' must be 1-64") for m in messages)


def test_lookup_label_without_next_is_reported() -> None:
    (found,) = errors(edit(LOOKUP, ("      pending: n_done\n", "")), "label_without_next")
    assert found["where"] == "demo/n_status/pending"


def test_lookup_next_without_label_is_reported_with_the_closest() -> None:
    text = edit(LOOKUP, ("      __error__: n_done\n", "      __eror__: n_done\n"))
    (found,) = errors(text, "next_without_label")
    assert "did you mean '__error__'?" in found["message"]


def test_lookup_next_to_no_node_is_bad_target() -> None:
    (found,) = errors(edit(LOOKUP, ("__error__: n_done", "__error__: n_dnoe")), "bad_target")
    assert found["where"] == "demo/n_status/__error__"


def test_lookup_without_error_route_builds() -> None:
    flow, findings = build_flow(
        edit(LOOKUP, ("      __error__: n_done\n", "")), categories=CATEGORIES
    )
    assert flow is not None
    assert findings == []


def test_lookup_set_key_of_no_lookup_type_is_bad_type() -> None:
    for kind in ("choice", "money"):
        (found,) = errors(edit(LOOKUP, ("shipped_on: date", f"shipped_on: {kind}")), "bad_type")
        assert found["where"] == "demo/n_status/shipped_on"
        assert found["line"] == 22


def test_lookup_set_key_named_like_a_slot_a_node_or_another_set_key_is_duplicate_id() -> None:
    for name in ("order_id", "n_check", "n_status"):
        (found,) = errors(edit(LOOKUP, ("shipped_on: date", f"{name}: text")), "duplicate_id")
        assert found["where"] == f"demo/n_status/{name}"
    second = edit(
        LOOKUP,
        ("    next:\n      shipped: n_check", "    next:\n      shipped: n_again"),
        (
            "- id: n_check\n",
            "- id: n_again\n    kind: lookup\n    say: もう一度\n    call: orders\n"
            "    returns: {shipped: 出荷済み}\n    sets: {shipped_on: date}\n"
            "    next: {shipped: n_check}\n  - id: n_check\n",
        ),
    )
    (found,) = errors(second, "duplicate_id")
    assert found["message"] == (
        "set key 'shipped_on' is also a set key of n_status; each value of a flow has one "
        "name: rename one of them"
    )


def test_check_may_read_a_lookups_label_and_sets_after_it() -> None:
    assert lint(LOOKUP) == []


def test_check_reading_a_lookups_set_key_after_its_error_route_is_unset_value() -> None:
    # The label holds __error__ there; nothing came back to set shipped_on.
    text = edit(LOOKUP, ("__error__: n_done", "__error__: n_check"))
    (found,) = errors(text, "unset_value")
    assert found["where"] == "demo/n_check/when[0]"
    assert "reads shipped_on, which some path" in found["message"]


def test_lookup_types_are_the_slot_types_but_choice() -> None:
    assert LOOKUP_TYPES == tuple(t for t in get_args(SlotType) if t != "choice")
