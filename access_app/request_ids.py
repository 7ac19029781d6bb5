"""One id per HTTP request, which every log line about it carries.

The ASGI router (``guidepost.asgi``) gives each request its id as it arrives: the
client's ``X-Request-ID`` when it is a plausible id (a proxy in front, or an agent's own
tracing, chose it), else a new one; it replaces the header the application sees and is
sent back in the response's. The code that answers reads it back from ``current``
(Django's views: the router's context; an MCP tool call, answered in a task of the SDK's
own: the dispatcher sets it from the header), and so do the access line, log records
(``RequestIds``) and the events a request records, whose webhook tries are logged with it.
"""

from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar

HEADER = "x-request-id"
# What a client's id may be: what request ids are made of (UUIDs, hex, base64, ULIDs,
# dotted trace ids), short enough for a log line; anything else is replaced, never echoed.
_PLAUSIBLE = re.compile(r"[A-Za-z0-9._:+/=-]{1,128}")

current: ContextVar[str] = ContextVar("guidepost_request_id", default="")


def current_request_id() -> str:
    """The id of the request being answered ("" outside any): a model field's default."""
    return current.get()


def request_id_for(given: str | None) -> str:
    """The id a request goes by: ``given`` (its ``X-Request-ID``) when plausible, else new.

    >>> request_id_for("req-7f3a.1"), len(request_id_for(None)), len(request_id_for("a b"))
    ('req-7f3a.1', 32, 32)
    """
    if given is not None and _PLAUSIBLE.fullmatch(given):
        return given
    return uuid.uuid4().hex


class RequestIds(logging.Filter):
    """Gives a record the id of the request it was logged for (``request_id``; "" outside
    any request), unless it was given one (``extra={"request_id": ...}``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", ""):
            record.request_id = current.get()
        return True
