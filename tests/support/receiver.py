"""A webhook receiver, or a lookup's endpoint, for tests: a real HTTP server on a loopback
port, in a thread of the test process, that verifies every request with the
``standardwebhooks`` package (as an integrator's receiver would) and answers from a script
of status codes with a body of its own, or, as a slow loris, one header line at a time."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests.support.waiting import wait_until


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    verified: bool  # the signature checked out with the secret given
    at: float = field(default_factory=time.monotonic)  # when it was read

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def webhook_id(self) -> str:
        return self.headers.get("webhook-id", "")


@dataclass
class Receiver:
    port: int = 0
    secret: str = ""  # set once the subscription exists
    # Status codes answered in turn; past the end, ``then``.
    script: list[int] = field(default_factory=list)
    then: int = 200
    reply: bytes = b"ok"  # the body of every answer (a lookup's endpoint answers JSON)
    hold: float = 0.0  # seconds to wait before answering the next request (once)
    # A slow loris: every answer's header lines one every ``drip`` seconds, for ``drip_for``
    # seconds, each within any time-out a single read has.
    drip: float = 0.0
    drip_for: float = 0.0
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Called while a request is held, before it is answered (what the caller does then).
    during: Callable[[], None] | None = None

    # An https receiver (``receiving(tls=...)``) is named by the name its certificate holds.
    scheme: str = "http"
    host: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}/hook"

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        def arrived() -> list[Received] | None:
            with self.lock:
                return list(self.received) if len(self.received) >= count else None

        return wait_until(
            arrived, timeout, 0.02, lambda: f"expected {count} requests, got {len(self.received)}"
        )

    def handle(self, path: str, headers: dict[str, str], body: bytes) -> int:
        verified = False
        if self.secret:
            try:
                Webhook(self.secret).verify(body, headers, json_parse=False)
                verified = True
            except WebhookVerificationError:
                verified = False
        with self.lock:
            self.received.append(Received(path, headers, body, verified))
            hold, self.hold = self.hold, 0.0
            status = self.script.pop(0) if self.script else self.then
        if hold:
            time.sleep(hold)
        if self.during is not None:
            self.during()
        return status


@contextmanager
def receiving(tls: ssl.SSLContext | None = None, **options: Any) -> Iterator[Receiver]:
    """A receiver (``options``: Receiver's); with ``tls``, an https one of that context,
    named ``localhost``."""
    receiver = Receiver(**options)
    if tls is not None:
        receiver.scheme, receiver.host = "https", "localhost"

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            status = receiver.handle(self.path, headers, body)
            if receiver.drip:
                self.drip(status)
                return
            self.send_response(status)
            if 300 <= status < 400:
                self.send_header("Location", "/elsewhere")
            self.send_header("Content-Length", str(len(receiver.reply)))
            self.end_headers()
            try:
                self.wfile.write(receiver.reply)
            except OSError:
                pass  # the sender read what it keeps and left

        def drip(self, status: int) -> None:
            self.close_connection = True
            ends = time.monotonic() + receiver.drip_for
            try:
                self.wfile.write(f"HTTP/1.1 {status} OK\r\n".encode())
                while time.monotonic() < ends:
                    self.wfile.write(b"X-Slow: 1\r\n")
                    time.sleep(receiver.drip)
                self.wfile.write(b"Content-Length: 2\r\n\r\nok")
            except OSError:
                pass  # the sender gave up

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", receiver.port), Handler)
    server.daemon_threads = True
    server.block_on_close = False  # a held request does not hold the test up
    receiver.port = server.server_address[1]
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    # Stopped at the end of each test: shutdown() waits for the loop's next poll.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
