"""Drafts are judged in a process of their own.

Judging a draft (parse, lint) is pure Python: up to ~0.1 s of CPU, holding the
interpreter's lock, and five hostile drafts kept in flight still delayed another key's
``guide_flows`` by 270 to 500 ms at p95 when judged in the serving process. Here the
judging runs in one worker process per serving process (the ``forkserver`` context: a
clean interpreter, not a fork of a threaded server), at the lowest CPU priority, so the
serving threads only wait on a pipe. The worker ends with the serving process, however
that ends. A draft it does not judge within ``JUDGE_TIMEOUT`` seconds (none known: the
parser's bounds stop any text within ~0.1 s) is refused as ``server busy`` and the worker
replaced; a worker that died is replaced too.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from flowcore.checks.tests_dir import judge_draft
from flowcore.common.errors import Refusal, Unavailable
from flowcore.flow.drafts import DraftCheck
from flowcore.flow.lint.live import LiveRevision
from flowcore.flow.model import Category

logger = logging.getLogger(__name__)

JUDGE_TIMEOUT = 10.0
WORKER_NICENESS = 19
WATCH_SECONDS = 1.0

_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None


def _started() -> ProcessPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("forkserver"),
                initializer=_worker_start,
                initargs=(os.getpid(),),
            )
        return _pool


def _worker_start(server: int) -> None:
    # The lowest priority: on a machine whose cores are busy, the serving process's calls
    # get the CPU before a draft does (a draft waits; another key's call does not).
    os.setpriority(os.PRIO_PROCESS, 0, WORKER_NICENESS)
    _end_with(server)


def _end_with(server: int) -> None:
    """In the worker: end as soon as the serving process ``server`` is gone, however it
    ended (SIGKILL runs no shutdown). Its parent is the forkserver, not the server, so
    the kernel's parent-death signal cannot say it; a thread asks every second."""

    def watch() -> None:
        while True:
            try:
                os.kill(server, 0)
            except ProcessLookupError:
                os._exit(0)
            time.sleep(WATCH_SECONDS)

    threading.Thread(target=watch, name="server-watch", daemon=True).start()


def _replace(pool: ProcessPoolExecutor) -> None:
    """Shut ``pool`` down without waiting (its worker killed): the next draft starts anew."""
    global _pool
    with _lock:
        if _pool is pool:
            _pool = None
    for process in list(getattr(pool, "_processes", {}).values()):
        process.kill()
    pool.shutdown(wait=False, cancel_futures=True)


def judging_shutdown() -> None:
    """End the worker (at the process's exit)."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


atexit.register(judging_shutdown)


def draft_judged(
    text: str,
    categories: Mapping[str, Category],
    tests_in: Path | None = None,
    live: Mapping[str, LiveRevision] | None = None,
) -> DraftCheck:
    """``check_draft(text)`` judged in the worker process, with the tests of its flow id
    in the flows directory ``tests_in`` (``DraftCheck.tests``). Raises its Refusal, or
    Unavailable (``server busy``) when the worker did not answer in time or died."""
    pool = _started()
    try:
        judged = pool.submit(judge_draft, text, dict(categories), tests_in, live).result(
            timeout=JUDGE_TIMEOUT
        )
    except (FutureTimeout, BrokenProcessPool) as exc:
        logger.warning("a draft was not judged: %s", type(exc).__name__)
        _replace(pool)
        raise Unavailable(
            "server busy",
            "the server could not judge the draft in time; nothing was stored",
            "Wait retry_after seconds, then send the draft again with guide_draft.",
            retryable=True,
            retry_after=2.0,
        ) from None
    if isinstance(judged, Refusal):
        raise judged
    return judged
