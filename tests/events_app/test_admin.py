"""Webhooks in the admin: a subscription added there is checked as on the command line,
its secret is shown once, when it is added, and never again (a fingerprint instead), and
the delivery log redelivers (spec §8)."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from events_app import services, worker
from events_app.models import Delivery, Event, Subscription

pytestmark = pytest.mark.django_db

URL = "http://127.0.0.1:9/hook"
SUBSCRIPTIONS = "/admin/events_app/subscription/"
SECRET = re.compile(r"whsec_[A-Za-z0-9+/=]{32}")


def add(client: Client, url: str) -> Any:
    return client.post(
        "/admin/events_app/subscription/add/",
        {"url": url, "events": ["run.stalled", "run.closed"], "format": "standard"},
    )


def fingerprint(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()[:12]


def pages_of(client: Client, subscription: Subscription) -> dict[str, str]:
    """Every admin page that shows the subscription, as a superuser reads it."""
    paths = ["", "?q=hook", f"{subscription.pk}/change/", f"{subscription.pk}/history/"]
    pages = {path: client.get(SUBSCRIPTIONS + path) for path in paths}
    assert {path: page.status_code for path, page in pages.items()} == dict.fromkeys(paths, 200)
    return {path: page.content.decode() for path, page in pages.items()}


@pytest.mark.hostile
def test_a_subscription_added_in_the_admin_shows_its_secret_once(
    admin_client: Client, settings: Any
) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = True
    response = add(admin_client, URL)
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    [shown] = SECRET.findall(response.content.decode())
    subscription = Subscription.objects.get()
    assert shown == subscription.secret
    assert subscription.events == ["run.stalled", "run.closed"]
    assert subscription.created_by == "staff:admin"
    for path, html in pages_of(admin_client, subscription).items():
        assert shown not in html and shown.removeprefix("whsec_") not in html, path
    assert fingerprint(shown) in pages_of(admin_client, subscription)[""]


@pytest.mark.hostile
def test_a_superuser_never_sees_a_subscriptions_secret_only_its_fingerprint(
    admin_client: Client, settings: Any
) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = True
    subscription = services.subscription_add(url=URL, events=["run.closed"])
    pages = pages_of(admin_client, subscription)
    for path, html in pages.items():
        assert not SECRET.search(html), path
        assert subscription.secret.removeprefix("whsec_") not in html, path
    assert fingerprint(subscription.secret) in pages[""]
    assert fingerprint(subscription.secret) in pages[f"{subscription.pk}/change/"]

    old, new = subscription.secret, services.subscription_rotate(subscription.pk).secret
    pages = pages_of(admin_client, subscription)
    for path, html in pages.items():
        assert not SECRET.search(html), path
        for secret in (old, new):
            assert secret.removeprefix("whsec_") not in html, path
    change = pages[f"{subscription.pk}/change/"]
    assert fingerprint(new) in change and f"{fingerprint(old)}, signs too until" in change


def test_a_loopback_url_is_refused_in_the_admin_as_on_the_command_line(
    admin_client: Client,
) -> None:
    response = add(admin_client, URL)
    assert response.status_code == 200
    assert "GUIDEPOST_WEBHOOK_ALLOW_PRIVATE=1" in response.content.decode()
    assert not Subscription.objects.exists()


def test_the_delivery_log_lists_tries_and_redelivers(admin_client: Client, settings: Any) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = True
    subscription = services.subscription_add(url=URL, events=["run.closed"])
    now = timezone.now()
    event = Event.objects.create(kind="run.closed", data={"run_id": "r_x"}, created_at=now)
    delivery = Delivery.objects.create(
        event=event,
        subscription=subscription,
        state=Delivery.State.FAILED,
        attempts=7,
        last_status=503,
        last_response_ms=12.0,
        last_error="HTTP 503: down",
        next_attempt_at=now,
        retry_since=now,
    )
    page = admin_client.get("/admin/events_app/delivery/").content.decode()
    assert event.message_id in page and "HTTP 503: down" in page
    admin_client.post(
        "/admin/events_app/delivery/",
        {"action": "redeliver", "_selected_action": [delivery.pk]},
    )
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts) == ("pending", 7)


def test_the_subscription_list_says_why_the_last_try_was_refused(
    admin_client: Client, settings: Any
) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = True
    subscription = services.subscription_add(url=URL, events=["run.closed"])
    services.subscription_test(subscription.pk)
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = False
    assert worker.tick() == 1
    reason = "address refused: 127.0.0.1 resolves to 127.0.0.1, not a public address"
    for path in ("", f"{subscription.pk}/change/"):
        page = admin_client.get(SUBSCRIPTIONS + path).content.decode()
        assert "last try pending, HTTP -: " + reason in page, path
