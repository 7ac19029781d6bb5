"""Flows directories where writing a flow file fails for everybody, root included.

Tests here run as root, which ignores file permissions: ``chmod 0555`` stops nobody. Two
ways that bind root too, for approval's "cannot write the flow file" path:

- ``blocked_flow_path``: a directory stands where the flow file goes, so the final rename
  fails (IsADirectoryError) after the temporary file was written: what is left behind
  shows.
- ``read_only_directory``: the directory itself refuses new entries. For root that is the
  immutable attribute (``chattr +i``, which needs CAP_LINUX_IMMUTABLE and a file system
  that has it: ext4, xfs, btrfs); for anyone else, taking away the write permission.
  Where neither can be had, the test is skipped: ``blocked_flow_path`` still runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def blocked_flow_path(directory: Path, flow_id: str) -> Iterator[None]:
    blocker = directory / f"{flow_id}.yaml"
    blocker.mkdir()
    (blocker / "keep").write_text("a directory where the flow file goes\n", encoding="utf-8")
    try:
        yield
    finally:
        shutil.rmtree(blocker)


@contextmanager
def read_only_directory(directory: Path) -> Iterator[None]:
    if os.geteuid() != 0:
        mode = directory.stat().st_mode
        directory.chmod(0o555)
        try:
            yield
        finally:
            directory.chmod(mode)
        return
    chattr = shutil.which("chattr")
    made = chattr and subprocess.run([chattr, "+i", str(directory)], capture_output=True)
    if not made or made.returncode != 0:
        pytest.skip("root, and no immutable attribute here (chattr +i): the blocked path runs")
    try:
        yield
    finally:
        subprocess.run([str(chattr), "-i", str(directory)], check=True)


def probe_is_refused(directory: Path) -> bool:
    """Whether creating a file in ``directory`` fails now (the test's own check that the
    directory really refuses writes)."""
    probe = directory / ".probe"
    try:
        probe.write_text("x", encoding="utf-8")
    except OSError:
        return True
    probe.unlink()
    return False
