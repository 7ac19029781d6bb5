"""Recorded lint findings: every finding of every case, compared whole.

``test_lint`` checks what each rule must find; this test pins what an author
reads, word for word: for each small flow below (each breaks one rule, or a few
that go together), every finding's level, code, where, message, file and line,
and whether the flow was built. The same for entries of categories.yaml, for the
bundled flows in ``flows/`` and for ``flows_broken/``. All run in-process (the
golden CLI transcript runs in a process mutation testing cannot see).

The files in ``recorded/`` were written by this test from a known-good version.
When a change to a message is intended, record again and review the diff of the
files in the commit::

    GUIDEPOST_RECORD_GOLDEN=1 .venv/bin/pytest tests/flowcore/flow/lint/test_lint_recorded.py
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowcore.flow.building import build_flow
from flowcore.flow.files import load_catalog, load_categories
from flowcore.flow.findings import AGAINST_LIVE_CODES, ERROR_CODES, WARNING_CODES, Finding
from flowcore.flow.model import Category
from tests.flowcore.flow.lint.test_lint import GOOD, HEADER
from tests.flowcore.flow.lint.test_lint_lookups import LOOKUP
from tests.support.paths import BROKEN_FLOWS, REPO
from tests.support.recording import check_recording

RECORDED = Path(__file__).parent / "recorded"
FILE = "flows/demo.yaml"  # every case is linted as if read from this file

CATEGORIES = {
    "payments": Category(id="payments", title="決済"),
    "account": Category(id="account", title="アカウント"),
}

# GOOD (test_lint's clean flow) by line, for reading the recording: id 1, nodes 5,
# n_start 6 (accepts 9, next 12), n_done 15 (say 17, outcome 18).

END = """\
- id: n_done
  kind: end
  say: 締める
  outcome: resolved
"""


def edit(text: str, *changes: tuple[str, str]) -> str:
    """``text`` with each (old, new) replaced; each old must be there (a case that changes
    nothing would pin nothing)."""
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new)
    return text


def good(*changes: tuple[str, str]) -> str:
    return edit(GOOD, *changes)


def flow(nodes: str, *, top: str = "", end: bool = True) -> str:
    """HEADER (plus ``top``) and the given nodes (YAML list items, any indent), then n_done."""
    listed = textwrap.dedent(nodes) + (END if end else "")
    return HEADER + top + "nodes:\n" + textwrap.indent(listed, "  ")


def collect(slots: str, *, top: str = "on_unknown: escalate\n", node: str = "") -> str:
    """A collect node n_start whose ``slots`` mapping is given as YAML lines (slots at line 10)."""
    return flow(
        "- id: n_start\n  kind: collect\n  say: 情報を集める\n"
        + node
        + "  slots:\n"
        + textwrap.indent(textwrap.dedent(slots), "    ")
        + "  next: n_done\n",
        top=top,
    )


def fold(accepts: str, next_: str, extra: str = "", *, top: str = "on_unknown: broaden\n") -> str:
    """An ask node n_start under on_unknown: broaden, the ``extra`` nodes, then n_done."""
    return flow(
        f"- id: n_start\n  kind: ask\n  say: 分岐\n  accepts: {accepts}\n  next: {next_}\n"
        + textwrap.dedent(extra),
        top=top,
    )


def check(when: str, *, else_: str = "  else: n_done\n", slots: str = "") -> str:
    """A collect n_start (a required number ``amount``, a date ``since``, an optional
    ``note`` and ``slots``) then a check n_check with ``when`` (YAML list lines) and
    ``else_``, then n_big and n_done."""
    return flow(
        "- id: n_start\n  kind: collect\n  say: 集める\n  slots:\n"
        "    amount: {ask: 金額, required: true, type: number}\n"
        "    since: {ask: 日付, required: true, type: date}\n"
        "    note: メモ\n" + slots + "  next: n_check\n"
        "- id: n_check\n  kind: check\n  say: 金額を確かめる\n  when:\n"
        + textwrap.indent(textwrap.dedent(when), "    ")
        + else_
        + "- id: n_big\n  kind: end\n  say: 上長へ\n  outcome: escalated\n",
        top="on_unknown: escalate\n",
    )


_LOOKUP_NEXT = "    next:\n      shipped: n_check\n      pending: n_done\n      __error__: n_done\n"


def lookup(*changes: tuple[str, str]) -> str:
    """test_lint_lookups' flow (a collect, the lookup n_status, a check reading it) with
    each (old, new) replaced."""
    return edit(LOOKUP, *changes)


@dataclass(frozen=True)
class Case:
    text: str
    expected_id: str | None = None
    categories: Mapping[str, Category] = field(default_factory=lambda: CATEGORIES)


CYCLE_WITH_A_THIRD = """\
- id: n_start
  kind: tell
  say: 一
  next: n_a
