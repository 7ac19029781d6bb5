"""The live catalog's reloads, in process: what each broken file does, logged once."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from flows_app.catalog import LiveCatalog
from tests.support.paths import CLEAN_FLOWS


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_without_categories_yaml_nothing_is_served_and_the_file_is_named_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shutil.copy(CLEAN_FLOWS / "refund.yaml", tmp_path)
    live = LiveCatalog(tmp_path, poll_seconds=0)
    assert live.get().flows == {}
    assert live.get().flows == {}
    assert errors_logged(caplog) == [
        f"{tmp_path / 'categories.yaml'} has lint errors; no flow is served until it can be "
        "read: error schema categories: categories.yaml is missing: create it with one "
        "`id: {title, description}` entry per category; each flow's category names one "
        f"({tmp_path / 'categories.yaml'})"
    ]


def test_a_categories_yaml_that_breaks_keeps_the_last_good_categories_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shutil.copytree(CLEAN_FLOWS, tmp_path, dirs_exist_ok=True)
    live = LiveCatalog(tmp_path, poll_seconds=0)
    before = live.get()
    (tmp_path / "categories.yaml").write_text("payments: [unclosed\n", encoding="utf-8")
    assert live.get().categories == before.categories
    assert set(live.get().flows) == {"login_help", "refund"}
    # Another file changes: reloaded, and the broken categories.yaml is not logged again.
    refund = tmp_path / "refund.yaml"
    refund.write_text(refund.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    assert live.get().flows["refund"].source.endswith("# edited\n")
    logged = errors_logged(caplog)
    assert len(logged) == 1, logged
    assert "the last good categories stay live" in logged[0]


def test_a_catalog_loaded_before_serving_is_served_without_a_second_load(tmp_path: Path) -> None:
    shutil.copytree(CLEAN_FLOWS, tmp_path, dirs_exist_ok=True)
    live = LiveCatalog(tmp_path, poll_seconds=0)
    loaded = live.load()
    assert set(loaded.flows) == {"login_help", "refund"}
    assert live.get() is loaded  # nothing changed on disk: not loaded again


def test_an_edit_after_the_load_before_serving_is_served_at_the_next_read(
    tmp_path: Path,
) -> None:
    shutil.copytree(CLEAN_FLOWS, tmp_path, dirs_exist_ok=True)
    live = LiveCatalog(tmp_path, poll_seconds=0)
    live.load()
    refund = tmp_path / "refund.yaml"
    refund.write_text(refund.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    assert live.get().flows["refund"].source.endswith("# edited\n")


def test_errors_found_by_the_load_before_serving_are_left_to_its_caller_and_not_logged_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shutil.copytree(CLEAN_FLOWS, tmp_path, dirs_exist_ok=True)
    (tmp_path / "broken.yaml").write_text("id: broken\n", encoding="utf-8")
    live = LiveCatalog(tmp_path, poll_seconds=0)
    assert live.load().files["broken.yaml"].errors
    refund = tmp_path / "refund.yaml"
    refund.write_text(refund.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    assert live.get().flows["refund"].source.endswith("# edited\n")
    assert errors_logged(caplog) == []
    (tmp_path / "broken.yaml").write_text("id: broken\ntitle: x\n", encoding="utf-8")
    live.get()
    assert [line.split(" has lint errors")[0] for line in errors_logged(caplog)] == [
        str(tmp_path / "broken.yaml")
    ]
