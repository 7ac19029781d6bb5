"""``serve``'s background loops, and the one mechanism they share: tick every N seconds,
let go of the database, log a failure in one line and go on.

Four loops run in each instance (in the supervisor of ``--workers N``): the ledger's
sealer, retention by age, the catalog's copier (``flows_app.catalog_sync``) and the webhook
worker (``events_app.worker``, also alone as ``guidepost-mcp worker``); and one in each
process that serves, writing the records of refused requests (``access_app.audit``). The
apps say what one tick does; the process owns the threads, so the loops live here. Each
loop leaves a heartbeat at every successful tick, which /readyz and /metrics report, and a
loop whose thread fails starts again: none dies silently.

A failure the loop expects (the database away: ``DatabaseError``, or what the caller
names) is one warning line when ticks start failing, and one more when a tick works
again, so an outage of an hour is two lines, not one a tick. Anything else is a bug:
logged with its traceback, every time. Either way the loop goes on at the next tick; it
ends only when told (``stop``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, connection

from access_app import audit
from events_app import worker
from flows_app.catalog_sync import CatalogMirror
from guidepost.rundir import HEARTBEATS_ENV
from runs_app.erasure import retention
from runs_app.ledger import seal_all

logger = logging.getLogger(__name__)


def close_connection() -> None:
    connection.close()  # the calling thread's own (given back to the pool on PostgreSQL)


def release_connection() -> None:
    """After a tick, what Django does after a request: the thread's connection is closed
    (given back to the pool) on PostgreSQL, whose CONN_MAX_AGE is 0, and kept on SQLite,
    whose is None (a new one costs its PRAGMAs, most of an idle tick's CPU, and holds
    nothing on a server); closed on either when it failed or left a transaction open."""
    connection.close_if_unusable_or_obsolete()


def keep_connection() -> None:
    """For a loop that shares its thread's connection (a test's)."""


# --- health: when each loop last ticked ----------------------------------------------------

# Overdue: no successful tick for this many intervals, and at least OVERDUE_AFTER seconds (a
# tick may take a while, and a loop polling every second must not flap).
OVERDUE_INTERVALS = 3
OVERDUE_AFTER = 10.0


@dataclass(frozen=True)
class Heartbeat:
    """A loop's last successful tick (or its start, before the first), in Unix time."""

    loop: str
    interval: float
    last_tick: float
    pid: int

    def overdue(self, now: float) -> bool:
        return now - self.last_tick > max(OVERDUE_INTERVALS * self.interval, OVERDUE_AFTER)


_beats: dict[str, Heartbeat] = {}
_beats_lock = threading.Lock()


def _beat(loop: str, interval: float) -> None:
    beat = Heartbeat(loop, interval, time.time(), os.getpid())
    with _beats_lock:
        _beats[loop] = beat
    # Where serve's processes leave them, so that /readyz and /metrics, answered by any
    # worker, see the loops of the supervisor and of every worker alike.
    directory = os.environ.get(HEARTBEATS_ENV)
    if directory:
        path = Path(directory) / f"{loop}-{beat.pid}.json"
        temporary = path.with_suffix(".tmp")
        try:
            temporary.write_text(json.dumps(asdict(beat)), encoding="utf-8")
            os.replace(temporary, path)
        except OSError:
            logger.warning("could not write the %s loop's heartbeat into %s", loop, directory)


def _forget(loop: str) -> None:
    with _beats_lock:
        _beats.pop(loop, None)
    directory = os.environ.get(HEARTBEATS_ENV)
    if directory:
        (Path(directory) / f"{loop}-{os.getpid()}.json").unlink(missing_ok=True)


def heartbeats() -> list[Heartbeat]:
    """The heartbeat of every loop of this instance, the oldest of each name: read from
    serve's directory of them when there is one (dropping those of processes that ended),
    else this process's own."""
    found = {}
    directory = os.environ.get(HEARTBEATS_ENV)
    if directory:
        for path in Path(directory).glob("*.json"):
            try:
                beat = Heartbeat(**json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError):
                continue  # being replaced, or not ours
            if not _alive(beat.pid):
                path.unlink(missing_ok=True)
                continue
            found[path.name] = beat
    with _beats_lock:
        found.update({f"{b.loop}-{b.pid}": b for b in _beats.values()})
    oldest: dict[str, Heartbeat] = {}
    for beat in found.values():
        if beat.loop not in oldest or beat.last_tick < oldest[beat.loop].last_tick:
            oldest[beat.loop] = beat
    return sorted(oldest.values(), key=lambda b: b.loop)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- the loop ------------------------------------------------------------------------------