- id: n_a
  kind: ask
  say: 二
  accepts: {b: B, done: 終わり}
  next: {b: n_b, done: n_done}
- id: n_b
  kind: ask
  say: 三
  accepts: {back: 戻る, c: C}
  next: {back: n_a, c: n_c}
- id: n_c
  kind: tell
  say: 四
  next: n_a
"""

DEAD_END = """\
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
"""

CHAIN = """\
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

ORPHAN = "  - id: n_orphan\n    kind: end\n    say: 誰も来ない\n    outcome: resolved\n"

CASES: dict[str, Case] = {
    name: case if isinstance(case, Case) else Case(case)
    for name, case in {
        "clean": GOOD,
        # --- the YAML itself ------------------------------------------------------------
        "yaml_does_not_parse": GOOD + "  - id: [unclosed\n",
        "yaml_does_not_parse_without_an_id": "title: [\n",
        "yaml_refused_tag": "id: demo\ntitle: !!python/object/apply:os.system ['echo']\n",
        "yaml_not_a_mapping": "- id: a\n- id: b\n",
        # --- the flow's keys --------------------------------------------------------------
        "flow_unknown_key_close": good(("title:", "titel:")),
        "flow_unknown_key_far": GOOD + "colour: blue\n",
        "flow_node_key_at_the_top": GOOD + "kind: ask\n",
        "flow_key_not_text": GOOD + "3: three\n",
        "flow_keys_all_missing": "summary: 何もない\n",
        "flow_id_not_text": good(("id: demo", "id: 5")),
        "flow_id_bad_syntax": good(("id: demo", "id: Demo-Flow")),
        "flow_id_reserved_by_the_catalog": good(("id: demo", "id: categories")),
        "flow_id_reserved_for_tests": good(("id: demo", "id: tests")),
        "flow_id_reserved_by_windows": Case(good(("id: demo", "id: com1")), expected_id="com1"),
        "flow_id_mismatch": Case(GOOD, expected_id="other"),
        "flow_id_matches_its_file": Case(GOOD, expected_id="demo"),
        "flow_title_empty": good(("title: デモ", "title: '  '")),
        "flow_title_category_entry_not_text": good(
            ("title: デモ", "title: 3"),
            ("category: payments", "category: true"),
            ("entry: n_start", "entry:"),
        ),
        "flow_summary_and_on_stuck_not_text": GOOD + "summary: [a, b]\non_stuck: 1.5\n",
        "flow_version_float": GOOD + "version: 1.5\n",
        "flow_version_boolean": GOOD + "version: false\n",
        "flow_version_list": GOOD + "version: [1]\n",
        "flow_version_text_and_number_are_fine": GOOD + "version: 2\n",
        "flow_whole_numbers_not_positive": GOOD
        + "max_unmatched: 0\nmax_branch_fanout: many\nbranch_depth: true\n",
        "flow_on_unknown_not_a_choice": GOOD + "on_unknown: ask\n",
        "flow_on_unknown_null": GOOD + "on_unknown:\n",
        # --- nodes as a whole -----------------------------------------------------------------
        "nodes_missing": HEADER,
        "nodes_empty": HEADER + "nodes: []\n",
        "nodes_text": HEADER + "nodes: n_start\n",
        "nodes_mapping": HEADER + "nodes: {n_start: 質問}\n",
        "nodes_null": HEADER + "nodes:\n",
        "node_not_a_mapping": good(("  - id: n_done\n", "  - n_done\n  - 5\n  - id: n_done\n")),
        # --- duplicate keys -------------------------------------------------------------------
        "duplicate_key_at_the_top": GOOD + "title: 二度目\n",
        "duplicate_key_in_a_node": good(
            ("    say: 締める\n", "    say: 締める\n    say: 二度目\n")
        ),
        "duplicate_key_in_accepts": good(
            ("      no: いいえ\n", "      no: いいえ\n      yes: もう一度\n")
        ),
        "duplicate_key_with_an_anchor": good(
            ("    accepts:\n", "    accepts: &a\n"),
            ("    say: 締める\n", "    say: 締める\n    say: 二度目\n"),
        ),
        # --- a node's id and kind ---------------------------------------------------------------
        "node_without_id": GOOD + "  - kind: end\n    say: 名無し\n    outcome: resolved\n",
        "node_without_id_tell_to_nowhere": flow(
            "- id: n_start\n  kind: tell\n  say: 一\n  next: n_done\n"
            "- kind: tell\n  say: 二\n  next: n_nowhere\n"
        ),
        "node_without_id_ask_references": flow(
            "- id: n_start\n  kind: tell\n  say: 一\n  next: n_done\n"
            "- kind: ask\n  say: 二\n  accepts: {a: A, b: B}\n  next: {a: n_done, c: n_gone}\n"
        ),
        "node_without_id_collect_pattern": flow(
            "- id: n_start\n  kind: tell\n  say: 一\n  next: n_done\n"
            "- kind: collect\n  say: 二\n  slots: {order_id: {ask: 注文番号, pattern: 'A[0-9'}}\n"
            "  next: n_done\n"
        ),
        "node_id_not_text": good(("  - id: n_done\n", "  - id: 5\n")),
        "node_id_bad_syntax": good(("n_done", "n-done")),
        "node_without_kind": good(("    kind: end\n", "")),
        "node_kind_close": good(("kind: end", "kind: ende")),
        "node_kind_far": good(("kind: end", "kind: zzzzzz")),
        "node_kind_not_text": good(("kind: end", "kind: 3")),
        # --- a node's keys --------------------------------------------------------------------
        "ask_unknown_key": good(("    say: 質問する\n", "    sya: 質問する\n    say: 質問する\n")),
        "ask_key_of_an_end": good(("    say: 質問する\n", "    say: 質問する\n    outcome: x\n")),
        "tell_unknown_key_and_key_of_an_ask": flow(
            "- id: n_start\n  kind: tell\n  say: 伝える\n  colour: blue\n  accepts: {a: A}\n"
            "  next: n_done\n"
        ),
        "collect_unknown_key": collect("phone: 電話番号\n", node="  nxt: n_done\n"),
        "end_unknown_key_and_key_of_others": good(
            ("    outcome: resolved\n", "    outcome: resolved\n    foo: 1\n    next: n_start\n")
        ),
        "node_key_not_text": good(("    say: 締める\n", "    say: 締める\n    7: seven\n")),
        "say_missing": good(("    say: 締める\n", "")),
        "say_not_text": good(("say: 締める", "say: [a]")),
        "say_null": good(("say: 締める", "say:")),
        "say_empty": good(("say: 締める", "say: ''")),
        "node_on_unknown_and_on_stuck_not_valid": good(
            ("    say: 質問する\n", "    say: 質問する\n    on_unknown: maybe\n    on_stuck: 3\n")
        ),
        "end_outcome_missing": good(("    outcome: resolved\n", "")),
        "end_outcome_not_a_word": good(("outcome: resolved", "outcome: 解決しました")),
        "end_outcome_not_text": good(("outcome: resolved", "outcome: 1")),
        # --- ask nodes ----------------------------------------------------------------------
        "ask_accepts_missing": good(("    accepts:\n      yes: はい\n      no: いいえ\n", "")),
        "ask_accepts_empty": good(
            ("    accepts:\n      yes: はい\n      no: いいえ\n", "    accepts: {}\n")
        ),
        "ask_accepts_text": good(
            ("    accepts:\n      yes: はい\n      no: いいえ\n", "    accepts: はい\n")
        ),
        "ask_accepts_list": good(
            ("    accepts:\n      yes: はい\n      no: いいえ\n", "    accepts: [yes, no]\n")
        ),
        "ask_condition_not_text": good(("yes: はい", "yes: 3"), ("no: いいえ", "no:")),
        "ask_next_missing": good(("    next:\n      yes: n_done\n      no: n_done\n", "")),
        "ask_next_text": good(
            ("    next:\n      yes: n_done\n      no: n_done\n", "    next: n_done\n")
        ),
        "ask_next_list": good(
            ("    next:\n      yes: n_done\n      no: n_done\n", "    next: [n_done]\n")
        ),
        "ask_next_target_not_text": good(("no: n_done", "no: [n_done]")),
        "ask_next_target_null": good(("no: n_done", "no:")),
        "label_not_text": good(("yes:", "true:")),
        "label_not_text_in_next_only": good(
            ("      yes: n_done\n", "      yes: n_done\n      2: n_done\n")
        ),
        "label_reserved": good(("no:", "__no__:")),
        "label_bad_syntax": good(("no:", "'not sure':")),
        "label_without_next": good(("      no: n_done\n", "")),
        "next_without_label_close": good(
            ("      no: n_done\n", "      no: n_done\n      noo: n_done\n")
        ),
        "next_without_label_far": good(
            ("      no: n_done\n", "      no: n_done\n      zzzzzz: n_done\n")
        ),
        "reserved_next_keys_need_no_label": good(
            (
                "      no: n_done\n",
                "      no: n_done\n      __other__: n_done\n      __unknown__: n_done\n",
            )
        ),
        "next_without_label_when_accepts_is_broken": good(
            ("    accepts:\n      yes: はい\n      no: いいえ\n", "    accepts: はい\n"),
            ("      no: n_done\n", "      no: n_done\n      maybe: n_nowhere\n"),
        ),
        # --- tell and collect nodes ---------------------------------------------------------
        "tell_next_missing": flow("- id: n_start\n  kind: tell\n  say: 伝える\n"),
        "tell_next_mapping": flow(
            "- id: n_start\n  kind: tell\n  say: 伝える\n  next: {a: n_done}\n"
        ),
        "tell_next_number": flow("- id: n_start\n  kind: tell\n  say: 伝える\n  next: 3\n"),
        "collect_next_missing": edit(
            collect("phone: 電話番号\n"), ("    next: n_done\n  - id", "  - id")
        ),
        "collect_next_list": edit(
            collect("phone: 電話番号\n"), ("next: n_done\n  - id", "next: [n_done]\n  - id")
        ),
        "collect_slots_missing": edit(collect(""), ("    slots:\n", "")),
        "collect_slots_empty": edit(collect(""), ("slots:\n", "slots: {}\n")),
        "collect_slots_text": edit(collect(""), ("slots:\n", "slots: 電話番号\n")),
        "slot_name_not_text": collect("1: 何か\n"),
        "slot_name_bad_syntax": collect("order-id: 注文番号\n"),
        "slot_asks_nothing": collect("order_id: ''\nphone: '  '\n"),
        "slot_not_text_or_mapping": collect("order_id: [注文番号]\nphone: 3\nemail:\n"),
        "slot_unknown_key_close": collect("order_id: {ask: 注文番号, patern: 'A[0-9]+'}\n"),
        "slot_unknown_key_far": collect("order_id: {ask: 注文番号, colour: blue, 5: x}\n"),
        "slot_without_ask": collect("order_id: {required: true}\n"),
        "slot_ask_pattern_hint_not_text": collect("order_id: {ask: 3, pattern: 5, hint: [a]}\n"),
        "slot_required_yes": collect("order_id: {ask: 注文番号, required: yes}\n"),
        "slot_required_other_yaml_1_1_words": collect(
            "".join(f"s_{w}: {{ask: 質問, required: {w}}}\n" for w in ("no", "On", "OFF", "y", "n"))
        ),
        "slot_required_number": collect("order_id: {ask: 注文番号, required: 1}\n"),
        "slot_pattern_invalid": collect("order_id: {ask: 注文番号, pattern: 'A[0-9'}\n"),
        "slot_pattern_refused_by_re2": collect("order_id: {ask: 注文番号, pattern: '(A)\\1'}\n"),
        "slot_pattern_too_long": collect(f"order_id: {{ask: 注文番号, pattern: '{'A' * 1001}'}}\n"),
        "slot_pattern_without_hint": collect(
            "order_id: {ask: 注文番号, pattern: 'A[0-9]{5}'}\n"
            "phone: {ask: 電話, pattern: '[0-9]+', hint: '  '}\n"
        ),
        "slot_pattern_with_hint": collect(
            "order_id: {ask: 注文番号, pattern: 'A[0-9]{5}', hint: A と数字5桁}\n"
        ),
        "slot_types_of_every_kind": collect(
            "amount: {ask: 金額, type: number}\n"
            "count: {ask: 個数, type: integer, hint: 1 以上}\n"
            "paid_on: {ask: 支払日, type: date, required: true}\n"
            "paid: {ask: 支払済み, type: boolean}\n"
            "via: {ask: 方法, type: choice, options: [card, bank_transfer]}\n"
            "note: {ask: メモ, type: text, pattern: '[a-z]+', hint: 英小文字}\n"
        ),
        "slot_type_unknown": collect("amount: {ask: 金額, type: money}\n"),
        "slot_type_not_text": collect("amount: {ask: 金額, type: [number]}\n"),
        "slot_type_with_pattern": collect(
            "amount: {ask: 金額, type: number, pattern: '[0-9]+', hint: 数字}\n"
        ),
        "slot_options_without_choice": collect("amount: {ask: 金額, options: [a, b]}\n"),
        "slot_choice_without_options": collect("via: {ask: 方法, type: choice}\n"),
        "slot_choice_options_not_a_list": collect(
            "via: {ask: 方法, type: choice, options: card}\n"
        ),
        "slot_choice_option_not_a_label": collect(
            "via: {ask: 方法, type: choice, options: [card, 'bank transfer']}\n"
        ),
        "slot_choice_options_one_to_the_rule": collect(
            "via: {ask: 方法, type: choice, options: [bank_transfer, Bank-Transfer]}\n"
        ),
        "slot_choice_too_many_options": collect(
            "via: {ask: 方法, type: choice, options: ["
            + ", ".join(f"o{i}" for i in range(51))
            + "]}\n"
        ),
        # --- references ---------------------------------------------------------------------
        "duplicate_node_id": GOOD
        + "  - id: n_done\n    kind: end\n    say: 二つ目\n    outcome: resolved\n",
        "duplicate_node_id_hides_a_cycle": good(("no: n_done", "no: n_start"))
        + "  - id: n_done\n    kind: end\n    say: 二つ目\n    outcome: resolved\n",
        "slot_named_like_a_node": collect("n_done: 何か\n"),
        "slot_name_used_twice": flow(
            "- id: n_start\n  kind: collect\n  say: 集める\n  slots: {phone: 電話番号}\n"
            "  next: n_more\n"
            "- id: n_more\n  kind: collect\n  say: もう一度\n  slots: {phone: 電話番号}\n"
            "  next: n_done\n",
            top="on_unknown: escalate\n",
        ),
        "bad_entry_close": good(("entry: n_start", "entry: n_strat")) + ORPHAN,
        "bad_entry_far": good(("entry: n_start", "entry: n_zzzzzzzz")),
        "unknown_category_close": good(("category: payments", "category: payment")),
        "unknown_category_far": good(("category: payments", "category: zzzzzz")),
        "unknown_category_none_defined": Case(GOOD, categories={}),
        "bad_target_of_an_ask_close": good(("no: n_done", "no: n_dnoe")),
        "bad_target_of_an_ask_far": good(("no: n_done", "no: n_nowhere")),
        "bad_target_of_a_tell_close": flow(
            "- id: n_start\n  kind: tell\n  say: 案内\n  next: n_dnoe\n"
        ),
        "bad_target_of_a_tell_far": flow(
            "- id: n_start\n  kind: tell\n  say: 案内\n  next: n_nowhere\n"
        ),
        "bad_target_of_a_collect": edit(
            collect("phone: 電話番号\n"), ("next: n_done\n  - id", "next: nope\n  - id")
        ),
        # --- the graph ----------------------------------------------------------------------
        "unreachable": GOOD + ORPHAN,
        "self_loop": good(("no: n_done", "no: n_start")),
        "cycle_of_two": flow(
            "- id: n_start\n  kind: tell\n  say: 一\n  next: n_a\n"
            "- id: n_a\n  kind: ask\n  say: 二\n  accepts: {again: もう一度, done: 終わり}\n"
            "  next: {again: n_b, done: n_done}\n"
            "- id: n_b\n  kind: tell\n  say: 三\n  next: n_a\n"
        ),
        "cycle_with_a_third_node": flow(CYCLE_WITH_A_THIRD),
        "dead_end": flow(DEAD_END),
        "dead_end_before_a_loop_of_an_ask_and_a_collect": flow(
            "- id: n_start\n  kind: ask\n  say: 分岐\n  accepts: {a: A, b: B}\n"
            "  next: {a: n_loop, b: n_done}\n"
            "- id: n_loop\n  kind: tell\n  say: 入口\n  next: n_x\n"
            "- id: n_x\n  kind: ask\n  say: 回る\n  accepts: {p: P}\n  next: {p: n_c}\n"
            "- id: n_c\n  kind: collect\n  say: 集める\n  slots: {phone: 電話番号}\n  next: n_x\n",
            top="on_unknown: escalate\n",
        ),
        "no_dead_end_before_a_label_without_next": flow(
            "- id: n_start\n  kind: ask\n  say: 分岐\n  accepts: {a: A, b: B}\n"
            "  next: {a: n_loop, b: n_done}\n"
            "- id: n_loop\n  kind: tell\n  say: 入口\n  next: n_x\n"
            "- id: n_x\n  kind: ask\n  say: 回る\n  accepts: {p: P, q: Q}\n  next: {p: n_y}\n"
            "- id: n_y\n  kind: tell\n  say: 戻る\n  next: n_x\n"
        ),
        "cycle_with_two_more_nodes": flow(
            CYCLE_WITH_A_THIRD.replace(
                "accepts: {back: 戻る, c: C}", "accepts: {back: 戻る, c: C, d: D}"
            ).replace("next: {back: n_a, c: n_c}", "next: {back: n_a, c: n_c, d: n_d}")
            + "- id: n_d\n  kind: tell\n  say: 五\n  next: n_a\n"
        ),
        "everything_at_once": flow(
            "- id: n_start\n  kind: ask\n  say: 分岐\n  accepts: {a: A, b: B, c: C}\n"
            "  next: {a: n_loop, b: n_nowhere}\n"
            "- id: n_loop\n  kind: tell\n  say: 回る\n  next: n_loop\n"
            "- id: n_orphan\n  kind: end\n  say: 誰も来ない\n  outcome: resolved\n",
            end=False,
        ),
        "schema_error_and_cycle": good(
            ("no: n_done", "no: n_start"), ("    say: 質問する\n", "    sya: 質問する\n")
        ),
        # --- warnings of a built flow --------------------------------------------------------
        "unfoldable_fanout": fold(
            "{a: A, b: B, c: C, d: D}", "{a: n_done, b: n_done, c: n_done, d: n_done}"
        ),
        "unfoldable_fanout_of_a_later_node": fold(
            "{a: A, b: B}",
            "{a: n_many, b: n_done}",
            "- id: n_many\n  kind: ask\n  say: 多い\n  accepts: {p: P, q: Q}\n"
            "  next: {p: n_done, q: n_done}\n",
            top="on_unknown: broaden\nmax_branch_fanout: 1\n",
        ),
        "unfoldable_depth": fold("{a: A, b: B}", "{a: n_1, b: n_done}", CHAIN),
        "unfoldable_depth_set_lower": fold(
            "{a: A, b: B}",
            "{a: n_2, b: n_done}",
            CHAIN[CHAIN.index("- id: n_2") :],
            top="on_unknown: broaden\nbranch_depth: 1\n",
        ),
        "unfoldable_collect_in_a_branch": fold(
            "{a: A, b: B}",
            "{a: n_ids, b: n_done}",
            "- id: n_ids\n  kind: collect\n  on_unknown: escalate\n  say: 集める\n"
            "  slots: {phone: 電話番号}\n  next: n_done\n",
        ),
        "unfoldable_collect_with_a_required_slot": collect(
            "phone: {ask: 電話番号, required: true}\n", top="on_unknown: broaden\n"
        ),
        "unfoldable_node_broadens_under_an_escalating_flow": fold(
            "{a: A, b: B, c: C, d: D}",
            "{a: n_done, b: n_done, c: n_done, d: n_done}",
            top="on_unknown: escalate\n",
        ).replace("    kind: ask\n", "    kind: ask\n    on_unknown: broaden\n"),
        "foldable_under_broaden": fold("{a: A, b: B}", "{a: n_done, b: n_done}"),
        "similar_labels": fold(
            "{wrong_item: A, Wrong-Item: B, form: C, from: D, E01: E, E02: F}",
            "{wrong_item: n_done, Wrong-Item: n_done, form: n_done, from: n_done, "
            "E01: n_done, E02: n_done}",
            top="on_unknown: escalate\n",
        ),
        "check_clean": check(
            "- if: amount > 100.0\n  next: n_big\n"
            "- if: since < today - duration('720h') || has(note) && note == 'x'\n"
            "  next: n_big\n"
        ),
        "check_without_when_or_else": check("[]\n", else_=""),
        "check_when_not_a_list": check("{if: amount > 1.0, next: n_big}\n"),
        "check_condition_without_if_and_with_an_unknown_key": check(
            "- next: n_big\n  then: n_done\n"
        ),
        "check_condition_too_long": check(f"- if: {'a' * 501}\n  next: n_big\n"),
        "check_targets_name_no_node": check(
            "- if: amount > 1.0\n  next: n_bigg\n", else_="  else: n_donee\n"
        ),
        "bad_condition_syntax": check("- if: amount >\n  next: n_big\n"),
        "bad_condition_unknown_name": check("- if: amont > 1.0\n  next: n_big\n"),
        "bad_condition_compares_across_types": check("- if: amount > 100\n  next: n_big\n"),
        "bad_condition_not_true_or_false": check("- if: amount + 1.0\n  next: n_big\n"),
        "unset_value_optional_slot": check("- if: note == 'x'\n  next: n_big\n"),
        "shadowed_condition": check(
            "- if: 1 < 2\n  next: n_big\n- if: amount > 1.0\n  next: n_done\n"
        ),
        "lookup_clean": lookup(),
        "lookup_unfoldable_in_a_branch": fold(
            "{a: A, b: B}",
            "{a: n_look, b: n_done}",
            "- id: n_look\n  kind: lookup\n  say: 調べる\n  call: orders\n"
            "  returns: {found: ある}\n  next: {found: n_done}\n",
        ),
        "lookup_without_call_returns_or_next": lookup(
            ("    call: orders\n", ""),
            ("    returns:\n      shipped: 出荷済み\n      pending: 準備中\n", ""),
            (_LOOKUP_NEXT, ""),
        ),
        "lookup_of_every_wrong_shape": lookup(
            ("call: orders", "call: Orders API"),
            ("send: [order_id]", "send: order_id"),
            (
                "      pending: 準備中\n",
                "      pending: 3\n      __late: 遅延\n      'yes please': はい\n",
            ),
            ("shipped_on: date", "shipped_on: choice\n      2: text\n      paid: money"),
            ("    next:\n      shipped", "    on_stuck: 3\n    next:\n      shipped"),
        ),
        "lookup_returns_empty_and_next_a_node_id": lookup(
            ("    returns:\n      shipped: 出荷済み\n      pending: 準備中\n", "    returns: {}\n"),
            (_LOOKUP_NEXT, "    next: n_done\n"),
        ),
        "lookup_references_that_go_nowhere": lookup(
            ("send: [order_id]", "send: [ordr_id]"),
            ("      pending: n_done\n", "      pendng: n_done\n      __other__: n_done\n"),
            ("__error__: n_done", "__error__: n_dnoe"),
        ),
        "lookup_set_keys_named_like_other_values": lookup(
            ("shipped_on: date", "shipped_on: date\n      order_id: text\n      n_check: text"),
        ),
        "lookup_sends_a_value_some_path_leaves_unset": lookup(
            ("send: [order_id]", "send: [order_id, note, n_status]"),
        ),
        "lookup_value_read_after_its_error_route": lookup(
            ("__error__: n_done", "__error__: n_check"),
        ),
        "unfoldable_check_in_a_branch": fold(
            "{a: A, b: B}",
            "{a: n_chk, b: n_done}",
            "- id: n_chk\n  kind: check\n  say: 確かめる\n"
            "  when: [{if: n_start == 'a', next: n_done}]\n  else: n_done\n",
        ),
        "unknown_route_needs_no_fold": fold(
            "{a: A, b: B, c: C, d: D}",
            "{a: n_done, b: n_done, c: n_done, d: n_done, __unknown__: n_done}",
        ),
    }.items()
}


