"""Where the repository's files are, for every test: one place to change when a folder moves."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUNDLED_FLOWS = REPO / "flows"
# Two small flows directories: one that lints clean, one where some files do not. They
# stay beside flows_app's tests: recorded lint output names them by these paths.
CLEAN_FLOWS = REPO / "tests" / "flows_app" / "flows_clean"
BROKEN_FLOWS = REPO / "tests" / "flows_app" / "flows_broken"
