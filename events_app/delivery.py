"""One try of one delivery: the body, its Standard Webhooks signature, one POST.

The body is built from the stored event the same way on every try, and signed with the
event's ``webhook-id`` and the try's timestamp: ``webhook-signature: v1,<base64 HMAC-SHA256
of "id.timestamp.body">`` with the subscription's secret (the ``standardwebhooks``
package); during a rotation's grace period a second ``v1,…``, space-separated, with the
secret before. The POST goes to the address ``addresses.resolve`` checked, or through
the proxy the environment names (``events_app.proxies``), follows no redirect (a 3xx is a
failed try) and has GUIDEPOST_WEBHOOK_TIMEOUT seconds in all, from connecting to the
answer's end: a try still under way then is cut off, and has failed.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from standardwebhooks.webhooks import Webhook

from events_app.addresses import AddressRefused, Target, resolve
from events_app.models import Event, Subscription
from events_app.proxies import Proxy, ProxyMisconfigured, proxy_for
from flowcore.common.jsontext import compact_json

USER_AGENT = "guidepost-webhooks"
ERROR_KEPT = 500  # characters of an error or a response kept in the delivery log


@dataclass(frozen=True)
class Outcome:
    ok: bool
    status: int | None
    response_ms: float | None
    error: str


def body_of(event: Event, subscription: Subscription) -> str:
    """What is POSTed: ``{"type", "timestamp", "data"}``, the run's values in
    ``data.values`` only for a subscription with include_values; or, for the slack format,
    ``{"text": …}`` with the run's or draft's page."""
    data: dict[str, Any] = dict(event.data)
    if str(data.get("url", "")).startswith("/"):
        data["url"] = public_url(data["url"])
    if subscription.include_values and event.values is not None:
        data["values"] = event.values
    if subscription.format == Subscription.Format.SLACK:
        return compact_json({"text": slack_text(event.kind, data)})
    return compact_json(
        {
            "type": event.kind,
            "timestamp": event.created_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "data": data,
        }
    )


def public_url(path: str) -> str:
    """``path`` on this server as a person outside reaches it (GUIDEPOST_PUBLIC_URL; unset,
    the address ``serve`` listens on).

    An event records its page as a path, and the process that sends it adds the base: an
    event recorded by a command (``webhook test``, a draft sent from the command line)
    cannot know where ``serve --port`` listens, and the worker in ``serve`` can. An event
    recorded before holds a whole URL, sent as it is.
    """
    return settings.GUIDEPOST_PUBLIC_URL.rstrip("/") + path


def slack_text(kind: str, data: dict[str, Any]) -> str:
    """One line a person reads in a channel (Slack and Teams take ``{"text": …}``), escaped
    whole: an agent's close reason, a flow's id or hand-over note must not become a ping
    (``<!channel>``), a mention or a link whose text hides its address. The one link is
    the server's page, bare (Slack and Teams link it)."""
    return slack_escaped(_slack_line(kind, data))


def slack_escaped(text: str) -> str:
    """``text`` as Slack shows it as written: ``&``, ``<`` and ``>`` as entities."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_line(kind: str, data: dict[str, Any]) -> str:
    url = data.get("url", "")
    if kind.startswith("run."):
        flow = (data.get("flow") or {}).get("id", "")
        run = data.get("run_id", "")
        what = {
            "run.stalled": f"stalled at {data.get('node')} and waits for a person",
            "run.resumed": f"was answered by a person at {data.get('node')}",
            "run.completed": f"completed ({data.get('outcome')})",
            "run.closed": f"was closed: {data.get('reason', '')}",
        }.get(kind, kind)
        note = f" Hand-over note: {data['handoff']}" if data.get("handoff") else ""
        return f"guidepost: run {run} of {flow} {what}.{note} {url}".strip()
    if kind.startswith("draft."):
        verb = kind.removeprefix("draft.")
        return f"guidepost: a draft of {data.get('flow_id')} was {verb}. {url}".strip()
    return f"guidepost: a test message for this subscription. {url}".strip()


def signed_headers(event: Event, subscription: Subscription, body: str) -> dict[str, str]:
    at = datetime.now(UTC)
    signature = " ".join(
        Webhook(secret).sign(event.message_id, at, body)
        for secret in subscription.signing_secrets(at)
    )
    return {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": event.message_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
    }


def attempt(event: Event, subscription: Subscription) -> Outcome:
    """POST the event to the subscription once. A 2xx is delivered; anything else (another
    status, a redirect, a refused address, a try past its deadline, a refused connection)
    is an error."""
    body = body_of(event, subscription)
    headers = signed_headers(event, subscription, body)
    started = time.monotonic()
    try:
        target = resolve(subscription.url)
        proxy = proxy_for(target.scheme, target.host)
        status, text = _post(target, proxy, headers, body.encode())
    except AddressRefused as exc:
        return Outcome(False, None, None, f"address refused: {exc}"[:ERROR_KEPT])
    except ProxyMisconfigured as exc:
        return Outcome(False, None, None, f"proxy refused: {exc}"[:ERROR_KEPT])
    except (OSError, http.client.HTTPException) as exc:
        elapsed = (time.monotonic() - started) * 1000
        reason = str(exc)
        if isinstance(exc, TimeoutError | socket.timeout):  # each one is the deadline's
            reason = f"timed out: no whole answer within {settings.GUIDEPOST_WEBHOOK_TIMEOUT:g} s"
        return Outcome(False, None, elapsed, f"{type(exc).__name__}: {reason}"[:ERROR_KEPT])
    elapsed = (time.monotonic() - started) * 1000
    if 200 <= status < 300:
        return Outcome(True, status, elapsed, "")
    why = "redirects are not followed" if 300 <= status < 400 else text.strip()
    return Outcome(False, status, elapsed, f"HTTP {status}: {why}"[:ERROR_KEPT])


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verifying context per process: making one loads the system's certificates,
    milliseconds of CPU that every try to an https address paid."""
    return ssl.create_default_context()


class _Deadline:
    """One deadline for a whole try. A socket's time-out applies to each read: a receiver
    sending a header line every few seconds held a try for minutes, each read in time. At
    the deadline the connection is shut down, which ends whatever read or write is under
    way (TLS's handshake too), and the try has failed."""

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
    target: Target, proxy: Proxy | None, headers: dict[str, str], body: bytes
) -> tuple[int, str]:
    timeout = settings.GUIDEPOST_WEBHOOK_TIMEOUT
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
        text = response.read(ERROR_KEPT).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as exc:
        if deadline.passed:
            raise TimeoutError("timed out") from exc
        raise
    finally:
        deadline.end()
        connection.close()
    if deadline.passed:  # an answer cut short may read as a whole one
        raise TimeoutError("timed out")
    return response.status, text
