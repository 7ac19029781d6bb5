"""The audit trail: one record and one access-log line per tool call and API request,
accepted or refused (ADR 0033).

A record holds who called (key name, caller, client, peer), what (tool or route, run
id), how it ended (``ok`` or the error's few words, and the HTTP status) and how long it
took: never a key, a token, an argument's value or a draft's text. The MCP dispatcher
writes an accepted call's record inside the transaction of the call's step; refusals at
the HTTP level are recorded by the MCP gate and the API's middleware.

The access-log line goes to the logger ``guidepost.access`` when the record commits
(``access_log`` alone when the record cannot be written), as ``key=… client=… peer=…
tool=… run=… outcome=… status=… ms=…``; values with spaces or control characters are
quoted as JSON strings, so one call is always one line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from access_app.models import AuditRecord
from flows_app.domain.text import CONTROLS

logger = logging.getLogger("guidepost.access")

# What a record keeps of a run id: only what looks like one (an id is never a value).
# What the trail calls an MCP resource read (a call like a tool's, spec §5.8).
RESOURCE_READ = "resources/read"
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
    """``name/version`` of a client, as records and log lines show it."""
    if not name:
        return ""
    return clean(f"{name}/{version}" if version else name, 200)


def audit_record(entry: Entry) -> None:
    """Write ``entry``'s record, in the caller's transaction when there is one, and log its
    line once that transaction commits (at once without one)."""
    AuditRecord.objects.create(
        at=timezone.now(),
        key_name=entry.key_name[:64],
        caller=clean(entry.caller, 200),
        client=clean(entry.client, 200),
        peer=entry.peer[:64],
        tool=clean(entry.tool, 100),
        run_id=run_id_of(entry.run_id),
        outcome=clean(entry.outcome, 64),
        status=entry.status,
        duration_ms=round(entry.duration_ms, 3),
    )
    transaction.on_commit(lambda: access_log(entry))


def access_log(entry: Entry) -> None:
    """The access-log line of ``entry`` (one line, whatever the entry holds)."""
    fields = {
        "key": entry.key_name,
        "client": clean(entry.client, 200),
        "peer": entry.peer,
        "tool": clean(entry.tool, 100),
        "run": run_id_of(entry.run_id),
        "outcome": clean(entry.outcome, 64),
        "status": str(entry.status),
        "ms": f"{entry.duration_ms:.1f}",
    }
    logger.info(" ".join(f"{name}={_logfmt(value)}" for name, value in fields.items()))


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
        serialized = getattr(connection, "serialized", None)  # SQLite's writer queue, ADR 0039
        with serialized() if serialized is not None else contextlib.nullcontext():
            audit_record(entry)
    except Exception:
        logging.getLogger(__name__).exception("could not write an audit record")
        access_log(entry)
