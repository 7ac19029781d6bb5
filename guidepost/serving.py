"""How ``serve`` runs uvicorn: it announces itself once it answers, and stops gracefully.

uvicorn listens only once its workers have imported the application (1 to 12 s), so "MCP
at …" is printed once ``GET /healthz`` answers: whoever reads it can connect at once. The
first SIGTERM or SIGINT drains the process (``guidepost.startup.drain``): /readyz answers
503, so a load balancer stops sending calls, a new request is refused with ``server
busy``, and those under way are answered before the process exits 0, after at most
GUIDEPOST_SHUTDOWN_GRACE seconds. A second SIGINT stops it at once; a second SIGTERM is
ignored (systemd and the supervisor each send one). With ``--workers N`` every worker
drains the same way.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Callable
from types import FrameType

import uvicorn
from uvicorn.supervisors import multiprocess

from guidepost.startup import drain, draining, in_flight

DRAIN_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class DrainingServer(uvicorn.Server):
    """uvicorn's server, draining on the first SIGTERM or SIGINT instead of closing."""

    _deadline: float | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig in DRAIN_SIGNALS and not draining():
            from django.conf import settings  # set up by now: the application is loaded

            drain()
            self._deadline = time.monotonic() + settings.GUIDEPOST_SHUTDOWN_GRACE
            return  # not captured: the process exits 0 once drained, not by the signal
        if sig == signal.SIGTERM:
            # Already draining: systemd signals every process of the service and the
            # supervisor passes its own signal on, so a worker gets SIGTERM twice. The
            # grace bounds the wait; a second Ctrl+C (SIGINT) stops it at once.
            return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        if self._deadline is not None and not self.should_exit:
            if in_flight() == 0 or time.monotonic() >= self._deadline:
                self.should_exit = True
        return await super().on_tick(counter)


class DrainingProcess(multiprocess.Process):
    """A worker of ``serve --workers N`` that serves with ``DrainingServer``."""

    @property
    def server(self) -> uvicorn.Server:
        if self._server is None:
            self._server = DrainingServer(config=self.config)
        return self._server


def run_workers(config: uvicorn.Config, sock: socket.socket) -> None:
    """uvicorn's supervisor of ``config.workers`` processes, each a ``DrainingProcess``.

    uvicorn builds its workers from its module's ``Process``; the supervisor process is
    ours, so that name is pointed at our class (the supervisor itself only passes signals
    on and waits for its workers)."""
    multiprocess.Process = DrainingProcess  # type: ignore[misc]
    multiprocess.Multiprocess(config, sockets=[sock]).run()


def probe_address(sock: socket.socket) -> tuple[str, int]:
    """Where this machine reaches the bound socket: a wildcard address through loopback."""
    host, port = sock.getsockname()[:2]
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return host, port


def answers_health(address: tuple[str, int], timeout: float = 1.0) -> bool:
    host, port = address
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            head = conn.recv(64)
    except OSError:
        return False
    return head.startswith(b"HTTP/1.1 200")


def announce_when_answering(
    sock: socket.socket, say: Callable[[], None], *, poll: float = 0.05
) -> threading.Thread:
    """Call ``say`` once /healthz on ``sock`` answers 200 (from a daemon thread)."""
    address = probe_address(sock)

    def wait() -> None:
        while not answers_health(address):
            time.sleep(poll)
        say()

    thread = threading.Thread(target=wait, name="announce", daemon=True)
    thread.start()
    return thread


__all__ = ["DrainingServer", "announce_when_answering", "run_workers"]
