"""The floor's tool with a step's database work in it: what any server that records a step
as guidepost does must pay a call at least, with none of guidepost's code on the path but
its writers' turn-taking on SQLite.

On guidepost's own tables (migrated by guidepost, so every index and constraint is the
one a step meets), each call runs the statements guidepost's ``guide_answer`` runs,
through the database driver alone (``sqlite3`` or ``psycopg``, one connection per worker
thread, kept): the transaction's begin, the run's row read (locked on PostgreSQL), the
run's UPDATE and the step's INSERT (one statement on PostgreSQL, as guidepost's), the
audit record's INSERT, the commit. The values are guidepost's sizes for the bench flow (a
packed state of 233 bytes, a packed result of 102, two 32-byte digests), and the tool
answers a result of the size and shape of a ``guide_answer`` result (487 bytes of JSON).

On SQLite the writers take turns as guidepost's do (ADR 0095): a thread takes the
process's writer lock, then the processes' file lock, before ``BEGIN IMMEDIATE``, both
guidepost's own (``guidepost.db.sqlite3.base``), so neither floor waits in SQLite's busy
handler and the two tails compare.

Not done, so a lower bound: no key check, no rate limit, no engine, no packing, no chain
hashing, no metrics, no log line. Used by ``bench.floor_server --store``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

from guidepost.db.sqlite3.base import _FileLock, _writer

RUNS_PER_WORKER = 1000  # runs each worker steps in turn, so no two calls meet on a row
STATE = b"s" * 233
RESULT = b"r" * 102
DIGEST = b"d" * 32
CALLER = "key:bench-floor-store"
RESULT_PAYLOAD: dict[str, Any] = {
    "run_id": "r__M15XDOkdRGLN-B25LGQJw",
    "status": "advanced",
    "next": (
        "First deliver each `tell` item in order. Ask what node.say asks, in your own words. "
        "Map the reply to one label of node.accepts and call guide_answer with "
        'choice=<label> (choice="__unknown__" if they do not know).'
    ),
    "tell": [{"id": "s02", "say": "Guidance s02"}],
    "node": {
        "id": "p03",
        "kind": "ask",
        "say": "Ask question p03 of the procedure",
        "accepts": {"yes": "The person says it applies", "no": "The person says it does not apply"},
    },
}

_READ = (
    'SELECT "runs_app_run"."id", "runs_app_run"."revision", "runs_app_run"."packed_state",'
    ' "runs_app_flowversion"."content_hash" FROM "runs_app_run" INNER JOIN'
    ' "runs_app_flowversion" ON ("runs_app_run"."flow_version_id" = "runs_app_flowversion"."id")'
    ' WHERE "runs_app_run"."public_id" = %s AND (%s OR "runs_app_run"."owner" = %s)'
)
_UPDATE = (
    'UPDATE "runs_app_run" SET "node" = %s, "revision" = %s, "head_hash" = %s,'
    ' "updated_at" = %s, "packed_state" = %s, "state" = %s WHERE "runs_app_run"."id" = %s'
)
_STEP_COLUMNS = (
    '"seq", "tool", "input", "status", "node_before", "node_after", "created_at",'
    ' "prev_hash", "hash", "caller", "flow_hash", "format", "payload", "packed_result",'
    ' "run_id"'
)
_INSERT_STEP = f'INSERT INTO "runs_app_step" ({_STEP_COLUMNS}) VALUES ({", ".join(["%s"] * 15)})'
_INSERT_AUDIT = (
    'INSERT INTO "runs_app_auditrecord" ("at", "key_name", "caller", "client", "peer", "tool",'
    ' "outcome", "status", "duration_ms", "count", "run_id")'
    " VALUES (%s, '', %s, 'httpx', '127.0.0.1', 'guide_answer', 'ok', 200, 1.5, 1, %s)"
)
_INSERT_RUN = (
    'INSERT INTO "runs_app_run" ("public_id", "flow_id", "node", "outcome", "ref", "owner",'
    ' "close_reason", "revision", "head_hash", "started_at", "updated_at", "flow_version_id",'
    ' "request_id", "salt", "moved_from", "packed_state", "state")'
    " VALUES (%s, 'floor', 'p01', '', '', %s, '', 0, %s, %s, %s, %s, '', %s, '', %s, 'active')"
)


class Store:
    """One worker's runs, stepped in turn; ``step()`` is one call's database work."""

    def __init__(self, url: str) -> None:
        self.postgres = url.startswith(("postgres://", "postgresql://"))
        self.url = url
        self.local = threading.local()
        self.calls = itertools.count()
        self.runs = [f"floor-{os.getpid()}-{i}" for i in range(RUNS_PER_WORKER)]
        self.read = self._sql(_READ + (' FOR UPDATE OF "runs_app_run"' if self.postgres else ""))
        if self.postgres:
            update = _UPDATE + ' RETURNING "runs_app_run"."id"'
            marks = ", ".join(["%s"] * 15)
            self.write = f'WITH "updated" AS ({update}) INSERT INTO "runs_app_step" '
            self.write += f'({_STEP_COLUMNS}) SELECT {marks} FROM "updated"'
        else:
            self.update, self.insert_step = _qmarks(_UPDATE), _qmarks(_INSERT_STEP)
        self.insert_audit = self._sql(_INSERT_AUDIT)
        self.file_lock = None if self.postgres else _FileLock.of(_sqlite_path(url))
        self._start_runs()

    def _connect(self) -> Any:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            if self.postgres:
                import psycopg

                conn = psycopg.connect(self.url, prepare_threshold=5)
            else:
                conn = sqlite3.connect(_sqlite_path(self.url), isolation_level=None, timeout=20)
                conn.executescript(
                    "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;"
                    "PRAGMA foreign_keys=ON;PRAGMA secure_delete=ON;"
                )
            self.local.conn = conn
        return conn

    def _now(self) -> Any:
        now = dt.datetime.now(dt.UTC)
        return now if self.postgres else now.isoformat(" ").replace("+00:00", "")

    def _start_runs(self) -> None:
        conn = self._connect()
        now = self._now()
        with self._transaction(conn) as cursor:
            version = cursor.execute(
                self._sql('SELECT "id" FROM "runs_app_flowversion" WHERE "content_hash" = %s'),
                ("floor",),
            ).fetchone()[0]
            insert = self._sql(_INSERT_RUN)
            for public_id in self.runs:
                cursor.execute(insert, (public_id, CALLER, DIGEST, now, now, version, b"", STATE))

    def step(self) -> dict[str, Any]:
        n = next(self.calls)
        public_id, seq = self.runs[n % RUNS_PER_WORKER], n // RUNS_PER_WORKER + 1
        conn = self._connect()
        now = self._now()
        with self._transaction(conn) as cursor:
            run_id, revision, _state, _flow = cursor.execute(
                self.read, (public_id, False, CALLER)
            ).fetchone()
            run_values = ("p02", revision + 1, DIGEST, now, STATE, "active", run_id)
            if self.postgres:
                cursor.execute(self.write, (*run_values, *_step_values(seq, now, run_id)))
            else:
                cursor.execute(self.update, run_values)
            if cursor.rowcount != 1:
                raise RuntimeError("the run's row was not updated")
            if not self.postgres:
                cursor.execute(self.insert_step, _step_values(seq, now, run_id))
            cursor.execute(self.insert_audit, (now, CALLER, public_id))
        return RESULT_PAYLOAD

    def _sql(self, text: str) -> str:
        return text if self.postgres else _qmarks(text)

    @contextlib.contextmanager
    def _transaction(self, conn: Any) -> Iterator[Any]:
        """A cursor in a transaction committed at the end, rolled back on an error; on
        SQLite begun IMMEDIATE once this thread has its turn as a writer."""
        if self.postgres:
            with conn.transaction(), conn.cursor() as cursor:
                yield cursor
            return
        cursor = conn.cursor()
        self._take_turn()
        try:
            cursor.execute("BEGIN IMMEDIATE")
            yield cursor
            cursor.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                cursor.execute("ROLLBACK")
            raise
        finally:
            self._give_turn()

    def _take_turn(self) -> None:
        deadline = time.monotonic() + 20
        _writer.acquire()
        if self.file_lock is not None and not self.file_lock.acquire(deadline):
            _writer.release()
            raise TimeoutError("the writers' file lock was not free within 20 s")

    def _give_turn(self) -> None:
        if self.file_lock is not None:
            self.file_lock.release()
        _writer.release()


def _step_values(seq: int, now: Any, run_id: int) -> tuple[Any, ...]:
    return (
        *(seq, "guide_answer", '{"choice":"yes"}', "advanced", "p01", "p02", now),
        *(DIGEST, DIGEST, CALLER, b"", 2, b"", RESULT, run_id),
    )


def _sqlite_path(url: str) -> str:
    return unquote(urlsplit(url).path)


def _qmarks(sql: str) -> str:
    return sql.replace("%s", "?")


def prepare(url: str) -> None:
    """Migrate guidepost's schema onto ``url`` and give it the flow version the floor's
    runs pin (run once, before the workers start; Django is set up on ``url``)."""
    from django.core.management import call_command
    from django.utils import timezone

    from flows_app.models import FlowVersion

    call_command("migrate", verbosity=0)
    FlowVersion.objects.get_or_create(
        content_hash="floor",
        defaults={"flow_id": "floor", "title": "Floor", "source": "", "created_at": timezone.now()},
    )
