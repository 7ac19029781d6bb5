"""Recordings in the repository that a test compares its output with, exactly.

``GUIDEPOST_RECORD_GOLDEN=1`` writes them anew instead (then review the diff of the
recorded files in the commit), as for tests/guidepost/golden.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

RECORD = os.environ.get("GUIDEPOST_RECORD_GOLDEN") == "1"


def check_recording(path: Path, data: Any, compare: Callable[[Any, Any], None]) -> None:
    """Compare ``data`` with its recording at ``path`` (or record it): first with
    ``compare(got, want)`` on the parsed JSON, for a readable failure naming what
    differs, then the text itself, formatting included."""
    actual = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
    if RECORD:
        path.parent.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    assert path.is_file(), f"{path} is missing: record it with GUIDEPOST_RECORD_GOLDEN=1"
    expected = path.read_text(encoding="utf-8")
    compare(json.loads(actual), json.loads(expected))
    assert actual == expected, f"{path.name} differs from the recording (formatting)"