def recorded_case(case: Case) -> dict[str, Any]:
    built, findings = build_flow(
        case.text, categories=case.categories, file=FILE, expected_id=case.expected_id
    )
    return {"built": built is not None, "findings": findings}


# --- categories.yaml ----------------------------------------------------------------------

CATEGORY_CASES = {
    "clean": "payments:\n  title: 決済\n  description: 支払い\naccount: {title: アカウント}\n",
    "id_not_text": "1: {title: 一}\nnull: {title: 無}\n1.5: {title: 半}\n",
    "id_boolean": "true: {title: 真}\n",
    "id_bad_syntax": "bad-id: {title: 悪い}\n'a b': {title: 空白}\n",
    "entry_not_a_mapping": "payments: 決済\naccount:\nother: [a]\n",
    "unknown_key_close": "payments: {titel: 決済}\n",
    "unknown_key_far_and_not_text": "payments: {title: 決済, colour: blue, 3: x}\n",
    "title_missing": "payments: {description: 支払い}\n",
    "title_and_description_not_text": "payments: {title: 3, description: [a]}\n",
    "good_entry_kept_beside_a_broken_one": "good: {title: 良い}\nbad: {titel: 悪い}\n",
    "not_a_mapping": "- payments\n- account\n",
    "does_not_parse": "payments: {title: [\n",
}


