"""The sealer: a thread of each ``serve`` instance that seals the ledger every
``GUIDEPOST_SEAL_INTERVAL`` seconds (``runs_app.ledger.seal_all``; ADR 0067); and, when
retention is set, a thread that applies it every ``GUIDEPOST_RETENTION_INTERVAL`` seconds
(``runs_app.erasure.retention``; ADR 0087).

One thread per instance, in the process that ``serve`` started (with ``--workers N``, the
supervisor, not a worker). Several instances on one PostgreSQL database race for each
block; the unique ``seq`` keeps the first, and the others find it sealed. A failure
(the database away) is logged and tried again at the next tick (``access_app.loops``);
it never stops serving.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from access_app.loops import Every, every
from runs_app.erasure import retention
from runs_app.ledger import seal_all

logger = logging.getLogger(__name__)


def start_sealer(interval: float, *, release: Callable[[], None] | None = None) -> threading.Event:
    """Start the thread (a daemon: it ends with the process). ``release`` lets go of the
    database after each tick (default: the thread's own connection, given back to the
    pool on PostgreSQL). Set the returned event to stop it."""
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
    """Start the retention thread (a daemon), like the sealer's. Several instances erase
    the same runs at once harmlessly: an erasure locks its run, and a run erased already
    is left as it is."""
    return retention_loop(interval, release=release).start("guidepost-retention")


def retention_loop(interval: float, *, release: Callable[[], None] | None = None) -> Every:
    """Retention every ``interval`` seconds; a failure is logged (no value in it) and
    tried next time."""
    return Every(interval, _retain, doing="apply retention", logger=logger, release=release)


def _retain() -> None:
    done = retention()
    if done.runs or done.audit_records:
        logger.info(
            "retention: %d ended runs erased, %d audit records deleted",
            len(done.runs),
            done.audit_records,
        )
