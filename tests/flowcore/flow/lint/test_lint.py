"""One minimal failing flow per lint code (spec §6)."""

from __future__ import annotations

import textwrap

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from flowcore.flow.building import build_flow
from flowcore.flow.findings import ERROR_CODES, WARNING_CODES, Finding, finding, format_finding
from flowcore.flow.model import Category

CATEGORIES = {"payments": Category(id="payments", title="決済")}

HEADER = """\
id: demo
title: デモ
category: payments
entry: n_start
"""

GOOD = (
    HEADER
    + """\
nodes:
  - id: n_start
    kind: ask
    say: 質問する
    accepts:
      yes: はい
      no: いいえ
    next:
      yes: n_done
      no: n_done
  - id: n_done
    kind: end
    say: 締める
    outcome: resolved
"""
)


def lint(text: str, **kwargs: str) -> list[Finding]:
    return build_flow(textwrap.dedent(text), categories=CATEGORIES, **kwargs)[1]


def only(findings: list[Finding], code: str) -> Finding:
    matches = [f for f in findings if f["code"] == code]
    assert len(matches) == 1, findings
    return matches[0]


def codes(findings: list[Finding]) -> list[str]:
    return [f["code"] for f in findings]


def test_clean_flow_has_no_findings() -> None:
    assert lint(GOOD) == []


def test_codes_are_exactly_those_of_the_spec() -> None:
    assert set(ERROR_CODES) == {
        "schema",
        "id_mismatch",
        "duplicate_id",
        "bad_entry",
        "bad_target",
        "label_without_next",
        "next_without_label",
        "unreachable",
        "cycle",
        "dead_end",
        "unknown_category",
        "bad_pattern",
        "bad_type",
        "bad_condition",
        "unset_value",
        "unchanged_version",
    }
    # pattern_without_hint came with ADR 0022 (spec §6); similar_labels
    # is the matching rule's (spec §3.1, ADR 0060).
    assert set(WARNING_CODES) == {
        "unfoldable",
        "empty_say",
        "pattern_without_hint",
        "similar_labels",
        "shadowed_condition",
    }


def test_every_finding_carries_file_and_line_when_read_from_a_file() -> None:
    text = GOOD.replace("kind: end", "kind: finish")
    findings = lint(text + "extra: 1\n", file="flows/demo.yaml")
    assert findings
    assert all(f["file"] == "flows/demo.yaml" and f["line"] > 0 for f in findings)


# --- schema ----------------------------------------------------------------------------------


def test_missing_required_key_is_schema_error() -> None:
    f = only(lint(GOOD.replace("title: デモ\n", "")), "schema")
    assert (f["level"], f["where"], f["line"]) == ("error", "demo", 1)
    assert "'title'" in f["message"]


def test_unknown_key_names_it_and_suggests_the_closest() -> None:
    findings = lint(GOOD.replace("title:", "titel:"))
    unknown = [f for f in findings if "titel" in f["message"]]
    assert len(unknown) == 1
    assert (unknown[0]["where"], unknown[0]["line"]) == ("demo", 2)
    assert "did you mean 'title'" in unknown[0]["message"]


def test_node_key_of_another_kind_says_which_kind_has_it() -> None:
    text = GOOD.replace("    say: 質問する\n", "    say: 質問する\n    outcome: x\n")
    f = only(lint(text), "schema")
    assert f["where"] == "demo/n_start/outcome"
    assert "only end nodes have it" in f["message"]
    assert f["line"] == 9


def test_unknown_kind_is_schema_error() -> None:
    f = only(lint(GOOD.replace("kind: end", "kind: ende")), "schema")
    assert f["where"] == "demo/n_done/kind"
    assert "did you mean 'end'" in f["message"]
    assert f["line"] == 16


def test_bad_flow_id_syntax_is_schema_error() -> None:
    f = only(lint(GOOD.replace("id: demo", "id: Demo-Flow")), "schema")
    assert f["where"] == "Demo-Flow"
    assert "lowercase" in f["message"]


