"""The sealer: a thread of each ``serve`` instance that seals the ledger every
``GUIDEPOST_SEAL_INTERVAL`` seconds (``runs_app.ledger.seal_all``; ADR 0067); and, when
retention is set, a thread that applies it every ``GUIDEPOST_RETENTION_INTERVAL`` seconds
(``runs_app.erasure.retention``; ADR 0087).

One thread per instance, in the process that ``serve`` started (with ``--workers N``, the
supervisor, not a worker). Several instances on one PostgreSQL database race for each
block; the unique ``seq`` keeps the first, and the others find it sealed. A failure
(the database away) is logged and tried again at the next tick; it never stops serving.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.db import DatabaseError, connection

from runs_app.erasure import retention
from runs_app.ledger import seal_all

logger = logging.getLogger(__name__)


def start_sealer(interval: float, *, release: Callable[[], None] | None = None) -> None:
    """Start the thread (a daemon: it ends with the process). ``release`` lets go of the
    database after each tick (default: the thread's own connection, given back to the
    pool on PostgreSQL)."""
    threading.Thread(
        target=_seal_every,
        args=(interval, release or _close_connection),
        name="guidepost-sealer",
        daemon=True,
    ).start()


def _seal_every(interval: float, release: Callable[[], None]) -> None:
    while True:
        time.sleep(interval)
        try:
            written = seal_all()
            if written:
                logger.debug("sealed %d blocks of the ledger", written)
        except DatabaseError as exc:  # the database away: one line, not a traceback
            logger.warning("could not seal the ledger (%s); trying again in %g s", exc, interval)
        except Exception:
            logger.exception("could not seal the ledger; trying again in %g s", interval)
        finally:
            release()


def start_retention(interval: float, *, release: Callable[[], None] | None = None) -> None:
    """Start the retention thread (a daemon), like the sealer's. Several instances erase
    the same runs at once harmlessly: an erasure locks its run, and a run erased already
    is left as it is."""
    threading.Thread(
        target=_retain_every,
        args=(interval, release or _close_connection),
        name="guidepost-retention",
        daemon=True,
    ).start()


def _retain_every(interval: float, release: Callable[[], None]) -> None:
    while True:
        time.sleep(interval)
        retention_tick()
        release()


def retention_tick() -> None:
    """One pass of retention; a failure is logged (no value in it) and tried next time."""
    try:
        done = retention()
        if done.runs or done.audit_records:
            logger.info(
                "retention: %d ended runs erased, %d audit records deleted",
                len(done.runs),
                done.audit_records,
            )
    except Exception:
        logger.exception("could not apply retention; trying again later")


def _close_connection() -> None:
    connection.close()  # the calling thread's own (given back to the pool on PostgreSQL)
