from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import browser  # noqa: F401  (the page tests' fixture)


@pytest.fixture
def live_flows(flows_copy: Path, settings: Any) -> Path:
    """A copy of the bundled flows as the live flows directory; the catalog looks at it on
    every read (no poll interval), so a test sees its own edits at once."""
    settings.GUIDEPOST_FLOWS_DIR = flows_copy
    settings.GUIDEPOST_FLOWS_POLL = 0
    return flows_copy