def test_bad_node_id_syntax_is_schema_error() -> None:
    text = GOOD.replace("n_done", "n-done")
    f = only(lint(text), "schema")
    assert f["where"] == "demo/n-done"


def test_yaml_that_does_not_parse_is_schema_error_with_its_line() -> None:
    f = only(lint(GOOD + "  - id: [unclosed\n", file="demo.yaml"), "schema")
    assert f["level"] == "error"
    assert f["file"] == "demo.yaml"
    # The unclosed bracket is on line 19; the parser notices at the end of the text (line 20),
    # and the finding gives the line where the parser stopped.
    assert f["line"] == 20
    assert "does not parse" in f["message"]


def test_parse_error_uses_the_expected_id_as_where() -> None:
    f = only(lint("id: [\n", expected_id="demo"), "schema")
    assert f["where"] == "demo"


def test_duplicate_key_is_schema_error_at_the_second_key() -> None:
    text = GOOD.replace("    say: 締める\n", "    say: 締める\n    say: 二度目\n")
    f = only(lint(text), "schema")
    assert f["where"] == "demo/n_done/say"
    assert f["line"] == 18
    assert "twice" in f["message"]


@pytest.mark.parametrize("anchor", ["", "&n "], ids=["one-pass-build", "with-an-anchor"])
def test_repeated_keys_deep_in_the_nodes_are_each_reported_in_line_order(anchor: str) -> None:
    # An anchor sends the document down the general path, which records no summary.
    text = """\
        id: demo
        title: デモ
        category: payments
        entry: n_start
        nodes:
          - id: n_start
            kind: ask
            say: 質問する
            accepts: ANCHOR{yes: はい, no: いいえ, yes: もう一度}
            next:
              yes: n_done
              no: n_done
          - id: n_done
            kind: end
            say: 締める
            say: 二度目
            outcome: resolved
        """
    found = [(f["code"], f["where"], f.get("line")) for f in lint(text.replace("ANCHOR", anchor))]
    assert found == [
        ("schema", "demo/n_start/accepts", 9),
        ("schema", "demo/n_done/say", 16),
    ]


def test_true_label_must_be_quoted() -> None:
    text = GOOD.replace("yes:", "true:")
    findings = lint(text)
    assert codes(findings) == ["schema", "schema"]  # once in accepts, once in next
    assert findings[0]["where"] == "demo/n_start/true"
    assert "quote it" in findings[0]["message"]
    assert findings[0]["line"] == 10


def test_label_starting_with_double_underscore_is_schema_error() -> None:
    text = GOOD.replace("no:", "__no__:")
    f = only(lint(text), "schema")
    assert f["where"] == "demo/n_start/__no__"
    assert "reserved" in f["message"]


def test_label_with_spaces_is_schema_error() -> None:
    text = GOOD.replace("no:", "'not sure':")
    f = [x for x in lint(text) if x["code"] == "schema"][0]
    assert f["where"] == "demo/n_start/not sure"


def test_non_positive_max_unmatched_is_schema_error() -> None:
    f = only(lint(GOOD.replace("entry:", "max_unmatched: 0\nentry:")), "schema")
    assert f["where"] == "demo"
    assert "max_unmatched" in f["message"]
    assert f["line"] == 4


def test_on_unknown_must_be_broaden_or_escalate() -> None:
    f = only(lint(GOOD.replace("entry:", "on_unknown: ask\nentry:")), "schema")
    assert "broaden or escalate" in f["message"]


def test_float_version_must_be_quoted() -> None:
    f = only(lint(GOOD.replace("entry:", "version: 1.5\nentry:")), "schema")
    assert "quote it: '1.5'" in f["message"]


def test_nodes_must_be_a_non_empty_list() -> None:
    f = only(lint(HEADER + "nodes: []\n"), "schema")
    assert f["where"] == "demo"
    assert f["line"] == 5


def test_say_is_required_on_every_node() -> None:
    f = only(lint(GOOD.replace("    say: 締める\n", "")), "schema")
    assert f["where"] == "demo/n_done"
    assert "'say'" in f["message"]


