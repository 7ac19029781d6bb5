"""``unchanged_version``: a draft judged against the live flow of its id (spec §6)."""

from __future__ import annotations

import pytest

from flowcore.flow.building import build_flow
from flowcore.flow.drafts import check_draft
from flowcore.flow.lint.live import LiveRevision, lint_against_live
from flowcore.flow.model import Category, Flow

CATEGORIES = {"payments": Category("payments", "決済")}
LIVE = """\
id: tiny
title: 小さな手順
category: payments
version: "2024.2"
entry: n_done
nodes:
  - id: n_done
    kind: end
    outcome: resolved
    say: 締める
"""
REWORDED = LIVE.replace("say: 締める", "say: 丁寧に締める")


def flow(text: str) -> Flow:
    built, findings = build_flow(text, categories=CATEGORIES)
    assert built is not None, findings
    return built


def live(text: str = LIVE) -> LiveRevision:
    return LiveRevision.of(flow(text))


def test_a_change_that_keeps_the_live_version_is_an_error_at_the_version_line() -> None:
    assert lint_against_live(flow(REWORDED), live()) == [
        {
            "level": "error",
            "code": "unchanged_version",
            "where": "tiny",
            "message": "the live flow tiny is version 2024.2 and this draft changes it under "
            "the same version, so runs and the flow's history could not tell the two apart: "
            "set version: 2024.3 (or any version other than 2024.2)",
            "line": 4,
        }
    ]


@pytest.mark.parametrize(
    ("draft", "live_text"),
    [
        pytest.param(LIVE, LIVE, id="the-same-text"),
        pytest.param(REWORDED.replace('"2024.2"', '"2024.3"'), LIVE, id="a-new-version"),
        pytest.param(
            REWORDED.replace('version: "2024.2"\n', ""),
            LIVE.replace('version: "2024.2"\n', ""),
            id="no-version-live",
        ),
    ],
)
def test_nothing_is_said_of_the_same_text_a_new_version_or_a_live_flow_without_one(
    draft: str, live_text: str
) -> None:
    assert lint_against_live(flow(draft), live(live_text)) == []


def test_a_new_flow_has_nothing_to_be_checked_against() -> None:
    assert lint_against_live(flow(REWORDED), None) == []


def test_a_number_and_the_same_number_as_text_are_one_version() -> None:
    draft = flow(REWORDED.replace('"2024.2"', '"5"'))
    [found] = lint_against_live(draft, live(LIVE.replace('"2024.2"', "5")))
    assert found["message"].endswith("set version: 6 (or any version other than 5)")


def test_intake_reports_it_with_the_other_findings_and_the_draft_is_not_ok() -> None:
    check = check_draft(REWORDED, categories=CATEGORIES, live={"tiny": live()})
    assert [f["code"] for f in check.findings] == ["unchanged_version"]
    assert check.ok is False
    other = check_draft(REWORDED, categories=CATEGORIES, live={"other": live()})
    assert other.findings == [] and other.ok