# A loop whose thread fails starts again after a second, then twice as long each time it
# fails again without a tick between, up to a minute.
RESTART_FIRST = 1.0
RESTART_MOST = 60.0


class Every:
    """``tick`` every ``interval`` seconds, ``release`` after each tick (default:
    ``release_connection``). A tick that returns True has more to do: the next one
    follows at once. ``first_wait``: wait an interval before the first tick. ``doing``
    names the work in the log lines ("could not seal the ledger …")."""

    def __init__(
        self,
        interval: float,
        tick: Callable[[], bool | None],
        *,
        doing: str,
        logger: logging.Logger,
        release: Callable[[], None] | None = None,
        expected: tuple[type[Exception], ...] = (DatabaseError,),
        first_wait: bool = True,
    ) -> None:
        self.interval = interval
        self.tick = tick
        self.doing = doing
        self.logger = logger
        self.release = release or release_connection
        self.expected = expected
        self.first_wait = first_wait
        self.failures = 0  # expected failures in a row, up to the last tick
        self.name = ""  # set by ``start``: what its heartbeat is called
        self.ticked = False  # a tick has succeeded since the thread (re)started

    def once(self) -> bool:
        """One tick, its failure logged, the database let go of; True: tick again at once."""
        again = ok = False
        try:
            again = self.tick() is True
            ok = True
            if self.failures:
                self.logger.warning(
                    "could %s again, after %d failed tries", self.doing, self.failures
                )
                self.failures = 0
        except self.expected as exc:
            if not self.failures:
                self.logger.warning(
                    "could not %s (%s); trying again every %g s", self.doing, exc, self.interval
                )
            self.failures += 1
        except Exception:
            self.logger.exception("could not %s; trying again in %g s", self.doing, self.interval)
        finally:
            self.release()
        if ok:  # the tick and its release: a heartbeat
            self.ticked = True
            if self.name:
                _beat(self.name, self.interval)
        return again

    def run(self, stop: threading.Event) -> None:
        """Tick in this thread until ``stop`` is set (a tick under way is finished). What
        escapes a tick (a failing ``release``, say) is logged in one line, and the loop
        starts again after a back-off: it never dies silently."""
        if self.name:
            _beat(self.name, self.interval)  # started: overdue only if no tick follows
        try:
            self._supervised(stop)
        finally:
            if self.name:
                _forget(self.name)  # stopped: not overdue, not reported

    def _supervised(self, stop: threading.Event) -> None:
        restart = RESTART_FIRST
        while True:
            self.ticked = False
            try:
                self._ticks(stop)
                return
            except Exception as exc:
                where = traceback.extract_tb(exc.__traceback__)[-1]
                self.logger.error(
                    "the loop that would %s failed (%s: %s, %s:%d); starting it again in %g s",
                    self.doing,
                    type(exc).__name__,
                    exc,
                    where.filename,
                    where.lineno,
                    restart,
                )
            if stop.wait(restart):
                return
            restart = RESTART_FIRST if self.ticked else min(restart * 2, RESTART_MOST)

    def _ticks(self, stop: threading.Event) -> None:
        if self.first_wait and stop.wait(self.interval):
            return
        while not stop.is_set():
            if not self.once() and stop.wait(self.interval):
                return

    def start(self, name: str) -> threading.Event:
        """Run in a daemon thread called ``name`` (it ends with the process at the
        latest); set the returned event to stop it. Its heartbeat goes by the name without
        ``guidepost-``, unless it has a name already."""
        self.name = self.name or name.removeprefix("guidepost-")
        stop = threading.Event()
        threading.Thread(target=self.run, args=(stop,), name=name, daemon=True).start()
        return stop


def every(
    interval: float,
    tick: Callable[[], bool | None],
    *,
    name: str,
    doing: str,
    logger: logging.Logger,
    release: Callable[[], None] | None = None,
    expected: tuple[type[Exception], ...] = (DatabaseError,),
) -> threading.Event:
    """``Every(...).start(name)``: a daemon thread that waits an interval, then ticks."""
    loop = Every(interval, tick, doing=doing, logger=logger, release=release, expected=expected)
    return loop.start(name)