def test_end_needs_an_outcome_word() -> None:
    f = only(lint(GOOD.replace("outcome: resolved", "outcome: 解決しました")), "schema")
    assert f["where"] == "demo/n_done/outcome"
    f = only(lint(GOOD.replace("    outcome: resolved\n", "")), "schema")
    assert f["where"] == "demo/n_done"


def test_tell_next_must_be_one_node_id() -> None:
    text = HEADER + textwrap.dedent(
        """\
        nodes:
          - id: n_start
            kind: tell
            say: 伝える
            next: {a: n_done}
          - id: n_done
            kind: end
            say: 締める
            outcome: resolved
        """
    )
    f = only(lint(text), "schema")
    assert f["where"] == "demo/n_start/next"
    assert "only ask nodes branch" in f["message"]


def test_ask_next_must_be_a_mapping() -> None:
    text = GOOD.replace("    next:\n      yes: n_done\n      no: n_done\n", "    next: n_done\n")
    f = only(lint(text), "schema")
    assert f["where"] == "demo/n_start/next"


def collect_flow(slots: str, *, on_unknown: str = "escalate") -> str:
    """A collect node n_start whose ``slots`` mapping is given as YAML lines."""
    return (
        HEADER
        + f"on_unknown: {on_unknown}\n"
        + "nodes:\n"
        + "  - id: n_start\n    kind: collect\n    say: 情報を集める\n    slots:\n"
        + textwrap.indent(textwrap.dedent(slots), "      ")
        + "    next: n_done\n"
        + "  - id: n_done\n    kind: end\n    say: 締める\n    outcome: resolved\n"
    )


def test_collect_needs_at_least_one_slot() -> None:
    text = collect_flow("").replace("slots:\n", "slots: {}\n")
    f = only(lint(text), "schema")
    assert f["where"] == "demo/n_start/slots"


def test_slot_required_yes_is_not_a_boolean() -> None:
    f = only(lint(collect_flow("order_id: {ask: 注文番号, required: yes}\n")), "schema")
    assert f["where"] == "demo/n_start/order_id"
    assert "true or false" in f["message"]
    assert "YAML 1.2" in f["message"]


def test_unknown_slot_key_suggests_the_closest() -> None:
    f = only(lint(collect_flow("order_id: {ask: 注文番号, patern: 'A[0-9]+'}\n")), "schema")
    assert f["where"] == "demo/n_start/order_id"
    assert "did you mean 'pattern'" in f["message"]


def test_a_node_without_kind_gives_no_consequential_graph_findings() -> None:
    # n_done's edges are unknown until it has a kind, so n_start is no dead end.
    assert codes(lint(GOOD.replace("    kind: end\n", ""))) == ["schema"]


def test_a_schema_error_does_not_hide_a_cycle() -> None:
    text = GOOD.replace("no: n_done", "no: n_start").replace(
        "    say: 質問する\n", "    sya: 質問する\n"
    )
    assert sorted(codes(lint(text))) == ["cycle", "schema", "schema"]


# --- semantics -------------------------------------------------------------------------------


def test_id_mismatch_when_file_name_differs() -> None:
    f = only(lint(GOOD, expected_id="other", file="flows/other.yaml"), "id_mismatch")
    assert (f["level"], f["where"], f["file"], f["line"]) == (
        "error",
        "demo",
        "flows/other.yaml",
        1,
    )
    assert "other.yaml" in f["message"]


def test_no_id_mismatch_without_an_expected_id() -> None:
    assert lint(GOOD) == []


def test_duplicate_node_id() -> None:
    text = GOOD + "  - id: n_done\n    kind: end\n    say: 二つ目\n    outcome: resolved\n"
    f = only(lint(text), "duplicate_id")
    assert (f["level"], f["where"], f["line"]) == ("error", "demo/n_done", 19)


def test_slot_named_like_a_node_is_duplicate_id() -> None:
    f = only(lint(collect_flow("n_done: 何か\n")), "duplicate_id")
    assert f["where"] == "demo/n_start/n_done"


