"""``serve``'s background loops, and the one mechanism they share: tick every N seconds,
let go of the database, log a failure in one line and go on.

Four loops run in each instance (the supervisor of ``--workers N``): the ledger's sealer,
retention by age, the catalog's copier (``flows_app.catalog_sync``) and the webhook worker
(``events_app.worker``, also alone as ``guidepost-mcp worker``). The apps say what one tick
does; the process owns the threads, so the loops live here.

A failure the loop expects (the database away: ``DatabaseError``, or what the caller
names) is one warning line when ticks start failing, and one more when a tick works
again, so an outage of an hour is two lines, not one a tick. Anything else is a bug:
logged with its traceback, every time. Either way the loop goes on at the next tick; it
ends only when told (``stop``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import DatabaseError, connection

from events_app import worker
from flows_app.catalog_sync import CatalogMirror
from runs_app.erasure import retention
from runs_app.ledger import seal_all

logger = logging.getLogger(__name__)


def close_connection() -> None:
    connection.close()  # the calling thread's own (given back to the pool on PostgreSQL)


def keep_connection() -> None:
    """For a loop that shares its thread's connection (a test's)."""


class Every:
    """``tick`` every ``interval`` seconds, ``release`` after each tick (default: close
    the thread's connection). A tick that returns True has more to do: the next one
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
        self.release = release or close_connection
        self.expected = expected
        self.first_wait = first_wait
        self.failures = 0  # expected failures in a row, up to the last tick

    def once(self) -> bool:
        """One tick, its failure logged, the database let go of; True: tick again at once."""
        try:
            again = self.tick()
            if self.failures:
                self.logger.warning(
                    "could %s again, after %d failed tries", self.doing, self.failures
                )
                self.failures = 0
            return again is True
        except self.expected as exc:
            if not self.failures:
                self.logger.warning(
                    "could not %s (%s); trying again every %g s", self.doing, exc, self.interval
                )
            self.failures += 1
            return False
        except Exception:
            self.logger.exception("could not %s; trying again in %g s", self.doing, self.interval)
            return False
        finally:
            self.release()

    def run(self, stop: threading.Event) -> None:
        """Tick in this thread until ``stop`` is set (a tick under way is finished)."""
        if self.first_wait and stop.wait(self.interval):
            return
        while not stop.is_set():
            if not self.once() and stop.wait(self.interval):
                return

    def start(self, name: str) -> threading.Event:
        """Run in a daemon thread called ``name`` (it ends with the process at the
        latest); set the returned event to stop it."""
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


def start_sealer(interval: float, *, release: Callable[[], None] | None = None) -> threading.Event:
    """Seal the ledger every ``interval`` seconds. Several instances on one database race
    for each block harmlessly: the unique ``seq`` keeps the first."""
    return every(
        interval,
        _seal,
        name="guidepost-sealer",
        doing="seal the ledger",
        logger=logger,
        release=release,
    )


def _seal() -> None:
    written = seal_all()
    if written:
        logger.debug("sealed %d blocks of the ledger", written)


def start_retention(
    interval: float, *, release: Callable[[], None] | None = None
) -> threading.Event:
    """Apply retention every ``interval`` seconds. Several instances erase the same runs at
    once harmlessly: an erasure locks its run, and a run erased already is left as it is."""
    return retention_loop(interval, release=release).start("guidepost-retention")


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


def start_catalog_sync(
    mirror: CatalogMirror, interval: float, *, release: Callable[[], None] | None = None
) -> threading.Event:
    """Copy the catalog's changes into ``mirror``'s directory every ``interval`` seconds. A
    directory that cannot be written fails a tick like the database away does."""
    return every(
        interval,
        mirror.tick,
        name="guidepost-catalog",
        doing=f"copy the catalog into {mirror.directory}",
        logger=logger,
        release=release,
        expected=(DatabaseError, OSError),
    )


def run_webhooks(stop: threading.Event, *, release: bool = True) -> None:
    """Deliver webhooks every GUIDEPOST_WEBHOOK_POLL seconds (at once again after a full
    batch) until ``stop`` is set. ``release``: close this thread's connection after each
    tick."""
    with ThreadPoolExecutor(settings.GUIDEPOST_WEBHOOK_CONCURRENCY, "guidepost-webhook") as pool:
        Every(
            settings.GUIDEPOST_WEBHOOK_POLL,
            lambda: worker.tick(pool) >= worker.BATCH,
            doing="deliver webhooks",
            logger=logger,
            release=None if release else keep_connection,
            first_wait=False,
        ).run(stop)


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
