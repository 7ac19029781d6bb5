"""An instance's flows directory is a copy of the catalog the database holds (ADR 0081):
seeded from the first directory, copied into every other, edits imported when they lint,
and the database winning when a file and the catalog disagree.

In process, on the suite's database (SQLite, and PostgreSQL in CI's second pass); the
servers' side is tests/flows_app/test_catalog_instances.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flowcore.flow.building import content_hash
from flows_app.catalog_sync import MANIFEST, CatalogMirror
from flows_app.models import CatalogFile
from flows_app.selectors import catalog_id, catalog_revision
from flows_app.services import catalog_put
from tests.support.drafting import REFUND, REFUND_REWORDED, REFUND_TEXT
from tests.support.servers import copy_flows

pytestmark = pytest.mark.django_db(transaction=True)

PAYMENT = "payment_failed.yaml"


def stored(name: str) -> str | None:
    row = CatalogFile.objects.filter(name=name).first()
    return None if row is None else row.text


def two_directories(tmp_path: Path) -> tuple[CatalogMirror, CatalogMirror]:
    """Instance A seeded the catalog from its directory; instance B copied it into its own."""
    first = CatalogMirror(copy_flows(tmp_path / "a"))
    first.start()
    (tmp_path / "b").mkdir()
    second = CatalogMirror(tmp_path / "b")
    second.start()
    return first, second


def test_the_first_directory_seeds_an_empty_catalog_with_its_flows_categories_and_tests(
    flows_copy: Path,
) -> None:
    CatalogMirror(flows_copy).start()

    names = set(CatalogFile.objects.values_list("name", flat=True))
    assert {"categories.yaml", PAYMENT, "tests/payment_failed.yaml"} <= names
    assert stored(PAYMENT) == (flows_copy / PAYMENT).read_text(encoding="utf-8")
    assert json.loads((flows_copy / MANIFEST).read_text())["revision"] == catalog_revision()


def test_another_directory_becomes_a_copy_of_the_catalog_and_loses_what_the_catalog_lacks(
    tmp_path: Path,
) -> None:
    first = CatalogMirror(copy_flows(tmp_path / "a"))
    first.start()
    other = copy_flows(tmp_path / "b")
    (other / PAYMENT).write_text("id: payment_failed\nstale: true\n", encoding="utf-8")
    (other / "not_in_the_catalog.yaml").write_text("id: not_in_the_catalog\n", encoding="utf-8")
    (other / "tests" / "identity_check.yaml").unlink()

    CatalogMirror(other).start()

    assert (other / PAYMENT).read_text(encoding="utf-8") == stored(PAYMENT)
    assert not (other / "not_in_the_catalog.yaml").exists()
    assert (other / "tests" / "identity_check.yaml").is_file()
    assert stored("not_in_the_catalog.yaml") is None  # nothing of B's went into the catalog


def test_a_change_in_the_catalog_is_copied_into_every_directory_at_the_next_tick(
    tmp_path: Path,
) -> None:
    first, second = two_directories(tmp_path)

    catalog_put({f"{REFUND}.yaml": REFUND_REWORDED}, by="maria", via="approval")
    second.tick()

    assert (second.directory / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_REWORDED
    assert second.revision == catalog_revision()


def test_an_edit_that_lints_is_imported_and_reaches_the_other_directory(tmp_path: Path) -> None:
    first, second = two_directories(tmp_path)

    (second.directory / f"{REFUND}.yaml").write_text(REFUND_REWORDED, encoding="utf-8")
    second.tick()
    first.tick()

    row = CatalogFile.objects.get(name=f"{REFUND}.yaml")
    assert (row.text, row.via) == (REFUND_REWORDED, CatalogFile.Via.EDIT)
    assert (first.directory / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_REWORDED


def test_an_edit_with_lint_errors_stays_on_its_instance_and_the_catalog_keeps_the_last_good(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = two_directories(tmp_path)
    broken = REFUND_TEXT.replace("entry: n_order", "entry: n_nowhere")
    assert broken != REFUND_TEXT

    (second.directory / f"{REFUND}.yaml").write_text(broken, encoding="utf-8")
    second.tick()
    first.tick()

    assert stored(f"{REFUND}.yaml") == REFUND_TEXT
    assert (second.directory / f"{REFUND}.yaml").read_text(encoding="utf-8") == broken
    assert (first.directory / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT
    assert "does not lint: it is not published to the other instances" in caplog.text


def test_when_a_file_and_the_catalog_both_changed_the_catalog_wins(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = two_directories(tmp_path)
    local_edit = REFUND_TEXT.replace('version: "2024.3"', 'version: "local"')

    (second.directory / f"{REFUND}.yaml").write_text(local_edit, encoding="utf-8")
    catalog_put({f"{REFUND}.yaml": REFUND_REWORDED}, by="maria", via="approval")
    second.tick()

    assert stored(f"{REFUND}.yaml") == REFUND_REWORDED
    assert (second.directory / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_REWORDED
    assert "the catalog's text replaces it" in caplog.text


def test_an_import_based_on_an_older_copy_is_refused_as_a_conflict(flows_copy: Path) -> None:
    CatalogMirror(flows_copy).start()
    catalog_put({f"{REFUND}.yaml": REFUND_REWORDED}, by="maria", via="approval")

    result = catalog_put(
        {f"{REFUND}.yaml": "id: x\n"},
        by="file edit",
        via="edit",
        expected={f"{REFUND}.yaml": content_hash(REFUND_TEXT)},
    )

    assert result.conflicts == (f"{REFUND}.yaml",) and result.revision is None
    assert stored(f"{REFUND}.yaml") == REFUND_REWORDED


def test_a_removed_flow_file_retires_the_flow_from_every_directory(tmp_path: Path) -> None:
    first, second = two_directories(tmp_path)

    (second.directory / "vpn_cannot_connect.yaml").unlink()
    second.tick()
    first.tick()

    assert stored("vpn_cannot_connect.yaml") is None
    assert CatalogFile.objects.get(name="vpn_cannot_connect.yaml").revision == catalog_revision()
    assert not (first.directory / "vpn_cannot_connect.yaml").exists()


def test_an_edit_made_while_the_server_was_stopped_is_imported_at_the_next_start(
    flows_copy: Path,
) -> None:
    CatalogMirror(flows_copy).start()

    (flows_copy / f"{REFUND}.yaml").write_text(REFUND_REWORDED, encoding="utf-8")
    CatalogMirror(flows_copy).start()

    assert stored(f"{REFUND}.yaml") == REFUND_REWORDED


def test_a_directory_copied_from_another_databases_catalog_is_replaced_not_imported(
    tmp_path: Path,
) -> None:
    first = CatalogMirror(copy_flows(tmp_path / "a"))
    first.start()
    other = copy_flows(tmp_path / "b")
    (other / f"{REFUND}.yaml").write_text(REFUND_REWORDED, encoding="utf-8")
    # What a copy of another database's catalog left behind: its own id, its own hashes.
    (other / MANIFEST).write_text(
        json.dumps({"catalog": "another", "revision": 99, "files": {}}), encoding="utf-8"
    )

    CatalogMirror(other).start()

    assert stored(f"{REFUND}.yaml") == REFUND_TEXT
    assert (other / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT


def test_an_edit_after_this_instances_own_import_is_imported_not_replaced(flows_copy: Path) -> None:
    mirror = CatalogMirror(flows_copy)
    mirror.start()
    (flows_copy / f"{REFUND}.yaml").write_text(REFUND_REWORDED, encoding="utf-8")
    mirror.tick()  # imported: the catalog's revision is now past the copy's

    again = REFUND_REWORDED.replace('version: "2024.4"', 'version: "2024.5"')
    (flows_copy / f"{REFUND}.yaml").write_text(again, encoding="utf-8")
    mirror.tick()

    assert stored(f"{REFUND}.yaml") == again
    assert (flows_copy / f"{REFUND}.yaml").read_text(encoding="utf-8") == again


def test_a_directory_that_seeds_the_catalog_names_the_new_catalog_whatever_it_held(
    flows_copy: Path,
) -> None:
    (flows_copy / MANIFEST).write_text(
        json.dumps({"catalog": "another", "revision": 7, "files": {}}), encoding="utf-8"
    )
    CatalogMirror(flows_copy).start()  # seeds: the database had no catalog

    assert json.loads((flows_copy / MANIFEST).read_text())["catalog"] == catalog_id()
    (flows_copy / f"{REFUND}.yaml").write_text(REFUND_REWORDED, encoding="utf-8")
    CatalogMirror(flows_copy).start()
    assert stored(f"{REFUND}.yaml") == REFUND_REWORDED