def test_slot_name_used_twice_in_a_flow_is_duplicate_id() -> None:
    text = HEADER + textwrap.dedent(
        """\
        nodes:
          - id: n_start
            kind: collect
            say: 集める
            slots: {phone: 電話番号}
            next: n_more
          - id: n_more
            kind: collect
            say: もう一度集める
            slots: {phone: 電話番号}
            next: n_done
          - id: n_done
            kind: end
            say: 締める
            outcome: resolved
        """
    )
    f = only(lint(text), "duplicate_id")
    assert f["where"] == "demo/n_more/phone"
    assert "n_start" in f["message"]


def test_bad_entry() -> None:
    f = only(lint(GOOD.replace("entry: n_start", "entry: n_strat")), "bad_entry")
    assert (f["level"], f["where"], f["line"]) == ("error", "demo", 4)
    assert "did you mean 'n_start'" in f["message"]


def test_bad_target_of_an_ask_label() -> None:
    f = only(lint(GOOD.replace("no: n_done", "no: n_gone")), "bad_target")
    assert (f["level"], f["where"], f["line"]) == ("error", "demo/n_start/no", 14)


def test_bad_target_of_a_tell() -> None:
    f = only(
        lint(collect_flow("phone: 電話番号\n").replace("next: n_done", "next: nope")), "bad_target"
    )
    assert f["where"] == "demo/n_start/next"


def test_label_without_next() -> None:
    f = only(lint(GOOD.replace("      no: n_done\n", "")), "label_without_next")
    assert (f["level"], f["where"], f["line"]) == ("error", "demo/n_start/no", 11)


def test_next_without_label() -> None:
    text = GOOD.replace("      no: n_done\n", "      no: n_done\n      maybe: n_done\n")
    f = only(lint(text), "next_without_label")
    assert (f["level"], f["where"], f["line"]) == ("error", "demo/n_start/maybe", 15)


def test_reserved_next_keys_need_no_label() -> None:
    text = GOOD.replace(
        "      no: n_done\n",
        "      no: n_done\n      __other__: n_done\n      __unknown__: n_done\n",
    )
    assert lint(text) == []


def test_unreachable_node() -> None:
    text = GOOD + "  - id: n_orphan\n    kind: end\n    say: 誰も来ない\n    outcome: resolved\n"
    f = only(lint(text), "unreachable")
    assert (f["level"], f["where"], f["line"]) == ("error", "demo/n_orphan", 19)


CYCLE = HEADER + textwrap.dedent(
    """\
    nodes:
      - id: n_start
        kind: tell
        say: 一
        next: n_a
      - id: n_a
        kind: ask
        say: 二
        accepts: {again: もう一度, done: 終わり}
        next: {again: n_b, done: n_done}
      - id: n_b
        kind: tell
        say: 三
        next: n_a
      - id: n_done
        kind: end
        say: 締める
        outcome: resolved
    """
)


def test_cycle_is_reported_once_with_its_nodes() -> None:
    f = only(lint(CYCLE), "cycle")
    assert (f["level"], f["where"], f["line"]) == ("error", "demo/n_a", 10)
    assert "n_a → n_b → n_a" in f["message"]


def test_self_loop_is_a_cycle() -> None:
    f = only(lint(GOOD.replace("no: n_done", "no: n_start")), "cycle")
    assert f["where"] == "demo/n_start"


def test_dead_end_before_a_closed_loop() -> None:
    text = HEADER + textwrap.dedent(
        """\
        nodes:
          - id: n_start
            kind: ask
            say: 分岐
            accepts: {a: A, b: B}
            next: {a: n_loop, b: n_done}
          - id: n_loop
            kind: tell
            say: 入口
            next: n_x
          - id: n_x
            kind: tell
            say: 回る
            next: n_y
          - id: n_y
            kind: tell
            say: 回る
            next: n_x
          - id: n_done
            kind: end
            say: 締める
            outcome: resolved
        """
    )
    findings = lint(text)
    assert codes(findings) == ["cycle", "dead_end"]
    f = only(findings, "dead_end")
    assert (f["level"], f["where"], f["line"]) == ("error", "demo/n_loop", 11)


