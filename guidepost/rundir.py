"""The directory of one ``serve`` run, where its processes meet: their metrics
(prometheus-client's multiprocess mode) and the background loops' heartbeats. Django-free:
it is made before Django starts, because prometheus-client chooses where a process's
values go when it is first imported, and the supervisor imports it while Django sets up;
made later, the supervisor's own counts (the webhook worker's) never reached /metrics."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
HEARTBEATS_ENV = "GUIDEPOST_LOOPS_DIR"


@contextmanager
def run_directory() -> Iterator[Path]:
    """Make the run's directory, name it in this process's environment (its workers inherit
    it), and remove it when the run ends."""
    directory = Path(tempfile.mkdtemp(prefix="guidepost-run-"))
    (directory / "loops").mkdir()
    os.environ[MULTIPROC_ENV] = str(directory)
    os.environ[HEARTBEATS_ENV] = str(directory / "loops")
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
