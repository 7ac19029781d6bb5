"""``serve`` collects the static files once per checkout, even when servers start at once
(the test suite's pytest-xdist workers do, ADR 0085)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from guidepost.startup import STATIC_STAMP, collect_static


def test_servers_starting_at_once_collect_the_static_files_once(
    tmp_path: Path, settings: Any
) -> None:
    settings.STATIC_ROOT = tmp_path / "static"
    together = threading.Barrier(2)

    def start() -> bool:
        together.wait()
        return collect_static()

    with ThreadPoolExecutor(2) as pool:
        collected = sorted(pool.map(lambda _: start(), range(2)))

    assert collected == [False, True]
    assert (tmp_path / "static" / STATIC_STAMP).is_file()
    assert (tmp_path / "static" / "staticfiles.json").is_file()
    assert collect_static() is False
