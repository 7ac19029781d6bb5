"""The background loop of serve's threads (guidepost/loops.py), run in a real thread: a
database failure is one log line when ticks start failing and one when they work again,
a bug keeps its traceback, the loop goes on after either, a busy tick is followed at
once, and it stops when told, even in the middle of a long wait."""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import threading
import time
from pathlib import Path

import pytest
from django.db import OperationalError

from guidepost import loops
from guidepost.loops import Every, every
from tests.support.waiting import wait_until

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


# --- a loop never dies silently, and says when it last ticked --------------------------------


def test_a_loop_whose_release_fails_logs_one_line_and_starts_again(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What escapes a tick (here the release, as two threads closing one pool did) once
    killed the loop's thread for good: it is one line, and the loop ticks again."""
    monkeypatch.setattr(loops, "RESTART_FIRST", 0.01)
    script = Script()
    failed = []

    def release() -> None:
        script.release()
        if not failed:
            failed.append(True)
            raise KeyError("default")

    stop = every(0.01, script.tick, name="test-loop", doing="seal", logger=logger, release=release)
    try:
        for _ in range(3):  # the tick whose release failed, then two after the restart
            assert (script.next(), script.next()) == ("tick", "release")
    finally:
        stop.set()
    [line] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert line.getMessage().startswith(
        "the loop that would seal failed (KeyError: 'default', "
    ) and line.getMessage().endswith("); starting it again in 0.01 s")
    assert line.exc_info is None  # one line


def test_a_loop_that_keeps_failing_waits_longer_each_time(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loops, "RESTART_FIRST", 0.01)
    script = Script()

    def release() -> None:
        script.release()
        raise RuntimeError("broken")

    stop = every(0.01, script.tick, name="test-loop", doing="seal", logger=logger, release=release)
    try:
        for _ in range(4):
            assert (script.next(), script.next()) == ("tick", "release")
    finally:
        stop.set()
    waits = [r.getMessage().rsplit(" in ", 1)[1] for r in caplog.records if r.levelno >= 40]
    assert waits[:3] == ["0.01 s", "0.02 s", "0.04 s"]


def test_a_loop_leaves_a_heartbeat_at_its_start_and_at_each_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(loops.HEARTBEATS_ENV, str(tmp_path))
    script = Script()
    loop = Every(3600, script.tick, doing="seal", logger=logger, release=script.release)
    before = time.time()
    stop = loop.start("guidepost-test-beat")
    try:
        started = wait_for_beat("test-beat", after=before)
        assert started.interval == 3600 and started.pid == os.getpid()
        assert script.seen.empty()  # no tick yet: the start is its heartbeat
        loop.once()
        ticked = wait_for_beat("test-beat", after=started.last_tick)
        written = json.loads((tmp_path / f"test-beat-{os.getpid()}.json").read_text())
    finally:
        stop.set()
    assert written == {
        "loop": "test-beat",
        "interval": 3600,
        "last_tick": ticked.last_tick,
        "pid": os.getpid(),
    }


def wait_for_beat(name: str, *, after: float) -> loops.Heartbeat:
    def beat() -> loops.Heartbeat | None:
        found = next((b for b in loops.heartbeats() if b.loop == name), None)
        return found if found is not None and found.last_tick >= after else None

    return wait_until(beat, WAIT, 0.01, message=f"no heartbeat of {name} after {after}")


def test_heartbeats_of_processes_that_ended_are_dropped_and_the_oldest_of_a_name_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(loops.HEARTBEATS_ENV, str(tmp_path))
    ended = subprocess.run(["true"], check=True)  # noqa: S607 - a pid that no longer runs
    gone = subprocess.Popen(["true"])  # noqa: S607
    gone.wait()
    del ended
    alive = os.getppid()  # another process that runs (pytest's parent)

    def beat(name: str, pid: int, last_tick: float) -> None:
        body = {"loop": name, "interval": 1.0, "last_tick": last_tick, "pid": pid}
        (tmp_path / f"{name}-{pid}.json").write_text(json.dumps(body))

    beat("refusals", gone.pid, 10.0)
    beat("refusals", alive, 200.0)
    beat("refusals", os.getpid(), 100.0)
    beat("sealer", alive, 300.0)

    written = {"refusals", "sealer"}
    found = [(b.loop, b.pid, b.last_tick) for b in loops.heartbeats() if b.loop in written]

    assert found == [("refusals", os.getpid(), 100.0), ("sealer", alive, 300.0)]
    assert not (tmp_path / f"refusals-{gone.pid}.json").exists()


@pytest.mark.parametrize(
    ("interval", "silent", "overdue"),
    [(1.0, 9.0, False), (1.0, 11.0, True), (60.0, 170.0, False), (60.0, 190.0, True)],
)
def test_a_loop_is_overdue_after_three_intervals_and_ten_seconds_at_least(
    interval: float, silent: float, overdue: bool
) -> None:
    beat = loops.Heartbeat("sealer", interval, last_tick=1_000.0, pid=1)
    assert beat.overdue(1_000.0 + silent) is overdue


def test_an_overdue_loop_makes_the_instance_not_ready_and_names_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from guidepost.health import Readiness

    monkeypatch.setenv(loops.HEARTBEATS_ENV, str(tmp_path))
    now = time.time()
    for name, last_tick in (("sealer", now - 400.0), ("webhooks", now - 0.5)):
        body = {"loop": name, "interval": 60.0, "last_tick": last_tick, "pid": os.getpid()}
        (tmp_path / f"{name}-{os.getpid()}.json").write_text(json.dumps(body))
    readiness = Readiness()

    problem = readiness._loops_problem()

    late = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now - 400.0))
    assert problem is not None
    assert problem.startswith(
        f"background work is overdue: the sealer loop has not ticked since {late}"
    )
    assert "webhooks" not in problem
    assert set(readiness.loops) >= {"sealer", "webhooks"}
    assert readiness.loops["webhooks"]["interval"] == 60.0


@pytest.mark.django_db(transaction=True)
def test_a_loop_keeps_its_sqlite_connection_between_ticks_and_gives_postgresqls_back() -> None:
    """After each tick the thread's connection is released as Django releases a request's:
    PostgreSQL's closed (back to the pool), SQLite's kept, since opening one (its PRAGMAs)
    cost most of an idle tick."""
    from django.db import connection

    opened: queue.Queue[object] = queue.Queue()

    def tick() -> None:
        opened.put(connection.connection)  # None: this tick opens a new one
        connection.ensure_connection()

    loop = Every(0.01, tick, doing="count", logger=logger, first_wait=False)
    stop = loop.start("test-connection")
    try:
        seen = [opened.get(timeout=WAIT) for _ in range(4)]
    finally:
        stop.set()
    if connection.vendor == "sqlite":
        assert seen[0] is None and seen[1] is not None
        assert len({id(raw) for raw in seen[1:]}) == 1  # the same connection every tick
    else:
        assert seen == [None] * 4  # each tick opens one: the last was given back
