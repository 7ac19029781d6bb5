"""The names a flows directory may not hold (``con``, ``aux``, ``tests``, ``categories``
as a flow; a tests file named after one of them) are refused by the database's catalog as
by the directory: it never records one, whichever way a file comes in (an approval, a
publish, an edit imported from a directory, the first seed), so no instance is ever
asked to write one (``con.yaml`` is the console on Windows, whatever its folder).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flowcore.common.errors import Refusal
from flowcore.flow.files import write_catalog_file
from flows_app.catalog_sync import CatalogMirror
from flows_app.models import CatalogFile, Draft
from flows_app.selectors import catalog_revision
from flows_app.services import catalog_publish, catalog_put, draft_approve, draft_create
from tests.support.drafting import new_flow
from tests.support.servers import copy_flows

pytestmark = pytest.mark.django_db

RESERVED = [
    "con.yaml",
    "aux.yaml",
    "nul.yaml",
    "com1.yaml",
    "lpt9.yaml",
    "tests.yaml",
    "categories/x.yaml",
    "tests/con.yaml",
    "tests/aux.yaml",
    "tests/tests.yaml",
    "tests/categories.yaml",
]
# Tests files named after a device: the catalog's files are listed by name, so they are
# what a directory could carry in unnoticed (a flow file so named fails lint first).
DEVICE_TESTS_FILES = ("tests/con.yaml", "tests/aux.yaml")


def names() -> set[str]:
    return set(CatalogFile.objects.values_list("name", flat=True))


def with_device_tests_files(directory: Path) -> Path:
    for name in DEVICE_TESTS_FILES:
        shutil.copyfile(directory / "tests" / "refund_request.yaml", directory / name)
    return directory


@pytest.mark.parametrize("name", RESERVED)
def test_the_catalog_refuses_a_name_the_directory_refuses(name: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="names no file of a catalog"):
        write_catalog_file(tmp_path, name, "id: x\n")
    with pytest.raises(ValueError, match="names no file of a catalog"):
        catalog_put({name: "id: x\n"}, by="maria", via=CatalogFile.Via.APPROVAL)

    assert list(tmp_path.iterdir()) == []
    assert (names(), catalog_revision()) == (set(), 0)


def test_a_draft_named_like_a_device_is_refused_at_approval(live_flows: Path) -> None:
    CatalogMirror(live_flows).start()
    before = names()
    draft = draft_create(text=new_flow("con"), submitted_via="key", submitted_by="key:bot").draft

    with pytest.raises(Refusal, match="lint error"):
        draft_approve(draft=draft, approved_by="maria")

    assert names() == before
    assert Draft.objects.get(pk=draft.pk).status == Draft.Status.PENDING
    assert not (live_flows / "con.yaml").exists()


def test_a_directory_with_device_named_files_is_not_published(tmp_path: Path) -> None:
    CatalogMirror(copy_flows(tmp_path / "live")).start()
    before = (names(), catalog_revision())
    source = with_device_tests_files(copy_flows(tmp_path / "release"))

    with pytest.raises(Refusal, match=r"\(2 tests files name no flow\)"):
        catalog_publish(source, by="sam")

    assert (names(), catalog_revision()) == before


def test_an_edit_in_a_directory_imports_no_device_named_file(flows_copy: Path) -> None:
    mirror = CatalogMirror(flows_copy)
    mirror.start()
    revision = catalog_revision()

    with_device_tests_files(flows_copy)
    mirror.tick()

    assert catalog_revision() == revision
    assert not names() & set(DEVICE_TESTS_FILES)


def test_the_first_seed_leaves_device_named_files_out(flows_copy: Path) -> None:
    CatalogMirror(with_device_tests_files(flows_copy)).start()

    assert "tests/refund_request.yaml" in names()
    assert not names() & set(DEVICE_TESTS_FILES)
