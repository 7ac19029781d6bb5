"""check_draft: which texts a draft intake refuses (stored nowhere) and what it keeps."""

from __future__ import annotations

import pytest

from flowcore.common.errors import Refusal
from flowcore.flow.drafts import DRAFT_REFUSED, check_draft, source_lines
from flowcore.flow.findings import finding
from flowcore.flow.model import Category

CATEGORIES = {"payments": Category("payments", "決済")}
CLEAN = """\
id: tiny
title: 小さな手順
category: payments
entry: n_done
nodes:
  - id: n_done
    kind: end
    outcome: resolved
    say: 締める
"""

REFUSED = {
    "no-id": (
        "title: 名前のない手順\n",
        "the flow has no 'id': a draft must name its flow (line 1)",
    ),
    "id-not-text": ("id: 5\ntitle: x\n", "'id' must be text like refund_request, not 5 (line 1)"),
    "id-bad-syntax": (
        "title: x\nid: Refund Request\n",
        "flow id 'Refund Request' must be 1-64 lowercase letters, digits or _ "
        "(like payment_failed) (line 2)",
    ),
    "does-not-parse": ("id: a\ntitle: [unclosed\n", "the YAML does not parse"),
    "not-a-mapping": ("- id: a\n", "a flow is a mapping of keys"),
    "empty": ("", "a flow is a mapping of keys"),
    "python-tag": ("id: x\ntitle: !!python/object:os.system x\n", "the tag !!python/object"),
}


@pytest.mark.parametrize(("text", "reason"), REFUSED.values(), ids=REFUSED.keys())
def test_text_that_is_not_a_mapping_with_a_valid_id_is_refused_with_the_deciding_finding(
    text: str, reason: str
) -> None:
    with pytest.raises(Refusal) as refused:
        check_draft(text, categories=CATEGORIES)
    assert refused.value.error == DRAFT_REFUSED
    assert refused.value.reason.startswith(reason)
    assert refused.value.retryable is True


def test_a_refusal_of_unsafe_yaml_says_what_plain_yaml_a_draft_may_be() -> None:
    with pytest.raises(Refusal) as refused:
        check_draft("id: x\nnodes: [" + ",".join(["1"] * 30_000) + "]\n", categories=CATEGORIES)
    assert refused.value.reason == (
        "the document holds more than 20000 values (each key, list item and text counts): "
        "split the procedure into smaller flows"
    )
    assert refused.value.next == (
        "Send plain YAML under 256 KiB: one mapping of at most 20000 values, no tags, "
        "few aliases, nesting under 32."
    )


def test_a_clean_flow_is_accepted_with_its_id_title_and_hash() -> None:
    check = check_draft(CLEAN, categories=CATEGORIES)
    assert (check.flow_id, check.title, check.ok) == ("tiny", "小さな手順", True)
    assert len(check.content_hash) == 64 and check.flow is not None


def test_lint_errors_do_not_refuse_a_draft_they_are_its_findings() -> None:
    check = check_draft(CLEAN.replace("payments", "nowhere"), categories=CATEGORIES)
    assert check.ok is False and check.flow is None
    assert [f["code"] for f in check.findings] == ["unknown_category"]


@pytest.mark.parametrize(
    "flow_id", ["categories", "tests", "con", "nul", "aux", "prn", "com1", "com9", "lpt1", "lpt9"]
)
def test_a_draft_named_like_a_catalog_file_or_a_windows_device_is_kept_with_a_schema_error(
    flow_id: str,
) -> None:
    check = check_draft(CLEAN.replace("id: tiny", f"id: {flow_id}"), categories=CATEGORIES)
    assert (check.flow_id, check.ok, check.flow) == (flow_id, False, None)
    ((found),) = check.findings
    assert (found["code"], found["where"], found.get("line")) == ("schema", flow_id, 1)
    assert found["message"].startswith(f"flow id '{flow_id}' cannot be used: ")
    assert found["message"].endswith("; choose another id")


def test_source_lines_keep_indentation_and_put_findings_beside_their_line() -> None:
    on_three = finding("error", "schema", "tiny", "bad", line=3)
    nowhere = finding("warning", "empty_say", "tiny", "no line")
    past_end = finding("error", "schema", "tiny", "past the end", line=99)
    loose, lines = source_lines(CLEAN, [on_three, nowhere, past_end])
    assert loose == (nowhere, past_end)
    assert [line.number for line in lines] == list(range(1, 10))
    assert lines[5].text == "  - id: n_done"
    assert lines[6].text == "    kind: end"
    assert lines[2].findings == (on_three,)
    assert all(not line.findings for line in lines if line.number != 3)


def test_findings_read_back_from_storage_get_the_spec_key_order_again() -> None:
    # PostgreSQL's jsonb returns keys shortest first; a repeated guide_draft must read
    # exactly like the first answer.
    from flowcore.flow.findings import in_key_order

    stored = {"code": "schema", "file": "f.yaml", "line": 3, "level": "error", "where": "x"}
    stored["message"] = "m"
    (again,) = in_key_order([stored])
    assert list(again) == ["level", "code", "where", "message", "file", "line"]
    assert again == stored


CHECKED = """\
id: tiny
title: 小さな手順
category: payments
entry: n_amount
nodes:
  - id: n_amount
    kind: collect
    say: 金額を聞く
    slots:
      amount: {ask: 金額, required: true, type: number}
    next: n_check
  - id: n_check
    kind: check
    say: 100 を超える返金は上長へ
    when:
      - if: amount > 100.0
        next: n_lead
    else: n_done
  - id: n_lead
    kind: end
    outcome: escalated
    say: 上長に回す
  - id: n_done
    kind: end
    outcome: resolved
    say: 締める
"""


def test_a_draft_may_propose_a_check_and_its_conditions_are_linted_with_their_line() -> None:
    check = check_draft(CHECKED, categories=CATEGORIES)
    assert check.ok is True and check.flow is not None
    broken = check_draft(CHECKED.replace("amount > 100.0", "amount > 100"), categories=CATEGORIES)
    assert broken.ok is False and broken.flow is None
    ((found),) = broken.findings
    assert (found["code"], found["where"], found.get("line")) == (
        "bad_condition",
        "tiny/n_check/when[0]",
        16,
    )
