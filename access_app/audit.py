"""The audit trail: one record and one access-log line per tool call and API request,
accepted or refused.

A record holds who called (key name, caller, client, peer), what (tool or route, run
id), how it ended (``ok`` or the error's few words, and the HTTP status) and how long it
took: never a key, a token, an argument's value or a draft's text. The MCP dispatcher
writes an accepted call's record inside the transaction of the call's step; refusals at
the HTTP level are recorded by the MCP gate and the API's middleware.

The access-log line goes to the logger ``guidepost.access`` when the record commits
(``access_log`` alone when the record cannot be written), as ``key=… client=… peer=…
tool=… run=… outcome=… status=… ms=… request=…`` (the last, the request's id, when it has
one); values with spaces or control characters are quoted as JSON strings, so one call is
always one line. With JSON logs, the same fields are the line's own keys.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, close_old_connections, connection, connections, transaction
from django.db.models import Field
from django.utils import timezone

from access_app import request_ids
from access_app.faults import fault_kind
from access_app.models import AuditRecord
from flowcore.common.limits import REFUSAL_SUMMARIES
from flowcore.common.text import CONTROLS

logger = logging.getLogger("guidepost.access")

# What the trail calls an MCP resource read (a call like a tool's).
RESOURCE_READ = "resources/read"
# What a record keeps of a run id: only what looks like one (an id is never a value).
_RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PLAIN = re.compile(r"[^\s\"=\\]+")


@dataclass(frozen=True)
class Entry:
    tool: str
    outcome: str
    status: int
    duration_ms: float
    key_name: str = ""
    caller: str = ""
    client: str = ""
    peer: str = ""
    run_id: str = ""
    # A summary of refused requests (``RefusalSummaries``): how many, from when.
    count: int = 1
    at: datetime | None = None
    # The HTTP request's id (``request_ids``): read where the entry is made, in the
    # request's context; a summary of many requests has none.
    request_id: str = field(default_factory=request_ids.current_request_id)


def run_id_of(value: object) -> str:
    """``value`` if it looks like a run id, else "" (so no argument's value is recorded).

    >>> run_id_of("r_AbC-12"), run_id_of("no spaces here"), run_id_of(3)
    ('r_AbC-12', '', '')
    """
    return value if isinstance(value, str) and _RUN_ID.fullmatch(value) else ""


def clean(text: str, limit: int) -> str:
    """Agent-supplied text (a client name, a tool name) fit for a record: no control
    characters, at most ``limit`` characters.

    >>> clean("bad\\nname\\x00", 100), clean("x" * 10, 4)
    ('bad name ', 'xxx…')
    """
    text = CONTROLS.sub(" ", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def client_of(name: str, version: str) -> str:
    if not name:
        return ""
    return clean(f"{name}/{version}" if version else name, 200)


def audit_record(entry: Entry) -> None:
    """Write ``entry``'s record, in the caller's transaction when there is one, and log its
    line once that transaction commits (at once without one)."""
    _insert(
        {
            "at": entry.at or timezone.now(),
            "key_name": entry.key_name[:64],
            "caller": clean(entry.caller, 200),
            "client": clean(entry.client, 200),
            "peer": entry.peer[:64],
            "tool": clean(entry.tool, 100),
            "run_id": run_id_of(entry.run_id),
            "outcome": clean(entry.outcome, 64),
            "status": entry.status,
            "duration_ms": round(entry.duration_ms, 3),
            "count": entry.count,
        }
    )
    transaction.on_commit(lambda: access_log(entry))


# A record's columns, as an INSERT by the ORM writes them: all but the generated id.
_RECORD_FIELDS: tuple[Field[Any, Any], ...] = tuple(
    f for f in AuditRecord._meta.concrete_fields if f is not AuditRecord._meta.auto_field
)
_insert_sql: dict[str, str] = {}


def _insert(values: dict[str, object]) -> None:
    """The record's INSERT, its text built once per database vendor: what
    ``AuditRecord.objects.create`` writes, each value prepared by its field, without the
    per-call cost of an instance, a compiler or the model's signals (none is connected, and
    none may be). ``values`` holds every column by name (a new one is a KeyError here, never
    a column left out). Its id is not read back: nothing needs it."""
    db = connections[DEFAULT_DB_ALIAS]
    sql = _insert_sql.get(db.vendor)
    if sql is None:
        qn = db.ops.quote_name
        columns = ", ".join(qn(str(field.column)) for field in _RECORD_FIELDS)
        marks = ", ".join(["%s"] * len(_RECORD_FIELDS))
        sql = f"INSERT INTO {qn(AuditRecord._meta.db_table)} ({columns}) VALUES ({marks})"
        _insert_sql[db.vendor] = sql
    params = [f.get_db_prep_save(values[f.attname], db) for f in _RECORD_FIELDS]
    with db.cursor() as cursor:
        cursor.execute(sql, params)


def access_log(entry: Entry) -> None:
    """The access-log line of ``entry`` (one line, whatever the entry holds); its fields
    go with the record too, for JSON logs (``guidepost.logs``)."""
    fields = _fields(entry)
    said = [
        f"{_TEXT_NAMES.get(name, name)}={_logfmt(_shown(value))}" for name, value in fields.items()
    ]
    if entry.request_id:
        said.append(f"request={_logfmt(entry.request_id)}")
    logger.info(" ".join(said), extra={"request_id": entry.request_id, "access": fields})


# The text line's names where they differ from the JSON line's.
_TEXT_NAMES = {"caller": "key", "run_id": "run"}


def _fields(entry: Entry) -> dict[str, str | int | float]:
    fields: dict[str, str | int | float] = {
        "caller": entry.key_name,
        "client": clean(entry.client, 200),
        "peer": entry.peer,
        "tool": clean(entry.tool, 100),
        "run_id": run_id_of(entry.run_id),
        "outcome": clean(entry.outcome, 64),
        "status": entry.status,
        "ms": round(entry.duration_ms, 1),
    }
    if entry.count != 1:
        fields["count"] = entry.count
    return fields


def _shown(value: str | int | float) -> str:
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def _logfmt(value: str) -> str:
    """
    >>> _logfmt(""), _logfmt("ok"), _logfmt("run not found"), _logfmt('a"b')
    ('-', 'ok', '"run not found"', '"a\\\\"b"')
    """
    if not value:
        return "-"
    if _PLAIN.fullmatch(value):
        return value
    return json.dumps(value, ensure_ascii=False)


def audit_safely(entry: Entry) -> None:
    """``audit_record`` outside any transaction (one INSERT); when the database cannot take
    it, the access-log line still goes out and the failure is logged (a request is never
    answered differently because its record could not be written)."""
    try:
        serialized = getattr(connection, "serialized", None)  # SQLite: this process's writers queue
        with serialized() if serialized is not None else contextlib.nullcontext():
            audit_record(entry)
    except Exception as exc:
        kind = fault_kind(exc)
        if kind is not None:  # the database cannot be reached or written: one line
            logging.getLogger(__name__).warning(
                "could not write an audit record: database %s", kind
            )
        else:
            logging.getLogger(__name__).exception("could not write an audit record")
        access_log(entry)


# --- refusals in a flood: one record per address and second -------------------------------


# The peer of a summary of refusals from more addresses than a process keeps apart.
MANY = "(many)"


class RefusalSummaries:
    """Requests refused before they had a caller (a bad or missing key, a Host or Origin
    refused, an address over its budget of refusals), summed in this process: one record
    per address, second and kind of refusal, with a ``count``, written once its second
    is over (``due``). A flood of 1,000 bad keys a second from one address is then one
    record a second, not 1,000. At most ``max_pending`` kinds are held (and one summary of
    many addresses per second past that).
    """

    def __init__(
        self, max_pending: int = REFUSAL_SUMMARIES, clock: Callable[[], float] = time.time
    ) -> None:
        self.max_pending = max_pending
        self.clock = clock
        self._lock = threading.Lock()
        # (second, the entry with its time and duration blanked) -> (count, longest ms)
        self._pending: dict[tuple[int, Entry], tuple[int, float]] = {}

    def add(self, entry: Entry) -> None:
        """Count ``entry`` in its second. Past ``max_pending`` kinds, it is counted in its
        second's one summary of many addresses (``peer`` ``MANY``): memory stays bounded
        and nothing is written here (the MCP gate calls this on its event loop)."""
        second = int(self.clock())
        key = (second, replace(entry, duration_ms=0.0, request_id=""))
        with self._lock:
            if key not in self._pending and len(self._pending) >= self.max_pending:
                many = replace(
                    entry, duration_ms=0.0, request_id="", peer=MANY, client="", caller=""
                )
                key = (second, many)
            count, longest = self._pending.get(key, (0, 0.0))
            self._pending[key] = (count + 1, max(longest, entry.duration_ms))

    def pending(self) -> bool:
        return bool(self._pending)

    def due(self, *, everything: bool = False) -> list[Entry]:
        """Take the summaries whose second is over (``everything``: all of them)."""
        now = int(self.clock())
        with self._lock:
            keys = [k for k in self._pending if everything or k[0] < now]
            taken = [(k, self._pending.pop(k)) for k in keys]
        return [
            replace(
                entry,
                count=count,
                duration_ms=longest,
                at=datetime.fromtimestamp(second, tz=UTC),
            )
            for (second, entry), (count, longest) in taken
        ]


refusal_summaries = RefusalSummaries()


def audit_refusal(entry: Entry) -> None:
    """Record a request refused before it had a caller, summed per address and second
    (``refusal_summaries``), written once its second is over (``write_due_refusals``).
    Never touches the database here (the MCP gate calls this on its event loop)."""
    refusal_summaries.add(entry)


def write_due_refusals() -> None:
    """Write the summed refusals whose second is over; the database is not touched when
    none is pending (the served application calls this every second)."""
    if refusal_summaries.pending():
        for entry in refusal_summaries.due():
            audit_safely(entry)


def write_pending_refusals() -> None:
    """Write every summed refusal now, its second over or not: the served application's
    lifespan calls this as it ends, when no timer would write them any more."""
    close_old_connections()
    try:
        for entry in refusal_summaries.due(everything=True):
            audit_safely(entry)
    finally:
        close_old_connections()
