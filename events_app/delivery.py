"""One try of one delivery: the body, its Standard Webhooks signature, one POST.

The body is built from the stored event the same way on every try, and signed with the
event's ``webhook-id`` and the try's timestamp with the subscription's secret; during a
rotation's grace period a second ``v1,…`` with the secret before. The POST is
``events_app.outbound``'s (the address guard, the egress proxy, one deadline): it follows
no redirect (a 3xx is a failed try) and has GUIDEPOST_WEBHOOK_TIMEOUT seconds in all,
from connecting to the answer's end.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from events_app.models import Event, Subscription
from events_app.outbound import post, signed_headers
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
            "run.looked_up": _looked_up(data.get("lookup") or {}),
        }.get(kind, kind)
        note = f" Hand-over note: {data['handoff']}" if data.get("handoff") else ""
        return f"guidepost: run {run} of {flow} {what}.{note} {url}".strip()
    if kind.startswith("draft."):
        verb = kind.removeprefix("draft.")
        return f"guidepost: a draft of {data.get('flow_id')} was {verb}. {url}".strip()
    return f"guidepost: a test message for this subscription. {url}".strip()


def _looked_up(lookup: dict[str, Any]) -> str:
    took = lookup.get("failed") or f"answered {lookup.get('took')}"
    return f"asked {lookup.get('endpoint')} at {lookup.get('node')}: {took} ({lookup.get('ms')} ms)"


def attempt(event: Event, subscription: Subscription) -> Outcome:
    """POST the event to the subscription once. A 2xx is delivered; anything else (another
    status, a redirect, a refused address, a try past its deadline, a refused connection)
    is an error."""
    body = body_of(event, subscription)
    secrets = subscription.signing_secrets(datetime.now(UTC))
    headers = signed_headers(event.message_id, secrets, body, user_agent=USER_AGENT)
    answered = post(
        subscription.url,
        headers,
        body.encode(),
        timeout=settings.GUIDEPOST_WEBHOOK_TIMEOUT,
        keep=ERROR_KEPT,
    )
    status, elapsed = answered.status, answered.response_ms
    if status is None:
        return Outcome(False, None, elapsed, answered.error[:ERROR_KEPT])
    if 200 <= status < 300:
        return Outcome(True, status, elapsed, "")
    text = answered.body.decode("utf-8", "replace")
    why = "redirects are not followed" if 300 <= status < 400 else text.strip()
    return Outcome(False, status, elapsed, f"HTTP {status}: {why}"[:ERROR_KEPT])
