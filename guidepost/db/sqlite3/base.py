"""Django's SQLite backend, with the writers of one process queued in the process.

SQLite lets one writer at a time hold the database. A writer that finds it taken waits
in SQLite's busy handler, which sleeps and retries with growing sleeps (1, 2, 5, 10 …
up to 100 ms): under many concurrent calls most of a call's time went to those sleeps,
not to work, and the tail grew to seconds (ADR 0039). Here a thread of this process
takes a process-wide lock before it begins a write transaction (``BEGIN IMMEDIATE``)
and gives it back when the transaction ends, so the threads of one worker wait for each
other in a queue that wakes the next one at once; SQLite's busy handler is left only
the waits between worker processes. A single write outside a transaction (an upsert
in autocommit mode) takes the same lock through ``serialized()``.

The lock is waited for at most GUIDEPOST_SQLITE_TIMEOUT seconds; past that the write
goes ahead and SQLite's own timeout decides (``server busy``), as before.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db.backends.sqlite3 import base

_writer = threading.Lock()


class DatabaseWrapper(base.DatabaseWrapper):
    _holds_writer = False

    def _take_writer(self) -> None:
        if self._holds_writer:  # already this connection's (a transaction inside serialized())
            return
        timeout = float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))
        self._holds_writer = _writer.acquire(timeout=timeout)

    def _give_writer(self) -> None:
        if self._holds_writer:
            self._holds_writer = False
            _writer.release()

    def _start_transaction_under_autocommit(self) -> None:
        self._take_writer()
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]
        except BaseException:
            self._give_writer()
            raise

    def _commit(self) -> None:
        try:
            super()._commit()  # type: ignore[misc]
        finally:
            self._give_writer()

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]
        finally:
            self._give_writer()

    def _close(self) -> None:
        try:
            super()._close()  # type: ignore[misc]
        finally:
            self._give_writer()

    @contextmanager
    def serialized(self) -> Iterator[None]:
        """One write statement in autocommit mode, queued with the transactions (inside a
        transaction the lock is already held)."""
        if self.in_atomic_block or self._holds_writer:
            yield
            return
        self._take_writer()  # (a transaction begun inside gives it back at its end)
        try:
            yield
        finally:
            self._give_writer()


__all__ = ["DatabaseWrapper"]
