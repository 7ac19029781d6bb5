"""The text tree of a flow."""

from __future__ import annotations

from flowcore.drawing.text_tree import render_tree
from flowcore.flow.building import build_flow
from flowcore.flow.model import Category

FLOW = """\
id: demo
title: デモ
category: payments
version: 2
entry: n_code
nodes:
  - id: n_code
    kind: ask
    say: エラーコードを確認する
    accepts:
      E01: カード拒否
      E02: 残高不足
    next:
      E01: n_card
      E02: n_done
      __unknown__: n_ids
  - id: n_card
    kind: tell
    say: カード会社に連絡してもらう
    next: n_done
  - id: n_ids
    kind: collect
    say: 注文番号を集める
    slots:
      order_id: {ask: 注文番号, required: true}
      phone: 電話番号
    next: n_done
  - id: n_done
    kind: end
    say: 締める
    outcome: resolved
"""

TREE = """\
demo — デモ (version 2, category payments)
on_unknown: escalate · max_unmatched: 3 · max_branch_fanout: 3 · branch_depth: 2
[ask] n_code — エラーコードを確認する
├─ E01: カード拒否 → [tell] n_card — カード会社に連絡してもらう
│  └─ next → [end] n_done — 締める ⇒ outcome: resolved
├─ E02: 残高不足 → n_done (see above)
└─ __unknown__ → [collect] n_ids — 注文番号を集める
   │  · order_id (required): 注文番号
   │  · phone: 電話番号
   └─ next → n_done (see above)"""


def test_render_tree_prints_each_node_once_and_references_shared_ones() -> None:
    flow, findings = build_flow(FLOW, categories={"payments": Category("payments", "決済")})
    assert flow is not None, findings
    assert render_tree(flow) == TREE


def test_render_tree_of_a_flow_without_version_shows_a_dash() -> None:
    flow, _ = build_flow(
        FLOW.replace("version: 2\n", ""), categories={"payments": Category("payments", "決済")}
    )
    assert flow is not None
    assert render_tree(flow).splitlines()[0] == "demo — デモ (version -, category payments)"


def test_render_tree_shows_conditions_patterns_hints_and_on_unknown() -> None:
    text = (
        FLOW.replace("entry: n_code\n", "entry: n_code\non_unknown: broaden\n")
        .replace(
            "    say: 注文番号を集める\n",
            "    say: 注文番号を集める\n    on_unknown: escalate\n",
        )
        .replace(
            "order_id: {ask: 注文番号, required: true}",
            "order_id: {ask: 注文番号, required: true, pattern: 'A[0-9]{5}', hint: A と数字5桁}",
        )
    )
    flow, findings = build_flow(text, categories={"payments": Category("payments", "決済")})
    assert flow is not None, findings
    lines = render_tree(flow).splitlines()
    assert lines[1].startswith("on_unknown: broaden · ")
    assert "├─ E01: カード拒否 → [tell] n_card" in lines[3]
    assert lines[6] == "└─ __unknown__ → [collect] n_ids — 注文番号を集める (on_unknown: escalate)"
    assert (
        lines[7] == "   │  · order_id (required): 注文番号 · pattern: A[0-9]{5} · hint: A と数字5桁"
    )
