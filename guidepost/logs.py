"""The server's log: one line per record, as text or JSON; a refused request is one line,
not a traceback.

Django logs every refused request, and attaches the exception of one raised as such
(``PermissionDenied``, ``Http404`` …): about 45 lines of traceback for a staff member
opening a page they may not see. This filter, on the console handler, turns each such
record into one line saying who, what (method and path) and why (the status and the
refusal's reason). A 503 for a database that cannot be reached is a refusal too; any
other 500 keeps its traceback, which is what it is for. A request under /api/ already
has its access-log line (``guidepost.access``), so Django's line for it is dropped.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import Any

API_PREFIX = "/api/"
_CONTROLS = re.compile(r"[\x00-\x1f\x7f]")


def clean(text: str, limit: int) -> str:
    """``text`` on one line (control characters shown as ``?``), cut to ``limit``.

    >>> clean("a\\nb", 10), clean("abcdef", 3)
    ('a?b', 'abc…')
    """
    text = _CONTROLS.sub("?", text)
    return text if len(text) <= limit else text[:limit] + "…"


class OneLineRefusals(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        request = getattr(record, "request", None)
        if not isinstance(status, int) or request is None or status < 400:
            return True
        if status >= 500 and status != 503:
            return True  # a failure of the server's own: its traceback is the point
        path = str(getattr(request, "path", ""))
        if path.startswith(API_PREFIX):
            return False  # its access-log line says it all
        why = _why(record, status)
        record.msg = "refused %s %s: %s %s (%s)"
        record.args = (
            clean(str(getattr(request, "method", "")), 16),
            clean(path, 200),
            status,
            clean(why, 300),
            _who(request),
        )
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True


def _why(record: logging.LogRecord, status: int) -> str:
    """The refusal's reason: the exception's words when there is one, else Django's."""
    exc = record.exc_info[1] if record.exc_info else None
    if exc is not None:
        words = str(exc).strip().splitlines()
        return words[0] if words else type(exc).__name__
    try:
        message = record.getMessage()
    except (TypeError, ValueError):
        message = str(record.msg)
    return message.split(":", 1)[0]  # "Not Found: /x" -> "Not Found"


def _who(request: Any) -> str:
    """The person (if Django looked them up: never a database query here), or the agent
    key, and the address."""
    peer = clean(str(getattr(request, "META", {}).get("REMOTE_ADDR", "") or "-"), 64)
    user = getattr(request, "_cached_user", None)
    if user is not None and getattr(user, "is_authenticated", False):
        return f"user {clean(str(user.get_username()), 64)} from {peer}"
    caller = getattr(request, "auth", None)
    key_name = getattr(caller, "key_name", "")
    if key_name:
        return f"key {clean(str(key_name), 64)} from {peer}"
    if user is None and getattr(request, "COOKIES", {}).get("sessionid"):
        return f"a session not looked at, from {peer}"  # refused before anyone asked who
    return f"not signed in, from {peer}"


# --- the two formats of a line (GUIDEPOST_LOG_FORMAT) ---------------------------------------


class PlainLines(logging.Formatter):
    """``time LEVEL logger: message``, with ``request=ID`` after a record logged for an HTTP
    request (the access line says it among its own fields)."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        request_id = getattr(record, "request_id", "")
        if request_id and not hasattr(record, "access"):
            first, newline, rest = line.partition("\n")  # a traceback's lines follow
            line = f"{first} request={request_id}{newline}{rest}"
        return line


class JsonLines(logging.Formatter):
    """One JSON object per line: ``time`` (UTC, ISO 8601), ``level``, ``logger``,
    ``message``, ``request_id`` for a record logged for an HTTP request, an access line's
    fields as keys of their own (``caller``, ``client``, ``peer``, ``tool``, ``run_id``,
    ``outcome``, ``status``, ``ms``, ``count``), and ``exception`` with a traceback.

    >>> record = logging.makeLogRecord({"name": "guidepost.access", "levelname": "INFO",
    ...     "msg": "key=k", "created": 0, "request_id": "r1", "access": {"tool": "guide_flows"}})
    >>> JsonLines().format(record)
    '{"time":"1970-01-01T00:00:00.000Z","level":"INFO","logger":"guidepost.access","message":"key=k","request_id":"r1","tool":"guide_flows"}'
    """

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", "")
        if request_id:
            line["request_id"] = request_id
        line.update(getattr(record, "access", {}))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"), default=str)
