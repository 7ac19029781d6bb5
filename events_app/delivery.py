"""One try of one delivery: the body, its Standard Webhooks signature, one POST.

The body is built from the stored event the same way on every try, and signed with the
event's ``webhook-id`` and the try's timestamp: ``webhook-signature: v1,<base64 HMAC-SHA256
of "id.timestamp.body">`` with the subscription's secret (the ``standardwebhooks``
package); during a rotation's grace period a second ``v1,…``, space-separated, with the
secret before. The POST goes to the address ``addresses.resolve`` checked, follows no
redirect (a 3xx is a failed try) and waits GUIDEPOST_WEBHOOK_TIMEOUT seconds at most.
"""

from __future__ import annotations

import functools
import http.client
import socket
import ssl
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from standardwebhooks.webhooks import Webhook

from events_app.addresses import AddressRefused, resolve
from events_app.models import Event, Subscription
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
    status, a redirect, a refused address, a time-out, a refused connection) is an error."""
    body = body_of(event, subscription)
    headers = signed_headers(event, subscription, body)
    started = time.monotonic()
    try:
        target = resolve(subscription.url)
        status, text = _post(target, headers, body.encode())
    except AddressRefused as exc:
        return Outcome(False, None, None, f"address refused: {exc}"[:ERROR_KEPT])
    except (OSError, http.client.HTTPException) as exc:
        elapsed = (time.monotonic() - started) * 1000
        reason = "timed out" if isinstance(exc, TimeoutError | socket.timeout) else str(exc)
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


def _post(target: Any, headers: dict[str, str], body: bytes) -> tuple[int, str]:
    timeout = settings.GUIDEPOST_WEBHOOK_TIMEOUT
    connection: http.client.HTTPConnection
    if target.scheme == "https":
        connection = http.client.HTTPSConnection(
            target.host, target.port, timeout=timeout, context=_tls_context()
        )
    else:
        connection = http.client.HTTPConnection(target.host, target.port, timeout=timeout)

    def to_checked_address(
        _address: tuple[str, int], timeout: float, source: Any = None
    ) -> socket.socket:
        # The address resolve() checked, never a second lookup (DNS rebinding).
        return socket.create_connection((target.address, target.port), timeout, source)

    connection._create_connection = to_checked_address  # type: ignore[attr-defined]
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        response = connection.getresponse()
        text = response.read(ERROR_KEPT).decode("utf-8", "replace")
        return response.status, text
    finally:
        connection.close()