EVERYTHING_AT_ONCE = HEADER + textwrap.dedent(
    """\
    nodes:
      - id: n_start
        kind: ask
        say: 分岐
        accepts: {a: A, b: B, c: C}
        next: {a: n_loop, b: n_nowhere}
      - id: n_loop
        kind: tell
        say: 回る
        next: n_loop
      - id: n_orphan
        kind: end
        say: 誰も来ない
        outcome: resolved
    """
)


def test_a_bad_target_and_a_missing_next_still_get_their_cycle_and_unreachable() -> None:
    findings = lint(EVERYTHING_AT_ONCE)
    assert sorted(codes(findings)) == [
        "bad_target",
        "cycle",
        "label_without_next",
        "unreachable",
    ]
    assert only(findings, "unreachable")["where"] == "demo/n_orphan"
    assert only(findings, "cycle")["where"] == "demo/n_loop"


def test_a_node_whose_edge_goes_nowhere_known_is_no_dead_end() -> None:
    # n_start's b and c lead nowhere yet: once fixed they may reach an end.
    assert "dead_end" not in codes(lint(EVERYTHING_AT_ONCE))


TELL_TO = HEADER + textwrap.dedent(
    """\
    nodes:
      - id: n_start
        kind: tell
        say: 案内する
        next: {target}
      - id: n_done
        kind: end
        say: 締める
        outcome: resolved
    """
)


def test_a_typo_with_a_close_match_does_not_make_its_node_unreachable() -> None:
    findings = lint(TELL_TO.format(target="n_dnoe"))
    assert codes(findings) == ["bad_target"]
    assert "did you mean 'n_done'" in findings[0]["message"]


def test_a_target_with_no_close_match_leaves_the_node_it_missed_unreachable() -> None:
    findings = lint(TELL_TO.format(target="n_nowhere"))
    assert codes(findings) == ["bad_target", "unreachable"]
    assert only(findings, "unreachable")["where"] == "demo/n_done"


def test_a_bad_entry_with_a_close_match_is_followed_from_that_match() -> None:
    text = GOOD.replace("entry: n_start", "entry: n_strat")
    text += "  - id: n_orphan\n    kind: end\n    say: 誰も来ない\n    outcome: resolved\n"
    findings = lint(text)
    assert codes(findings) == ["bad_entry", "unreachable"]
    assert only(findings, "unreachable")["where"] == "demo/n_orphan"


def test_a_bad_entry_with_no_close_match_checks_no_reachability() -> None:
    assert codes(lint(GOOD.replace("entry: n_start", "entry: n_zzzzzzzz"))) == ["bad_entry"]


def test_a_node_id_used_twice_skips_the_graph_checks() -> None:
    text = GOOD.replace("no: n_done", "no: n_start")  # a cycle, hidden by the ambiguity
    text += "  - id: n_done\n    kind: end\n    say: 二つ目\n    outcome: resolved\n"
    assert codes(lint(text)) == ["duplicate_id"]


def test_unknown_category() -> None:
    f = only(lint(GOOD.replace("category: payments", "category: payment")), "unknown_category")
    assert (f["level"], f["where"], f["line"]) == ("error", "demo", 3)
    assert "did you mean 'payments'" in f["message"]


def test_bad_pattern() -> None:
    f = only(lint(collect_flow("order_id: {ask: 注文番号, pattern: 'A[0-9'}\n")), "bad_pattern")
    assert (f["level"], f["where"], f["line"]) == ("error", "demo/n_start/order_id", 11)
    assert "not a valid regular expression" in f["message"]


@pytest.mark.parametrize(
    "pattern",
    ["(A)\\1", "(?=A)A[0-9]{5}", "(?<!B)A", "A{2000}"],
    ids=["backreference", "lookahead", "lookbehind", "huge-repeat"],
)
def test_a_pattern_python_takes_but_the_linear_time_engine_cannot_run_is_a_bad_pattern(
    pattern: str,
) -> None:
    f = only(
        lint(collect_flow(f"order_id: {{ask: 注文番号, pattern: '{pattern}'}}\n")), "bad_pattern"
    )
    assert "linear-time engine (RE2)" in f["message"]
    assert "backreferences, lookahead, lookbehind" in f["message"]