# --- the loops serve starts ---------------------------------------------------------------


def start_sealer(interval: float) -> threading.Event:
    """Seal the ledger every ``interval`` seconds. Several instances on one database race
    for each block harmlessly: the unique ``seq`` keeps the first."""
    return every(interval, _seal, name="guidepost-sealer", doing="seal the ledger", logger=logger)


def _seal() -> None:
    written = seal_all()
    if written:
        logger.debug("sealed %d blocks of the ledger", written)


def start_retention(interval: float) -> threading.Event:
    """Apply retention every ``interval`` seconds. Several instances erase the same runs at
    once harmlessly: an erasure locks its run, and a run erased already is left as it is."""
    return retention_loop(interval).start("guidepost-retention")


def retention_loop(interval: float, *, release: Callable[[], None] | None = None) -> Every:
    return Every(interval, _retain, doing="apply retention", logger=logger, release=release)


def _retain() -> None:
    done = retention()
    if done.runs or done.audit_records:
        logger.info(
            "retention: %d ended runs erased, %d audit records deleted",
            len(done.runs),
            done.audit_records,
        )


def start_catalog_sync(mirror: CatalogMirror, interval: float) -> threading.Event:
    """Copy the catalog's changes into ``mirror``'s directory every ``interval`` seconds. A
    directory that cannot be written fails a tick like the database away does."""
    return every(
        interval,
        mirror.tick,
        name="guidepost-catalog",
        doing=f"copy the catalog into {mirror.directory}",
        logger=logger,
        expected=(DatabaseError, OSError),
    )


def webhooks_loop(lanes: worker.Lanes, *, release: bool = True) -> Every:
    """Deliver webhooks every GUIDEPOST_WEBHOOK_POLL seconds, and at once again when a
    lane ends. ``release``: release this thread's connection after each tick (else the
    caller's thread keeps it as it is)."""

    def tick() -> bool:
        worker.tick(lanes)
        return lanes.wait(settings.GUIDEPOST_WEBHOOK_POLL)

    loop = Every(
        settings.GUIDEPOST_WEBHOOK_POLL,
        tick,
        doing="deliver webhooks",
        logger=logger,
        release=None if release else keep_connection,
        first_wait=False,
    )
    loop.name = "webhooks"
    return loop


def run_webhooks(stop: threading.Event, *, release: bool = True) -> None:
    """Deliver webhooks in this thread until ``stop`` is set; then the lanes end after
    their tries under way, which are recorded."""
    lanes = worker.Lanes(settings.GUIDEPOST_WEBHOOK_CONCURRENCY)
    try:
        webhooks_loop(lanes, release=release).run(stop)
    finally:
        try:
            worker.lanes_stop(lanes)
        except DatabaseError as exc:
            logger.warning("could not record the last webhook tries (%s): tried again", exc)
        finally:
            if release:
                close_connection()


# A supervisor's webhook threads yield the cores to the workers serving calls: an agent
# waits on a step, a webhook can wait a little. 10, not 19: on a machine kept busy, 19 would
# leave deliveries about 1.5% of a core, 10 about a tenth.
SUPERVISOR_NICENESS = 10


def start_webhooks(*, niceness: int = 0) -> threading.Event:
    """The webhook worker as a daemon thread of this process. ``niceness``: the lowest CPU
    priority of its threads (Linux's is per thread, and the threads it starts inherit it),
    for a process that serves no calls itself; one that does keeps 0, or a lowered thread
    holding the interpreter's lock would keep the process's calls waiting."""
    stop = threading.Event()

    def deliver() -> None:
        thread = threading.get_native_id()
        if os.getpriority(os.PRIO_PROCESS, thread) < niceness:  # lower only, never raise it
            os.setpriority(os.PRIO_PROCESS, thread, niceness)
        run_webhooks(stop)

    threading.Thread(target=deliver, name="guidepost-webhooks", daemon=True).start()
    return stop


# Refused requests are summed per second in each process that serves, and written once
# their second is over.
REFUSALS_INTERVAL = 1.0


def start_refusals() -> threading.Event:
    """Write the refused requests summed in this process, every second, in a daemon thread
    of the served application (each worker of ``--workers N`` has its own)."""
    return every(
        REFUSALS_INTERVAL,
        audit.write_due_refusals,
        name="guidepost-refusals",
        doing="write the records of refused requests",
        logger=logger,
    )
