"""bench.cpu_bench charges a process's CPU to the thread that spent it: the main thread
(a server's event loop) or the others (its tool calls' threads)."""

from __future__ import annotations

import os
import threading
import time

from bench.cpu_bench import _cpu_by_thread


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_cpu_spent_in_another_thread_is_charged_to_the_threads_not_the_loop() -> None:
    pid = os.getpid()
    before = _cpu_by_thread([pid])

    worker = threading.Thread(target=_spin, args=(0.3,))
    worker.start()
    worker.join()
    between = _cpu_by_thread([pid])
    _spin(0.3)
    after = _cpu_by_thread([pid])

    assert between["threads"] - before["threads"] >= 0.25
    assert between["loop"] - before["loop"] < 0.15
    assert after["loop"] - between["loop"] >= 0.25
    assert after["threads"] - between["threads"] < 0.15
