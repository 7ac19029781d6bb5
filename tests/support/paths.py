"""Where the repository's files are, and uv, for every test: one place to change when a folder
moves."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUNDLED_FLOWS = REPO / "flows"
# Two small flows directories: one that lints clean, one where some files do not. They
# stay beside flows_app's tests: recorded lint output names them by these paths.
CLEAN_FLOWS = REPO / "tests" / "flows_app" / "flows_clean"
BROKEN_FLOWS = REPO / "tests" / "flows_app" / "flows_broken"


def find_uv() -> str:
    """The uv binary: $UV, then PATH, then the repository's .tools, then the machine's."""
    candidates = [
        os.environ.get("UV", ""),
        shutil.which("uv") or "",
        str(REPO / ".tools" / "bin" / "uv"),
        "/opt/uvtool/bin/uv",
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail("uv not found: set UV, put uv on PATH, or install it at .tools/bin/uv")
