"""One signed POST out of the server: a webhook's try and a lookup's call.

The body is signed as Standard Webhooks sign it: ``webhook-signature: v1,<base64
HMAC-SHA256 of "id.timestamp.body">`` (the ``standardwebhooks`` package), one ``v1,…`` per
secret, space-separated. The POST goes to the address ``addresses.resolve`` checked, or
through the proxy the environment names (``events_app.proxies``), follows no redirect,
and has ``timeout`` seconds in all, from connecting to the answer's end: a POST still
under way then is cut off, and has failed. Of the answer's body at most ``keep`` bytes
are read.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from standardwebhooks.webhooks import Webhook

from events_app.addresses import AddressRefused, Target, resolve
from events_app.proxies import Proxy, ProxyMisconfigured, proxy_for


@dataclass(frozen=True)
class Answered:
    """What came back: a status and the first ``keep`` bytes of the body, or, without a
    status, why not (``error``)."""

    status: int | None
    body: bytes
    response_ms: float | None  # None: refused before anything was sent
    error: str  # "" when a status came back


def signed_headers(
    message_id: str, secrets: Sequence[str], body: str, *, user_agent: str
) -> dict[str, str]:
    """The headers of a POST of ``body``, signed now with each of ``secrets``."""
    at = datetime.now(UTC)
    signature = " ".join(Webhook(secret).sign(message_id, at, body) for secret in secrets)
    return {
        "content-type": "application/json",
        "user-agent": user_agent,
        "webhook-id": message_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
    }


def post(url: str, headers: dict[str, str], body: bytes, *, timeout: float, keep: int) -> Answered:
    """POST ``body`` to ``url`` once. Never raises for what the network or the receiver
    does: a refused address, a misconfigured proxy, a POST past its deadline and a
    refused connection are each an ``error`` in words."""
    started = time.monotonic()
    try:
        target = resolve(url)
        proxy = proxy_for(target.scheme, target.host)
        status, got = _post(target, proxy, headers, body, timeout=timeout, keep=keep)
    except AddressRefused as exc:
        return Answered(None, b"", None, f"address refused: {exc}")
    except ProxyMisconfigured as exc:
        return Answered(None, b"", None, f"proxy refused: {exc}")
    except (OSError, http.client.HTTPException) as exc:
        elapsed = (time.monotonic() - started) * 1000
        reason = str(exc)
        if isinstance(exc, TimeoutError | socket.timeout):  # each one is the deadline's
            reason = f"timed out: no whole answer within {timeout:g} s"
        return Answered(None, b"", elapsed, f"{type(exc).__name__}: {reason}")
    return Answered(status, got, (time.monotonic() - started) * 1000, "")


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verifying context per process: making one loads the system's certificates,
    milliseconds of CPU that every try to an https address paid."""
    return ssl.create_default_context()


class _Deadline:
    """One deadline for a whole POST. A socket's time-out applies to each read: a receiver
    sending a header line every few seconds held a try for minutes, each read in time. At
    the deadline the connection is shut down, which ends whatever read or write is under
    way (TLS's handshake too), and the POST has failed."""

    def __init__(self, seconds: float) -> None:
        self.passed = False
        self._ends = time.monotonic() + seconds
        self._lock = threading.Lock()
        # A duplicate of the connection's socket, ours alone: shutting it down ends the
        # connection whatever wraps it, and it is closed only by ``end``, so the cut can
        # never reach another socket that took the number of a closed one.
        self._socket: socket.socket | None = None
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        left = self._ends - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        return left

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            if self.passed:
                sock.close()
                raise TimeoutError("timed out")
            self._socket = sock.dup()

    def _cut(self) -> None:
        with self._lock:
            self.passed = True
            if self._socket is not None:
                with contextlib.suppress(OSError):
                    self._socket.shutdown(socket.SHUT_RDWR)

    def end(self) -> None:
        self._timer.cancel()
        with self._lock:
            if self._socket is not None:
                self._socket.close()
                self._socket = None


def _post(
    target: Target,
    proxy: Proxy | None,
    headers: dict[str, str],
    body: bytes,
    *,
    timeout: float,
    keep: int,
) -> tuple[int, bytes]:
    # Without a proxy: the address resolve() checked, never a second lookup (DNS
    # rebinding). Through one: the proxy, asked for the receiver by name (its allow-lists
    # know names; the name's addresses were checked here all the same).
    host, port = (proxy.host, proxy.port) if proxy else (target.address, target.port)
    connection: http.client.HTTPConnection
    if target.scheme == "https":
        connection = http.client.HTTPSConnection(
            target.host, target.port, timeout=timeout, context=_tls_context()
        )
        if proxy:
            connection.set_tunnel(target.host, target.port, headers=proxy.headers())
    else:
        connection = http.client.HTTPConnection(target.host, target.port, timeout=timeout)
    path = target.path
    if proxy and target.scheme == "http":  # the whole request goes to the proxy
        name = f"[{target.host}]" if ":" in target.host else target.host  # IPv6
        path = f"http://{name}:{target.port}{target.path}"
        headers = {**headers, **proxy.headers()}

    def connect(_address: tuple[str, int], _timeout: float, source: Any = None) -> socket.socket:
        sock = socket.create_connection((host, port), deadline.remaining(), source)
        deadline.watch(sock)
        return sock

    connection._create_connection = connect  # type: ignore[attr-defined]
    deadline = _Deadline(timeout)
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        got = response.read(keep)
    except (OSError, http.client.HTTPException) as exc:
        if deadline.passed:
            raise TimeoutError("timed out") from exc
        raise
    finally:
        deadline.end()
        connection.close()
    if deadline.passed:  # an answer cut short may read as a whole one
        raise TimeoutError("timed out")
    return response.status, got
