"""An erased value appears nowhere in the database (ADR 0086, docs/privacy.md): every
column of every table, read as text (a packed state or result unpacked), is searched for
what a person said (a value, a ref, a close reason, an answer in their own words on the
path) and the client name the agent sent; on SQLite and PostgreSQL alike (the suite's
database). On a SQLite file, after ``erase --vacuum`` the file's bytes, free pages and
write-ahead log included, hold none of it either, and heads written before the erasure
still verify.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from access_app.callers import Transport
from events_app.models import Event
from events_app.services import subscription_add
from guidepost.mcp.dispatch import dispatch
from runs_app.erasure import runs_erase_by_ref
from runs_app.packing import unpack_json
from tests.support.servers import django_eval, fresh_database, guidepost_command, uses_postgres

SECRET = "A99417"  # an order number (refund_request's order_number slot)
SAID = {
    "value": SECRET,
    "ref": "REF-Q7X2-ZEBRA",
    "reason": "she lives at 12 Quillfeather Lane",
    "client": "agent-Plumtree",
    "words": "cat_Whiskerton_broke_it",  # an answer outside the labels: on by __other__
}
AGENT = Transport(
    peer="203.0.113.7", client_name=SAID["client"], client_version="1", key_name="support"
)


def walk_and_close(transport: Transport) -> str:
    """Two runs with the test's ref, both ended: the first with every text of ``SAID``
    but the words, closed (its id is returned); the second completed on the words."""

    def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return dict(dispatch(tool, arguments, transport).payload)

    run_id = str(
        call(
            "guide_start",
            {
                "flow_id": "refund_request",
                "values": {"order_number": SAID["value"]},
                "ref": SAID["ref"],
            },
        )["run_id"]
    )
    call("guide_close", {"run_id": run_id, "reason": SAID["reason"]})
    other = str(call("guide_start", {"flow_id": "refund_request", "ref": SAID["ref"]})["run_id"])
    call("guide_answer", {"run_id": other, "values": {"order_number": "A00118"}})
    call("guide_answer", {"run_id": other, "choice": SAID["words"]})
    return run_id


def found_in_database(text: str) -> list[str]:
    """``table.column`` of every column holding ``text``: every table and column read,
    JSON, numbers and times as text, and a packed column (a run's state, a step's result:
    deflated JSON text) unpacked, as the server reads it."""
    found = []
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            for column in connection.introspection.get_table_description(cursor, table):
                cursor.execute(f"SELECT {quote(column.name)} FROM {quote(table)}")
                if any(text in as_text(value) for (value,) in cursor.fetchall()):
                    found.append(f"{table}.{column.name}")
    return found


def as_text(value: object) -> str:
    """A column's value as text: bytes unpacked when they are packed JSON."""
    if isinstance(value, bytes | memoryview):
        try:
            return unpack_json(value)
        except (ValueError, zlib.error):
            return bytes(value).decode("utf-8", "replace")
    if isinstance(value, dict | list):  # PostgreSQL's JSON, decoded by the driver
        return json.dumps(value, ensure_ascii=False)
    return str(value)


@pytest.mark.django_db
def test_an_erased_value_appears_in_no_column_of_any_table(settings: Any) -> None:
    # Events for a webhook that asked for values hold them too, until the erasure.
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = True
    subscription_add(
        url="http://127.0.0.1:9/hook",
        events=["run.completed", "run.closed"],
        include_values=True,
    )
    run_id = walk_and_close(AGENT)
    assert Event.objects.count() == 2
    for name, text in SAID.items():
        assert found_in_database(text), f"the test's {name} was never stored"
    # The words went on by __other__: the run's packed state holds them on its path.
    assert "runs_app_run.packed_state" in found_in_database(SAID["words"])

    erased, still_open = runs_erase_by_ref(
        ref=SAID["ref"], reason="GDPR request 4411", by="staff:lead"
    )
    assert run_id in erased and len(erased) == 2 and still_open == []

    for name, text in SAID.items():
        assert found_in_database(text) == [], name


DRIVE = """
from access_app.callers import Transport
from tests.runs_app.test_erasure_traces import SAID, walk_and_close
result = walk_and_close(Transport(peer="203.0.113.7", client_name=SAID["client"],
                                  client_version="1", key_name="support"))
"""


def file_bytes(database: Path) -> bytes:
    """The database file and its write-ahead log, as they are on disk."""
    return b"".join(
        path.read_bytes()
        for path in (database, database.with_name(database.name + "-wal"))
        if path.exists()
    )


@pytest.mark.slow
@pytest.mark.skipif(uses_postgres(), reason="the SQLite file's own pages")
def test_erase_vacuum_leaves_no_erased_text_in_the_sqlite_file(tmp_path: Path) -> None:
    with fresh_database(tmp_path) as database_url:
        database = Path(database_url.removeprefix("sqlite:///"))
        made = guidepost_command(database_url, "createkey", "support")
        assert made.returncode == 0, made.stderr
        run_id = django_eval(database_url, DRIVE)
        with sqlite3.connect(database) as db:  # the log's pages into the file
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert all(text.encode() in file_bytes(database) for text in SAID.values())
        heads = tmp_path / "heads.json"
        written = guidepost_command(database_url, "verify", "--heads", str(heads))
        assert written.returncode == 0, written.stdout + written.stderr

        erased = guidepost_command(
            database_url, "erase", "--ref", SAID["ref"], "--reason", "GDPR request 4411", "--vacuum"
        )
        assert erased.returncode == 0, erased.stdout + erased.stderr
        assert "VACUUM" in erased.stdout

        stored = file_bytes(database)
        for name, text in SAID.items():
            assert text.encode() not in stored, name
        # Heads written before the erasure still hold: erasing rewrote no step's hash.
        verified = guidepost_command(database_url, "verify", "--since", str(heads))
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert f"{run_id}: erased by operator:erase at " in verified.stdout
        assert "nothing changed since the heads of" in verified.stdout
