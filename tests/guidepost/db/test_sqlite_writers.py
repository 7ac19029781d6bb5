"""On SQLite the writers of one process queue in the process (ADR 0039): a thread's write
transaction begins only once another thread's has committed, so no thread of a worker
waits in SQLite's sleeping busy handler for another; between processes, a file lock
does the same (ADR 0043)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from access_app.models import AuditRecord
from tests.support.servers import REPO

pytestmark = pytest.mark.django_db(transaction=True)


def record(tool: str) -> None:
    AuditRecord.objects.create(
        at=timezone.now(), tool=tool, outcome="ok", status=200, duration_ms=0
    )


@pytest.mark.skipif("connection.vendor != 'sqlite'")
def test_a_second_writer_begins_only_once_the_first_has_committed() -> None:
    database = connection.settings_dict["NAME"]
    first_inside = threading.Event()
    second_ready = threading.Event()
    # What the second thread's BEGIN found committed by the first, when it was sent.
    seen_at_begin: list[int] = []

    def committed_by_first() -> int:
        with sqlite3.connect(database) as reader:
            query = "SELECT count(*) FROM runs_app_auditrecord WHERE tool = 'first'"
            return int(reader.execute(query).fetchone()[0])

    def watch_begin(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        if sql.startswith("BEGIN"):
            seen_at_begin.append(committed_by_first())
        return execute(sql, *args)

    def first() -> None:
        try:
            with transaction.atomic():
                record("first")
                first_inside.set()
                second_ready.wait(10)
                threading.Event().wait(0.3)  # the second thread tries to begin meanwhile
        finally:
            connections.close_all()

    def second() -> None:
        try:
            first_inside.wait(10)
            with connection.execute_wrapper(watch_begin):
                second_ready.set()
                with transaction.atomic():
                    record("second")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert seen_at_begin == [1]
    assert AuditRecord.objects.count() == 2


CHILD_WRITER = """
import sqlite3, sys
import django
from django.conf import settings

database = sys.argv[1]
settings.configure(DATABASES={"default": {
    "ENGINE": "guidepost.db.sqlite3", "NAME": database,
    "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 20},
}})
django.setup()
from django.db import connection, transaction

seen = []

def watch_begin(execute, sql, *args):
    if sql.startswith("BEGIN"):
        with sqlite3.connect(database) as reader:
            query = "SELECT count(*) FROM runs_app_auditrecord WHERE tool = 'first'"
            seen.append(reader.execute(query).fetchone()[0])
    return execute(sql, *args)

print("ready", flush=True)
with connection.execute_wrapper(watch_begin):
    with transaction.atomic():
        connection.cursor().execute("SELECT 1")
print(seen[0], flush=True)
"""


@pytest.mark.skipif("connection.vendor != 'sqlite'")
def test_a_writer_of_another_process_begins_only_once_the_first_has_committed() -> None:
    database = connection.settings_dict["NAME"]
    with transaction.atomic():
        record("first")
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD_WRITER, database],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        threading.Event().wait(0.5)  # the other process tries to begin meanwhile
    out, _ = child.communicate(timeout=30)

    # What the other process's BEGIN found committed when it was sent: it waited for the
    # file lock, not in SQLite's sleeping busy handler after sending BEGIN.
    assert (child.returncode, out.strip()) == (0, "1")
