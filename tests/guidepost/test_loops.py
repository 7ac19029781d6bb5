"""The background loop of serve's threads (guidepost/loops.py), run in a real thread: a
database failure is one log line when ticks start failing and one when they work again,
a bug keeps its traceback, the loop goes on after either, a busy tick is followed at
once, and it stops when told, even in the middle of a long wait."""

from __future__ import annotations

import logging
import queue
import threading
import time

import pytest
from django.db import OperationalError

from guidepost.loops import Every, every

logger = logging.getLogger("tests.loops")
WAIT = 10.0  # seconds a test waits for the loop's thread at most


class Script:
    """A tick that does what it is told, one step a tick: raise, say "more", or succeed;
    then it reports the tick and the release that follows it."""

    def __init__(self, *steps: BaseException | bool | None) -> None:
        self.steps = list(steps)
        self.seen: queue.Queue[str] = queue.Queue()

    def tick(self) -> bool | None:
        step = self.steps.pop(0) if self.steps else None
        self.seen.put("tick")
        if isinstance(step, BaseException):
            raise step
        return step

    def release(self) -> None:
        self.seen.put("release")

    def next(self) -> str:
        return self.seen.get(timeout=WAIT)


def test_a_database_failure_is_one_line_when_it_starts_and_one_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = OperationalError("connection refused")
    script = Script(down, down, down, None, None)
    loop = Every(
        0.01, script.tick, doing="seal", logger=logger, release=script.release, first_wait=False
    )
    stop = loop.start("test-loop")
    try:
        for _ in range(5):  # each tick, failed or not, is followed by a release
            assert (script.next(), script.next()) == ("tick", "release")
    finally:
        stop.set()
    lines = [(r.levelno, r.getMessage(), r.exc_info) for r in caplog.records]
    assert lines == [
        (logging.WARNING, "could not seal (connection refused); trying again every 0.01 s", None),
        (logging.WARNING, "could seal again, after 3 failed tries", None),
    ]


def test_a_bug_keeps_its_traceback_every_time_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = Script(KeyError("surprise"), KeyError("again"), None)
    stop = every(
        0.01, script.tick, name="test-loop", doing="seal", logger=logger, release=script.release
    )
    try:
        for _ in range(3):
            assert (script.next(), script.next()) == ("tick", "release")
    finally:
        stop.set()
    failures = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in failures] == ["could not seal; trying again in 0.01 s"] * 2
    assert all(r.exc_info and r.exc_info[0] is KeyError for r in failures)


def test_a_busy_tick_is_followed_at_once_and_the_loop_stops_when_told_even_mid_wait() -> None:
    script = Script(True, True, None)
    loop = Every(
        3600, script.tick, doing="seal", logger=logger, release=script.release, first_wait=False
    )
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,))
    thread.start()
    for _ in range(3):  # two busy ticks, then one that leaves the loop waiting an hour
        assert (script.next(), script.next()) == ("tick", "release")
    time.sleep(0.2)
    assert script.seen.empty()  # waiting, as told
    stop.set()
    thread.join(WAIT)
    assert not thread.is_alive()


def test_it_waits_an_interval_before_its_first_tick_and_stopped_then_never_ticks() -> None:
    script = Script()
    stop = threading.Event()
    thread = threading.Thread(
        target=Every(3600, script.tick, doing="seal", logger=logger, release=script.release).run,
        args=(stop,),
    )
    thread.start()
    time.sleep(0.2)
    stop.set()
    thread.join(WAIT)
    assert not thread.is_alive() and script.seen.empty()
