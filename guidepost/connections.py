"""uvicorn's httptools protocol with read deadlines: a client cannot hold a connection by
sending its request slowly (slowloris).

The request line and headers must arrive within GUIDEPOST_HEADER_TIMEOUT seconds of the
connection opening (or of a kept-alive request's first byte), and the body within
GUIDEPOST_BODY_TIMEOUT seconds of the headers; past either the connection is closed. Once
a request is read nothing changes: a slow tool call is the server's time, not the
client's. uvicorn's ``limit_concurrency`` counts idle connections too, so 1,000 silent
connections made every new request a 503; here the limit counts requests being served,
and a request past it gets the error object (``server busy``) rather than plain text.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from flowcore.common.errors import Unavailable, error_body

# What a request past the limit gets: the error object, as for a busy database.
RETRY_AFTER_SECONDS = 2
BUSY_BODY = error_body(
    Unavailable(
        "server busy",
        "the server is answering as many requests as it may at once",
        f"Call again in {RETRY_AFTER_SECONDS} seconds.",
        retryable=True,
        retry_after=RETRY_AFTER_SECONDS,
    )
)

_timeouts: tuple[float, float] | None = None


def read_timeouts() -> tuple[float, float]:
    """(header, body) deadlines in seconds, from the settings (read once per process)."""
    global _timeouts
    if _timeouts is None:
        from django.conf import settings

        _timeouts = (settings.GUIDEPOST_HEADER_TIMEOUT, settings.GUIDEPOST_BODY_TIMEOUT)
    return _timeouts


class DeadlineHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol plus one timer per connection: the deadline of what the client
    must send next (headers, then body).

    httptools reports a request as it is parsed (message begin, headers complete, message
    complete), which is all the deadline needs to follow: ``_reading`` is where the
    request being read stands ("" between requests, "headers", "body").
    """

    _deadline: asyncio.TimerHandle | None = None
    _waiting_for: str = ""
    _reading: str = ""
    _unanswered: int = 0  # requests read whose response has not ended

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        # uvicorn's own check would count idle connections too: requests only, here.
        self.request_limit = self.limit_concurrency
        self.limit_concurrency = None
        self.app = self._bounded(self.app)

    def _bounded(self, app: Any) -> Any:
        tasks = self.tasks  # the process's requests in flight, this one included

        async def bounded(scope: Any, receive: Any, send: Any) -> None:
            if self.request_limit is not None and len(tasks) > self.request_limit:
                self.logger.warning("Exceeded concurrency limit.")
                await _busy(send)
                return
            await app(scope, receive, send)

        return bounded

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._expect("headers")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._reading = "headers"
        if self._deadline is None:  # a pipelined request, read while the last one runs
            self._expect("headers")

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._reading = "body"
        self._expect("body")

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._reading = ""
        self._unanswered += 1
        self._cancel()  # the request is read

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._unanswered = max(0, self._unanswered - 1)
        # Idle now: uvicorn's keep-alive timer bounds it; the next request's headers get
        # their deadline from its first byte (on_message_begin).

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

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
        waiting = self._reading == "body" if what == "body" else self._reading != "body"
        if waiting and not self.transport.is_closing():
            self.logger.debug("closing a connection whose request %s did not arrive in time", what)
            self.transport.close()


async def _busy(send: Any) -> None:
    await _send_busy(send, BUSY_BODY)


async def refuse_busy(send: Any, reason: str) -> None:
    """Answer 503 ``server busy`` (the error object, retryable, ``Retry-After``)
    and close the connection: for a request this process will not take (it is draining)."""
    body = error_body(
        Unavailable(
            "server busy",
            reason,
            f"Call again in {RETRY_AFTER_SECONDS} seconds (another instance may answer).",
            retryable=True,
            retry_after=RETRY_AFTER_SECONDS,
        )
    )
    await _send_busy(send, body)


async def _send_busy(send: Any, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


def protocol_class_path() -> str:
    """What ``uvicorn.Config(http=...)`` takes: the class by import path (worker processes
    are spawned, so the class must be importable, not passed)."""
    return f"{__name__}:{DeadlineHttpToolsProtocol.__name__}"


__all__ = ["DeadlineHttpToolsProtocol", "protocol_class_path", "read_timeouts", "refuse_busy"]
