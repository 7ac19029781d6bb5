"""An HTTP forward proxy for tests, on a loopback port in a thread of the test process, as
an egress proxy (squid, a corporate gateway) works: ``CONNECT host:port`` opens a tunnel,
and a request with an absolute URL (``POST http://host:port/path``) is passed on. It
remembers each request line and the ``Proxy-Authorization`` that came with it, and can
ask for credentials (407) or refuse every request (403), as a proxy's rules would."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from tests.support.tcp_proxy import pipe


@dataclass
class EgressProxy:
    port: int = 0
    authorization: str = ""  # the Proxy-Authorization a request must carry; "" for any
    refuse: bool = False  # answer every request 403, as a proxy's deny rule
    requests: list[tuple[str, str]] = field(default_factory=list)  # (line, authorization)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def lines(self) -> list[str]:
        with self.lock:
            return [line for line, _ in self.requests]

    def serve(self, client: socket.socket) -> None:
        with client:
            head = b""
            while b"\r\n\r\n" not in head:
                data = client.recv(65536)
                if not data:
                    return
                head += data
            head, rest = head.split(b"\r\n\r\n", 1)
            line, *header_lines = head.decode("latin-1").split("\r\n")
            headers = dict(h.split(": ", 1) for h in header_lines if ": " in h)
            given = headers.get("Proxy-Authorization", "")
            with self.lock:
                self.requests.append((line, given))
            if self.refuse:
                client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                return
            if self.authorization and given != self.authorization:
                client.sendall(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                    b'Proxy-Authenticate: Basic realm="egress"\r\nContent-Length: 0\r\n\r\n'
                )
                return
            method, target, version = line.split(" ")
            if method == "CONNECT":
                host, port = target.rsplit(":", 1)
                upstream = socket.create_connection((host, int(port)))
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                upstream.sendall(rest)
            else:  # an absolute URL: passed on in origin form, without the proxy's header
                parts = urlsplit(target)
                upstream = socket.create_connection((parts.hostname, parts.port or 80))
                kept = [h for h in header_lines if not h.startswith("Proxy-Authorization:")]
                path = parts.path + (f"?{parts.query}" if parts.query else "")
                upstream.sendall(
                    "\r\n".join([f"{method} {path} {version}", *kept]).encode("latin-1")
                    + b"\r\n\r\n"
                    + rest
                )
            with upstream:
                other = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
                other.start()
                pipe(client, upstream)
                other.join(timeout=30)


@contextmanager
def egress_proxy(*, authorization: str = "", refuse: bool = False) -> Iterator[EgressProxy]:
    proxy = EgressProxy(authorization=authorization, refuse=refuse)
    listener = socket.create_server(("127.0.0.1", 0))
    proxy.port = int(listener.getsockname()[1])

    def accept() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=proxy.serve, args=(client,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield proxy
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