def recorded_categories(text: str, directory: Path) -> dict[str, Any]:
    path = directory / "categories.yaml"
    path.write_text(text, encoding="utf-8")
    categories, findings = load_categories(path)
    return {
        "categories": None if categories is None else list(categories),
        "findings": relative(findings, directory, "flows"),
    }


# --- directories --------------------------------------------------------------------------

DIRECTORIES = {
    "flows": REPO / "flows",
    "flows_broken": BROKEN_FLOWS,
}


def relative(findings: list[Finding], directory: Path, shown: str) -> list[Finding]:
    """The findings with their file named below ``shown`` instead of ``directory``."""
    result = []
    for found in findings:
        if "file" in found:
            name = Path(found["file"]).relative_to(directory).as_posix()
            found = {**found, "file": f"{shown}/{name}"}
        result.append(found)
    return result


def recorded_directory(directory: Path) -> dict[str, Any]:
    catalog = load_catalog(directory)
    return {
        "flows": sorted(catalog.flows),
        "findings": relative(
            list(catalog.findings), directory, directory.relative_to(REPO).as_posix()
        ),
    }


# --- comparing ----------------------------------------------------------------------------


def compare(file_name: str, cases: Mapping[str, Callable[[], dict[str, Any]]]) -> None:
    """Compare every case with its recording in ``file_name`` (or record them all)."""

    def case_by_case(got: dict[str, Any], want: dict[str, Any]) -> None:
        assert list(got) == list(want), "the cases differ from the recorded ones"
        differ = [name for name in got if got[name] != want[name]]
        for name in differ:
            assert got[name] == want[name], f"{name} (and {len(differ) - 1} more): {differ}"

    check_recording(
        RECORDED / file_name, {name: make() for name, make in cases.items()}, case_by_case
    )


