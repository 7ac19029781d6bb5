"""A TCP proxy a test can cut: a database that stops answering, without touching the real
server (other tests use it). ``cut()`` closes the listening socket and every connection
through it, so new connections are refused and open ones are reset, as when PostgreSQL
goes down; ``restore()`` listens on the same port again, as when it comes back.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from urllib.parse import urlsplit, urlunsplit


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.port = 0
        self.restore()

    def restore(self) -> None:
        """Listen again (on the same port after a cut) and pass new connections on."""
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.port = int(self.listener.getsockname()[1])
        self._open = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while self._open:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                if not self._open:
                    client.close()
                    upstream.close()
                    return
                self._sockets |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    def cut(self) -> None:
        """Refuse new connections and reset the open ones."""
        with self._lock:
            self._open = False
            with contextlib.suppress(OSError):
                self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
            self.listener.close()
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    # SO_LINGER of 0: close() resets the connection, as a crashed server would
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    sock.close()
            self._sockets.clear()

    def url(self, database_url: str) -> str:
        """``database_url`` pointed at this proxy."""
        parts = urlsplit(database_url)
        netloc = parts.netloc.rsplit("@", 1)
        host = f"127.0.0.1:{self.port}"
        return urlunsplit(
            parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host)
        )


def pipe(source: socket.socket, sink: socket.socket) -> None:
    """Pass what ``source`` sends on to ``sink`` until it closes, then close its way out."""
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
