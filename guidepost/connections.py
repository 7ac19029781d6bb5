"""uvicorn's h11 protocol with read deadlines: a client cannot hold a connection by
sending its request slowly (slowloris). ADR 0034.

uvicorn bounds an idle keep-alive connection (``timeout_keep_alive``), but nothing
else: a connection that sends half a request line, or headers one byte a minute,
or a body that never ends, is kept for ever (the first byte of a new request even
cancels the keep-alive timer). Here:

- the request line and headers must be complete within GUIDEPOST_HEADER_TIMEOUT
  seconds of the connection opening (or of the previous response ending);
- the body must be complete within GUIDEPOST_BODY_TIMEOUT seconds of the headers.

Past either deadline the connection is closed; an application still waiting for the
body sees the client disconnect. Nothing changes once a request has been read: a
slow tool call is the server's own time, not the client's.
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

_timeouts: tuple[float, float] | None = None


def read_timeouts() -> tuple[float, float]:
    """(header, body) deadlines in seconds, from the settings (read once per process)."""
    global _timeouts
    if _timeouts is None:
        from django.conf import settings

        _timeouts = (settings.GUIDEPOST_HEADER_TIMEOUT, settings.GUIDEPOST_BODY_TIMEOUT)
    return _timeouts


class DeadlineH11Protocol(H11Protocol):
    """H11Protocol plus one timer per connection: the deadline of what the client must
    send next (headers, then body)."""

    _deadline: asyncio.TimerHandle | None = None
    _waiting_for: str = ""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._expect("headers")

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._expect("headers")  # the next request's, if the client sends one
            self._follow()  # a pipelined request may already have been read

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def _follow(self) -> None:
        """Move the deadline along with what the client has sent so far."""
        state = self.conn.their_state
        if state is h11.IDLE:
            return  # still waiting for a request line and headers: the deadline stands
        if state is h11.SEND_BODY:
            if self._waiting_for != "body":
                self._expect("body")
            return
        self._cancel()  # the request is read (or the connection is ending)

    def _expect(self, what: str) -> None:
        self._cancel()
        header, body = read_timeouts()
        self._waiting_for = what
        self._deadline = self.loop.call_later(
            header if what == "headers" else body, self._expired, what
        )

    def _cancel(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = None
        self._waiting_for = ""

    def _expired(self, what: str) -> None:
        self._deadline = None
        self._waiting_for = ""
        waiting = self.conn.their_state is (h11.IDLE if what == "headers" else h11.SEND_BODY)
        if waiting and not self.transport.is_closing():
            self.logger.debug("closing a connection whose request %s did not arrive in time", what)
            self.transport.close()


def protocol_class_path() -> str:
    """What ``uvicorn.Config(http=...)`` takes: the class by import path (worker processes
    are spawned, so the class must be importable, not passed)."""
    return f"{__name__}:{DeadlineH11Protocol.__name__}"


__all__ = ["DeadlineH11Protocol", "protocol_class_path", "read_timeouts"]
