"""The static files storage never fails a page over a stale or missing collection."""

from __future__ import annotations

import json
from pathlib import Path

from guidepost.staticfiles import StaticFilesStorage


def storage_with_manifest(root: Path, entries: dict[str, str]) -> StaticFilesStorage:
    manifest = {"paths": entries, "version": "1.1", "hash": "x"}
    (root / "staticfiles.json").write_text(json.dumps(manifest), encoding="utf-8")
    return StaticFilesStorage(location=str(root), base_url="/static/")


def test_a_collected_file_links_its_hashed_name(tmp_path: Path) -> None:
    storage = storage_with_manifest(tmp_path, {"a.css": "a.0123abcd.css"})
    assert storage.url("a.css") == "/static/a.0123abcd.css"


def test_a_file_added_after_the_last_collection_links_its_plain_name(tmp_path: Path) -> None:
    storage = storage_with_manifest(tmp_path, {"a.css": "a.0123abcd.css"})
    assert storage.url("guidepost/favicon.svg") == "/static/guidepost/favicon.svg"


def test_before_any_collection_every_file_links_its_plain_name(tmp_path: Path) -> None:
    storage = StaticFilesStorage(location=str(tmp_path), base_url="/static/")
    assert storage.url("a.css") == "/static/a.css"