# --- warnings --------------------------------------------------------------------------------


def test_pattern_without_hint_is_a_warning_and_the_flow_still_builds() -> None:
    text = collect_flow("order_id: {ask: 注文番号, required: true, pattern: 'A[0-9]{5}'}\n")
    flow, findings = build_flow(text, categories=CATEGORIES)
    assert flow is not None
    f = only(findings, "pattern_without_hint")
    assert (f["level"], f["where"], f["line"]) == ("warning", "demo/n_start/order_id", 11)
    assert "hint" in f["message"]


def test_pattern_with_a_hint_or_no_pattern_warns_nothing() -> None:
    hinted = "order_id: {ask: 注文番号, pattern: 'A[0-9]{5}', hint: A と数字5桁}\n"
    assert lint(collect_flow(hinted)) == []
    assert lint(collect_flow("order_id: 注文番号\n")) == []


def test_an_invalid_pattern_is_not_also_warned_about_its_hint() -> None:
    text = collect_flow("order_id: {ask: 注文番号, pattern: 'A[0-9'}\n")
    assert codes(lint(text)) == ["bad_pattern"]


def labels_flow(*labels: str) -> str:
    accepts = "".join(f"      {label}: when {label}\n" for label in labels)
    routes = "".join(f"      {label}: n_done\n" for label in labels)
    return GOOD.replace("      yes: はい\n      no: いいえ\n", accepts).replace(
        "      yes: n_done\n      no: n_done\n", routes
    )


def test_similar_labels_warns_where_the_matching_rule_cannot_tell_two_labels_apart() -> None:
    flow, findings = build_flow(
        labels_flow("wrong_item", "Wrong-Item", "form", "from", "E01", "E02"), categories=CATEGORIES
    )
    assert flow is not None  # a warning: the flow still builds
    similar = [f for f in findings if f["code"] == "similar_labels"]
    assert [(f["level"], f["where"], f["line"]) for f in similar] == [
        ("warning", "demo/n_start/Wrong-Item", 6),
        ("warning", "demo/n_start/from", 6),
    ]
    assert "one label to the matching rule" in similar[0]["message"]
    assert "differ by a slip" in similar[1]["message"]


def test_similar_labels_is_reported_beside_the_errors_of_the_same_lint() -> None:
    text = labels_flow("form", "from").replace("title: デモ\n", "")
    flow, findings = build_flow(text, categories=CATEGORIES)
    assert flow is None
    assert codes(findings) == ["schema", "similar_labels"]


def test_labels_that_differ_by_more_than_a_slip_or_by_a_number_warn_nothing() -> None:
    assert lint(labels_flow("valid", "invalid", "match", "mismatch", "E01", "E02", "E1x")) == []


def test_empty_say_is_a_warning_and_the_flow_still_builds() -> None:
    text = GOOD.replace("say: 締める", "say: ''")
    flow, findings = build_flow(text, categories=CATEGORIES)
    f = only(findings, "empty_say")
    assert (f["level"], f["where"], f["line"]) == ("warning", "demo/n_done", 17)
    assert flow is not None


def fold_flow(accepts: str, next_: str, extra_nodes: str = "", top: str = "") -> str:
    return (
        HEADER
        + "on_unknown: broaden\n"
        + top
        + textwrap.dedent(
            f"""\
            nodes:
              - id: n_start
                kind: ask
                say: 分岐
                accepts: {accepts}
                next: {next_}
            """
        )
        + textwrap.indent(textwrap.dedent(extra_nodes), "  ")
        + "  - id: n_done\n    kind: end\n    say: 締める\n    outcome: resolved\n"
    )


