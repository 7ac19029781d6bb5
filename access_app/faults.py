"""What a failure of the database means for the caller: busy (retry soon), unavailable
(an operator must act), or a real surprise (internal error).

Every interface asks ``fault_refusal`` about an exception that is not a ``Refusal``,
so a locked SQLite file, an exhausted connection pool or a read-only database reaches
a client as the error object with an honest ``retryable``, never as a
stack trace or a driver's raw text.
"""

from __future__ import annotations

import sqlite3

from django.db import DatabaseError, InterfaceError

from flowcore.common.errors import Unavailable

# Seconds a client is told to wait after a busy database.
BUSY_RETRY_AFTER = 2.0

# PostgreSQL error classes (SQLSTATE) that say "try again soon": connection exceptions,
# too many connections, the server starting or shutting down, a statement time-out, a
# serialization failure or deadlock, a lock not available.
_PG_BUSY_PREFIXES = ("08", "53300", "57P01", "57P02", "57P03", "57014", "40001", "40P01", "55P03")
# ... and those that say "an operator must act": read-only, disk full, out of memory,
# no permission.
_PG_UNWRITABLE = ("25006", "53100", "53200", "42501")
# SQLite's messages for the same two cases.
_SQLITE_BUSY = ("database is locked", "database table is locked", "database is busy")
_SQLITE_UNWRITABLE = (
    "readonly database",
    "database or disk is full",
    "unable to open database",
    "disk i/o error",
)


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain and len(chain) < 8:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    return chain


def fault_kind(exc: BaseException) -> str | None:
    """ "busy", "unwritable", or None when ``exc`` is not a database fault we can name."""
    for cause in _causes(exc):
        sqlstate = getattr(cause, "sqlstate", None)
        if isinstance(sqlstate, str):
            if sqlstate.startswith(_PG_BUSY_PREFIXES):
                return "busy"
            if sqlstate in _PG_UNWRITABLE:
                return "unwritable"
        name = type(cause).__name__
        if name == "PoolTimeout":  # psycopg_pool: every connection of the pool is in use
            return "busy"
        if isinstance(cause, sqlite3.OperationalError | DatabaseError):
            text = str(cause).lower()
            if any(m in text for m in _SQLITE_BUSY):
                return "busy"
            if any(m in text for m in _SQLITE_UNWRITABLE):
                return "unwritable"
    for cause in _causes(exc):
        # A PostgreSQL connection that failed (refused, reset, no more slots) carries no
        # SQLSTATE when the server never answered: treat it as transient.
        if type(cause).__module__.startswith("psycopg") and type(cause).__name__ in (
            "OperationalError",
            "InterfaceError",
        ):
            return "busy"
        if isinstance(cause, InterfaceError):
            return "busy"
    return None


def fault_refusal(exc: BaseException) -> Unavailable | None:
    """The refusal a client gets for database fault ``exc``, or None when it is not one
    (the caller then answers "internal error")."""
    kind = fault_kind(exc)
    if kind == "busy":
        return Unavailable(
            "server busy",
            "the server's database is busy (locked by another writer, or every connection "
            "in use); nothing was changed",
            "Call again after retry_after seconds.",
            retryable=True,
            retry_after=BUSY_RETRY_AFTER,
        )
    if kind == "unwritable":
        return Unavailable(
            "storage unavailable",
            "the server cannot write to its database (read-only, full, or not permitted); "
            "nothing was changed",
            "Hand the conversation to a human and report that guidepost cannot record "
            "anything: calling again will fail until an operator fixes the storage.",
            retryable=False,
        )
    return None
