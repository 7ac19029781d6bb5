"""A background loop: tick every N seconds, let go of the database, log a failure in one
line and go on.

``serve``'s own threads are such loops: the ledger's sealer and retention
(``guidepost/sealer.py``), the catalog's copier (``flows_app/catalog_sync.py``) and the
webhook worker (``events_app/worker.py``, also alone as ``guidepost-mcp worker``). It
lives here because access_app is the lowest room all four may import (events_app may
import neither flows_app nor guidepost), and the domain may not hold it: it waits on a
clock and tells Django's database errors from the rest.

A failure the loop expects (the database away: ``DatabaseError``, or what the caller
names) is one warning line when ticks start failing, and one more when a tick works
again; the failures between are not logged, so an outage of an hour is two lines, not
one a tick. Anything else is a bug: logged with its traceback, every time. Either way
the loop goes on at the next tick; it ends only when told (``stop``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import DatabaseError, connection


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
