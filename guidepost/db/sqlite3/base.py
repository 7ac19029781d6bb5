"""Django's SQLite backend, with the writers of one process queued in the process.

SQLite's busy handler makes a waiting writer sleep up to 100 ms between tries: under many
calls most of a call's time went to those sleeps, and the tail grew to seconds. Here a
writer takes a process-wide lock before ``BEGIN IMMEDIATE`` (one write in autocommit mode
through ``serialized()``) and gives it back when the transaction ends, so one process's
threads queue and wake at once; between processes, the head of each queue takes a file
lock (``flock`` on ``<database>-writer.lock``), polled every fraction of a millisecond, so
a process that lost the race is not left sleeping while another's queue writes on.
Both are waited for at most GUIDEPOST_SQLITE_TIMEOUT seconds in all; then SQLite's own
timeout decides (``server busy``). A statement's ``%s`` placeholders become ``?`` once
per text, not on every execution, and JSON is written compactly, since SQLite stores the
text as given.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from django.db.backends.sqlite3 import base, operations

_writer = threading.Lock()
# How long a process waits between two tries of the file lock (seconds): short, because
# the lock is held for a transaction of about a millisecond.
_FIRST_POLL, _LONGEST_POLL = 0.00005, 0.0005


class _FileLock:
    """The processes' writer lock on one database file; held by at most one thread of
    this process at a time (the one holding ``_writer``)."""

    # Per process: a forked child must open the file again, or its lock would be its
    # parent's (flock belongs to the open file, which a fork shares).
    _by_path: dict[tuple[int, str], _FileLock | None] = {}

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def of(cls, database: str) -> _FileLock | None:
        """The lock of ``database`` (a file path), or None when it can have none."""
        key = (os.getpid(), database)
        if key in cls._by_path:
            return cls._by_path[key]
        lock = None
        if database and database != ":memory:" and not database.startswith("file:"):
            try:
                fd = os.open(f"{database}-writer.lock", os.O_RDWR | os.O_CREAT, 0o600)
                lock = cls(fd)
            except OSError:
                lock = None  # e.g. a read-only directory: SQLite will refuse the write anyway
        cls._by_path[key] = lock
        return lock

    def acquire(self, deadline: float) -> bool:
        pause = _FIRST_POLL
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(pause)
                pause = min(pause * 2, _LONGEST_POLL)

    def release(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)


@lru_cache(maxsize=1024)
def _qmark(query: str) -> str:
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


class _Cursor(base.SQLiteCursorWrapper):
    def convert_query(self, query: str, *, param_names: Any = None) -> str:
        if param_names is None:
            return _qmark(query)
        return super().convert_query(query, param_names=param_names)


class DatabaseOperations(operations.DatabaseOperations):
    def adapt_json_value(self, value: object, encoder: type[json.JSONEncoder] | None) -> str:
        return json.dumps(value, cls=encoder, ensure_ascii=False, separators=(",", ":"))


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
    _holds_writer = False
    _holds_file: _FileLock | None = None

    def create_cursor(self, name: str | None = None) -> _Cursor:
        return self.connection.cursor(factory=_Cursor)  # type: ignore[no-any-return]

    def _take_writer(self) -> None:
        if self._holds_writer:  # already this connection's (a transaction inside serialized())
            return
        timeout = float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))
        deadline = time.monotonic() + timeout
        self._holds_writer = _writer.acquire(timeout=timeout)
        if not self._holds_writer:
            return
        lock = _FileLock.of(str(self.settings_dict["NAME"]))
        if lock is not None and lock.acquire(deadline):
            self._holds_file = lock

    def _give_writer(self) -> None:
        if self._holds_file is not None:
            self._holds_file.release()
            self._holds_file = None
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
