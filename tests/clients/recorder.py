"""A recording pass-through in front of a real server: how the client tests measure what
each client sends and receives.

Clients are pointed at the recorder's address; every request is forwarded unchanged
(method, path, headers, body) to the server and the answer returned unchanged. For
each exchange it keeps the JSON-RPC method, the tool name or resource URI, the bytes
of the request and response bodies and whether an ``Authorization`` header came
along: what docs/clients.md reports as the payload per call.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

# Headers that describe one hop, not the message: never forwarded as they came.
HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade"}
)


@dataclass(frozen=True)
class Exchange:
    http_method: str
    status: int
    method: str  # the JSON-RPC method ("" for a body that is not one)
    name: str  # the tool's name, or the resource's URI, when the method has one
    sent: int  # bytes of the request body
    received: int  # bytes of the response body
    authorized: bool  # an Authorization header came with the request


def describe(body: bytes) -> tuple[str, str]:
    """(JSON-RPC method, tool name or resource URI) of a request body.

    >>> describe(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"guide_start"}}')
    ('tools/call', 'guide_start')
    >>> describe(b'{"method":"resources/read","params":{"uri":"guidepost://flows/x"}}')
    ('resources/read', 'guidepost://flows/x')
    >>> describe(b'')
    ('', '')
    """
    try:
        message = json.loads(body)
    except ValueError:
        return "", ""
    if not isinstance(message, dict):
        return "", ""
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    return str(message.get("method", "")), str(params.get("name") or params.get("uri") or "")


def read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() != "chunked":
        return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
    chunks = []
    while size := int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16):
        chunks.append(handler.rfile.read(size))
        handler.rfile.readline()
    handler.rfile.readline()  # the empty line after the last chunk
    return b"".join(chunks)


class Recorder:
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.exchanges: list[Exchange] = []
        self.lock = threading.Lock()

    def take(self) -> list[Exchange]:
        """The exchanges recorded since the last take."""
        with self.lock:
            taken, self.exchanges = self.exchanges, []
        return taken

    def forward(self, handler: BaseHTTPRequestHandler) -> None:
        body = read_body(handler)
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in HOP_HEADERS}
        upstream = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            upstream.request(handler.command, handler.path, body=body or None, headers=headers)
            response = upstream.getresponse()
            answer = response.read()
            status, reply_headers = response.status, response.getheaders()
        finally:
            upstream.close()
        method, name = describe(body)
        exchange = Exchange(
            handler.command,
            status,
            method,
            name,
            len(body),
            len(answer),
            "Authorization" in handler.headers,
        )
        with self.lock:
            self.exchanges.append(exchange)
        handler.send_response(status)
        for key, value in reply_headers:
            if key.lower() not in HOP_HEADERS:
                handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(answer)))
        handler.end_headers()
        handler.wfile.write(answer)


@contextmanager
def recording(upstream: str) -> Iterator[tuple[str, Recorder]]:
    """A recorder in front of ``upstream`` (``http://host:port``): yields its own base
    address and the recorder."""
    recorder = Recorder(upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            recorder.forward(self)

        do_GET = do_DELETE = do_POST

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", recorder
    finally:
        server.shutdown()
        server.server_close()
