"""``manage.py lint`` and ``manage.py show``."""

from __future__ import annotations

import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from tests.support.paths import BROKEN_FLOWS, CLEAN_FLOWS


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_lint_clean_directory_prints_the_summary() -> None:
    assert run("lint", str(CLEAN_FLOWS)).splitlines() == ["2 flows, 0 errors, 0 warnings"]


def test_lint_defaults_to_the_flows_setting() -> None:
    with override_settings(GUIDEPOST_FLOWS_DIR=CLEAN_FLOWS):
        assert run("lint").splitlines() == ["2 flows, 0 errors, 0 warnings"]


def test_lint_fails_on_an_error_and_prints_every_finding() -> None:
    out = StringIO()
    with pytest.raises(CommandError, match="lint failed with 1 error$"):
        call_command("lint", str(BROKEN_FLOWS), stdout=out)
    assert out.getvalue().splitlines() == [
        "error bad_target broken/n_start/next: next 'n_nowhere' names no node: "
        f"point it at an existing node id ({BROKEN_FLOWS / 'broken.yaml'}:9)",
        "2 flows, 1 error, 0 warnings",
    ]


def test_lint_accepts_single_files() -> None:
    assert run("lint", str(CLEAN_FLOWS / "refund.yaml")).splitlines() == [
        "1 flow, 0 errors, 0 warnings"
    ]


def test_lint_with_only_warnings_succeeds(tmp_path: Path) -> None:
    (tmp_path / "categories.yaml").write_text("payments: {title: 決済}\n", encoding="utf-8")
    (tmp_path / "quiet.yaml").write_text(
        "id: quiet\ntitle: 静か\ncategory: payments\nentry: n_done\n"
        "nodes:\n  - {id: n_done, kind: end, say: '', outcome: resolved}\n",
        encoding="utf-8",
    )
    lines = run("lint", str(tmp_path)).splitlines()
    assert lines[0].startswith("warning empty_say quiet/n_done: ")
    assert lines[1] == "1 flow, 0 errors, 1 warning"


@pytest.mark.parametrize("flow_id", ["con", "tests"])
def test_lint_refuses_a_flow_file_named_like_a_device_or_the_tests_folder(
    tmp_path: Path, flow_id: str
) -> None:
    (tmp_path / "categories.yaml").write_text("payments: {title: 決済}\n", encoding="utf-8")
    path = tmp_path / f"{flow_id}.yaml"
    path.write_text(
        f"id: {flow_id}\ntitle: 名前\ncategory: payments\nentry: n_done\n"
        "nodes:\n  - {id: n_done, kind: end, say: 締める, outcome: resolved}\n",
        encoding="utf-8",
    )
    out = StringIO()
    with pytest.raises(CommandError, match="lint failed with 1 error$"):
        call_command("lint", str(tmp_path), stdout=out)
    reason = {
        "con": "Windows reserves CON for a device, so no file there can be named con.yaml",
        "tests": "tests/ is the folder of the flows' tests",
    }[flow_id]
    assert out.getvalue().splitlines() == [
        f"error schema {flow_id}: flow id '{flow_id}' cannot be used: {reason}; "
        f"choose another id ({path}:1)",
        "1 flow, 1 error, 0 warnings",
    ]


def test_lint_refuses_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no such file"):
        call_command("lint", str(tmp_path / "nope"), stdout=StringIO())


def test_a_directory_without_categories_yaml_is_one_error_naming_it(tmp_path: Path) -> None:
    for name in ("refund.yaml", "login_help.yaml"):
        shutil.copy(CLEAN_FLOWS / name, tmp_path)
    out = StringIO()
    with (
        override_settings(GUIDEPOST_FLOWS_DIR=tmp_path),
        pytest.raises(CommandError, match="lint failed with 1 error$"),
    ):
        call_command("lint", stdout=out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines  # no unknown_category for each flow
    assert lines[0].startswith("error schema categories: categories.yaml is missing")
    assert lines[0].endswith(f"({tmp_path / 'categories.yaml'})")
    assert lines[1] == "2 flows, 1 error, 0 warnings"


def test_a_file_outside_the_flows_directory_is_checked_against_its_categories(
    tmp_path: Path,
) -> None:
    shutil.copy(CLEAN_FLOWS / "refund.yaml", tmp_path)
    with override_settings(GUIDEPOST_FLOWS_DIR=CLEAN_FLOWS):
        assert run("lint", str(tmp_path / "refund.yaml")).splitlines() == [
            "1 flow, 0 errors, 0 warnings"
        ]


def test_lint_takes_the_categories_file_it_is_given(tmp_path: Path) -> None:
    shutil.copy(CLEAN_FLOWS / "refund.yaml", tmp_path)
    (tmp_path / "categories.yaml").write_text("account: {title: A}\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere.yaml"
    elsewhere.write_text("payments: {title: P}\n", encoding="utf-8")
    out = StringIO()
    with pytest.raises(CommandError):  # the categories beside the file lack payments
        call_command("lint", str(tmp_path / "refund.yaml"), stdout=out)
    assert "unknown_category" in out.getvalue()
    lines = run("lint", str(tmp_path / "refund.yaml"), "--categories", str(elsewhere))
    assert lines.splitlines() == ["1 flow, 0 errors, 0 warnings"]


def test_lint_refuses_a_missing_categories_file_option(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="nope.yaml: no such file"):
        call_command(
            "lint", str(CLEAN_FLOWS), "--categories", str(tmp_path / "nope.yaml"), stdout=StringIO()
        )


def test_show_prints_the_tree() -> None:
    lines = run("show", "refund", "--flows", str(CLEAN_FLOWS)).splitlines()
    assert lines[0] == "refund — 返金を求められた (version 2, category payments)"
    assert lines[1].startswith("on_unknown: ")
    assert lines[2] == "[ask] n_reason — 返金を求める理由を確認する"
    assert "└─ __unknown__ → n_order (see above)" in lines


def test_show_as_mermaid_prints_a_flowchart() -> None:
    lines = run("show", "refund", "--flows", str(CLEAN_FLOWS), "--format", "mermaid").splitlines()
    assert lines[:2] == ["flowchart TD", "  %% refund — 返金を求められた (version 2)"]
    assert lines[2] == '  n1{"n_reason: 返金を求める理由を確認する"}'


def test_show_unknown_flow_names_the_closest_ids() -> None:
    with pytest.raises(CommandError, match="closest: refund"):
        call_command("show", "refunds", "--flows", str(CLEAN_FLOWS), stdout=StringIO())


def test_show_flow_with_errors_says_to_lint_it() -> None:
    with pytest.raises(CommandError, match="lint errors"):
        call_command("show", "broken", "--flows", str(BROKEN_FLOWS), stdout=StringIO())
