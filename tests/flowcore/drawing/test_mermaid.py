"""A flow as a Mermaid flowchart (``show --format mermaid``). Every bundled flow was drawn
by Mermaid 11.17 in Chromium once, by hand (ADR 0113); these pin the text it was given."""

from __future__ import annotations

import html
import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from flowcore.drawing.mermaid import SAY_SHOWN, render_mermaid
from flowcore.flow.building import build_flow
from flowcore.flow.model import Category, EndNode, Flow, TellNode

CATEGORIES = {"payments": Category("payments", "Payments")}
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
      E02: end
      __other__: n_card
      __unknown__: n_ids
  - id: n_card
    kind: tell
    say: カード会社に連絡してもらう
    next: end
  - id: n_ids
    kind: collect
    say: 注文番号を集める
    slots:
      order_id: {ask: 注文番号, required: true}
      phone: 電話番号
    next: end
  - id: end
    kind: end
    say: 締める
    outcome: resolved
"""

CHART = """\
flowchart TD
  %% demo — デモ (version 2)
  n1{"n_code: エラーコードを確認する"}
  n2["n_card: カード会社に連絡してもらう"]
  n3[/"n_ids: 注文番号を集める<br/>slots: order_id*, phone"/]
  n4(["end: 締める → resolved"])
  n1 -->|"E01"| n2
  n1 -->|"E02"| n4
  n1 -->|"other"| n2
  n1 -.->|"unknown"| n3
  n2 --> n4
  n3 --> n4"""


def test_each_kind_is_drawn_in_its_shape_and_an_ask_labels_its_edges() -> None:
    flow, findings = build_flow(FLOW, categories=CATEGORIES)
    assert flow is not None, findings
    assert render_mermaid(flow) == CHART


def test_a_node_named_like_a_mermaid_keyword_is_drawn_under_a_name_of_its_own() -> None:
    flow, _ = build_flow(FLOW, categories=CATEGORIES)
    assert flow is not None
    chart = render_mermaid(flow)
    # `end` closes a subgraph in Mermaid: the node named end is n4, its id only in the label.
    assert not re.search(r"^\s*end\b|--> end|\bend\[|\bend\(", chart, re.MULTILINE), chart


def tell(say: str) -> TellNode:
    return TellNode(id="t", say=say, next="e")


def flow_of(*nodes: TellNode | EndNode, entry: str = "t") -> Flow:
    """A flow of ``nodes`` in this order, ending at an end ``e`` (added when missing)."""
    listed = {node.id: node for node in nodes}
    listed.setdefault("e", EndNode(id="e", say="Done", outcome="resolved"))
    return Flow(id="f", title="T", category="payments", entry=entry, nodes=listed)


def test_the_entry_comes_first_whatever_the_authors_order() -> None:
    flow = flow_of(EndNode(id="e", say="Done", outcome="resolved"), tell("Start"), entry="t")
    assert render_mermaid(flow).splitlines()[2] == '  n2["t: Start"]'


def test_a_long_say_is_cut_with_an_ellipsis() -> None:
    label = render_mermaid(flow_of(tell("x" * 200))).splitlines()[2]
    assert label == f'  n1["t: {"x" * (SAY_SHOWN - 1)}…"]'


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=60))
@example('an author wrote "#quot;" & <b>#35;</b>')  # what would read as entity codes
def test_an_authors_words_are_shown_never_read_as_syntax(say: str) -> None:
    label = render_mermaid(flow_of(tell(say))).splitlines()[2]
    match = re.fullmatch(r'  n1\["(.*)"\]', label)
    assert match, label
    inside = match[1]
    assert '"' not in inside and "<" not in inside and ">" not in inside
    said = say if len(say) <= SAY_SHOWN else say[: SAY_SHOWN - 1] + "…"
    assert unescaped(inside) == " ".join(f"t: {said}".split())


def unescaped(text: str) -> str:
    """Mermaid's entity codes (``#quot;``, ``#35;``) read back as characters."""
    return re.sub(
        r"#(\w+);", lambda m: html.unescape(f"&#{m[1]};" if m[1].isdigit() else f"&{m[1]};"), text
    )
