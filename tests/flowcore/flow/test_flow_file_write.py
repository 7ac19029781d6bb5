"""write_flow_file: a reader of the flows directory never sees a half-written flow."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from flowcore.flow.files import write_flow_file

# Two texts far larger than one write() of a buffered file, so a non-atomic write
# would expose a prefix of one of them to a concurrent reader.
OLD = "id: big\n" + "".join(f"# old line {i:06d} " + "x" * 200 + "\n" for i in range(2000))
NEW = "id: big\n" + "".join(f"# new line {i:06d} " + "y" * 180 + "\n" for i in range(2500))
REWRITES = 60


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name != "big.yaml")


def test_the_file_is_replaced_by_a_rename_with_exactly_the_text(tmp_path: Path) -> None:
    path = write_flow_file(tmp_path, "big", OLD)
    assert path == tmp_path / "big.yaml"
    before = path.stat().st_ino
    write_flow_file(tmp_path, "big", NEW)
    assert path.read_bytes() == NEW.encode("utf-8")
    assert path.stat().st_ino != before  # a new file took the name: nothing was overwritten
    assert leftovers(tmp_path) == []


def test_a_replaced_file_keeps_its_permissions_and_a_new_one_is_world_readable(
    tmp_path: Path,
) -> None:
    path = write_flow_file(tmp_path, "big", OLD)
    assert path.stat().st_mode & 0o777 == 0o644
    os.chmod(path, 0o640)
    write_flow_file(tmp_path, "big", NEW)
    assert path.stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize(
    "flow_id", ["categories", "tests", "CON", "nul", "com1", "lpt9", "../up", "Bad", "", "a" * 65]
)
def test_no_file_is_written_for_a_reserved_name_or_anything_but_a_flow_id(
    tmp_path: Path, flow_id: str
) -> None:
    categories = tmp_path / "categories.yaml"
    categories.write_text("payments: {title: 決済}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"no flow file is written for {flow_id!r}: "):
        write_flow_file(tmp_path, flow_id, OLD)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["categories.yaml"]
    assert categories.read_text(encoding="utf-8") == "payments: {title: 決済}\n"


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    write_flow_file(tmp_path, "big", OLD)
    with pytest.raises(UnicodeEncodeError):
        write_flow_file(tmp_path, "big", NEW[:5000] + "\ud800 lone surrogate")
    assert (tmp_path / "big.yaml").read_text(encoding="utf-8") == OLD
    assert leftovers(tmp_path) == []


def test_a_concurrent_reader_only_ever_sees_a_whole_version(tmp_path: Path) -> None:
    path = write_flow_file(tmp_path, "big", OLD)
    seen: set[int] = set()
    torn: list[int] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            text = path.read_text(encoding="utf-8")
            if text in (OLD, NEW):
                seen.add(len(text))
            else:
                torn.append(len(text))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(REWRITES):
            write_flow_file(tmp_path, "big", NEW if i % 2 == 0 else OLD)
    finally:
        done.set()
        reader.join()
    assert torn == []
    assert seen  # the reader did read while the writer wrote