def test_lint_findings_are_as_recorded() -> None:
    compare(
        "lint_findings.json",
        {name: (lambda case=case: recorded_case(case)) for name, case in CASES.items()},
    )


def test_categories_findings_are_as_recorded(tmp_path: Path) -> None:
    def make(name: str, text: str) -> Callable[[], dict[str, Any]]:
        directory = tmp_path / name
        directory.mkdir()
        return lambda: recorded_categories(text, directory)

    compare(
        "lint_categories.json", {name: make(name, text) for name, text in CATEGORY_CASES.items()}
    )


def test_directory_findings_are_as_recorded() -> None:
    compare(
        "lint_directories.json",
        {name: (lambda d=d: recorded_directory(d)) for name, d in DIRECTORIES.items()},
    )


def test_every_case_but_the_clean_ones_finds_something() -> None:
    clean = {
        name
        for name, case in CASES.items()
        if not build_flow(case.text, categories=case.categories, expected_id=case.expected_id)[1]
    }
    assert clean == {
        "clean",
        "check_clean",
        "lookup_clean",
        "flow_id_matches_its_file",
        "flow_version_text_and_number_are_fine",
        "reserved_next_keys_need_no_label",
        "slot_pattern_with_hint",
        "slot_types_of_every_kind",
        "foldable_under_broaden",
        "unknown_route_needs_no_fold",
    }


def test_the_cases_cover_every_code() -> None:
    """Every code but those judged against a live flow (test_lint_live has them)."""
    found = {
        f["code"]
        for case in CASES.values()
        for f in build_flow(case.text, categories=case.categories, expected_id=case.expected_id)[1]
    }
    assert found == {*ERROR_CODES, *WARNING_CODES} - set(AGAINST_LIVE_CODES)