def test_unfoldable_fanout() -> None:
    text = fold_flow("{a: A, b: B, c: C, d: D}", "{a: n_done, b: n_done, c: n_done, d: n_done}")
    f = only(lint(text), "unfoldable")
    assert (f["level"], f["where"], f["line"]) == ("warning", "demo/n_start", 7)
    assert "max_branch_fanout" in f["message"]
    assert "__unknown__" in f["message"] and "on_unknown: escalate" in f["message"]


def test_unfoldable_depth() -> None:
    chain = """\
      - id: n_1
        kind: tell
        say: 一
        next: n_2
      - id: n_2
        kind: tell
        say: 二
        next: n_3
      - id: n_3
        kind: tell
        say: 三
        next: n_done
    """
    f = only(lint(fold_flow("{a: A, b: B}", "{a: n_1, b: n_done}", chain)), "unfoldable")
    assert "branch_depth" in f["message"]


def test_unfoldable_collect_in_a_branch() -> None:
    collect = """\
      - id: n_ids
        kind: collect
        on_unknown: escalate
        say: 集める
        slots: {phone: 電話番号}
        next: n_done
    """
    f = only(lint(fold_flow("{a: A, b: B}", "{a: n_ids, b: n_done}", collect)), "unfoldable")
    assert f["where"] == "demo/n_start"
    assert "collect node n_ids" in f["message"]


def test_collect_with_required_slots_under_broaden_is_unfoldable() -> None:
    f = only(
        lint(collect_flow("phone: {ask: 電話番号, required: true}\n", on_unknown="broaden")),
        "unfoldable",
    )
    assert (f["level"], f["where"]) == ("warning", "demo/n_start")
    assert "on_unknown: escalate" in f["message"]


def test_collect_with_only_optional_slots_folds_nothing_and_warns_nothing() -> None:
    assert lint(collect_flow("phone: 電話番号\n", on_unknown="broaden")) == []


def test_no_unfoldable_warning_with_an_unknown_route_or_escalate() -> None:
    many = "{a: A, b: B, c: C, d: D}"
    routes = "{a: n_done, b: n_done, c: n_done, d: n_done"
    assert lint(fold_flow(many, routes + ", __unknown__: n_done}")) == []
    node_escalates = fold_flow(many, routes + "}").replace(
        "    kind: ask\n", "    kind: ask\n    on_unknown: escalate\n"
    )
    assert lint(node_escalates) == []


def test_foldable_ask_under_broaden_warns_nothing() -> None:
    assert lint(fold_flow("{a: A, b: B}", "{a: n_done, b: n_done}")) == []


# --- shared entry points ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("f", "line"),
    [
        (
            finding("error", "cycle", "d/n", "loops", file="d.yaml", line=3),
            "error cycle d/n: loops (d.yaml:3)",
        ),
        (
            finding("warning", "empty_say", "d/n", "empty", file="d.yaml"),
            "warning empty_say d/n: empty (d.yaml)",
        ),
        (finding("error", "schema", "d", "bad", line=2), "error schema d: bad (line 2)"),
        (finding("error", "schema", "d", "bad"), "error schema d: bad"),
    ],
)
def test_format_finding_is_one_line(f: Finding, line: str) -> None:
    assert format_finding(f) == line


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 5),
    st.sampled_from(["n_start", "n_done", "ask", "end", "escalate", "", "x y", "__x"]),
)
KEYS = st.sampled_from(
    ["id", "kind", "say", "accepts", "next", "slots", "outcome", "entry", "nodes", "yes", "ask"]
)
ANY_DATA = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.one_of(KEYS, SCALARS), inner, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=100, deadline=None)
@given(nodes=st.lists(ANY_DATA, max_size=4), extra=ANY_DATA)
def test_lint_never_raises_on_any_document(nodes: list[object], extra: object) -> None:
    document = {"id": "demo", "title": "t", "category": "payments", "entry": "n_start"}
    text = yaml.safe_dump({**document, "nodes": nodes, "x": extra}, allow_unicode=True)
    findings = build_flow(text, categories=CATEGORIES)[1]
    assert all(f["where"].startswith("demo") for f in findings)
