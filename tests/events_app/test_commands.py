"""``guidepost-mcp webhook add|list|remove|test|rotate`` (spec §8)."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from events_app import worker
from events_app.models import Delivery, Subscription

pytestmark = pytest.mark.django_db

URL = "http://127.0.0.1:9/hook"


@pytest.fixture(autouse=True)
def private_allowed(settings: Any) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = True


def webhook(*args: str) -> list[str]:
    out = io.StringIO()
    call_command("webhook", *args, stdout=out)
    return out.getvalue().splitlines()


def test_add_prints_the_signing_secret_on_its_last_line() -> None:
    lines = webhook("add", URL, "--events", "run.stalled,run.completed", "--include-values")
    subscription = Subscription.objects.get()
    assert lines[-1] == subscription.secret and lines[-1].startswith("whsec_")
    assert subscription.events == ["run.stalled", "run.completed"]
    assert subscription.include_values and subscription.format == "standard"


def test_list_remove_and_test() -> None:
    webhook("add", URL, "--events", "draft.submitted", "--format", "slack")
    pk = Subscription.objects.get().pk
    [line] = webhook("list")
    assert line.startswith(f"{pk}\t{URL}\tdraft.submitted\tslack")
    assert "queued" in webhook("test", str(pk))[0]
    assert Delivery.objects.get().event.kind == "webhook.test"
    webhook("remove", str(pk))
    assert not Subscription.objects.exists()
    assert webhook("list")[0].startswith("no subscriptions")


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["add", URL, "--events", "run.exploded"], "unknown event: run.exploded is not an event"),
        (["remove", "99"], "subscription not found"),
        (["test", "99"], "subscription not found"),
        (["rotate", "99"], "subscription not found"),
    ],
)
def test_a_refusal_is_one_line_in_the_projects_words(args: list[str], error: str) -> None:
    with pytest.raises(CommandError, match=error):
        webhook(*args)


def test_a_loopback_url_is_refused_without_the_setting(settings: Any) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(CommandError, match="GUIDEPOST_WEBHOOK_ALLOW_PRIVATE=1"):
        webhook("add", URL, "--events", "run.stalled")
    assert not Subscription.objects.exists()


@pytest.mark.hostile
def test_rotate_prints_a_new_secret_once_and_keeps_the_old_one_for_the_grace_period(
    settings: Any,
) -> None:
    settings.GUIDEPOST_WEBHOOK_SECRET_GRACE = 3600.0
    old = webhook("add", URL, "--events", "run.stalled")[-1]
    pk = Subscription.objects.get().pk
    before = timezone.now()
    lines = webhook("rotate", str(pk))
    subscription = Subscription.objects.get()
    assert lines[-1] == subscription.secret != old and lines[-1].startswith("whsec_")
    assert sum(line.count("whsec_") for line in lines) == 1, "the new secret alone, once"
    assert subscription.previous_secret == old
    assert subscription.previous_secret_until is not None
    grace = subscription.previous_secret_until - before
    assert timedelta(seconds=3599) < grace < timedelta(seconds=3601)
    assert "whsec_" not in "".join(webhook("list"))


def test_list_says_why_the_last_try_was_refused(settings: Any) -> None:
    webhook("add", URL, "--events", "run.stalled")
    pk = Subscription.objects.get().pk
    webhook("test", str(pk))
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = False  # the server runs without it
    assert worker.tick() == 1
    [line] = webhook("list")
    assert line.endswith(
        "last try pending, HTTP -: address refused: 127.0.0.1 resolves to 127.0.0.1, not a "
        "public address (private, loopback, link-local, multicast or reserved); set "
        "GUIDEPOST_WEBHOOK_ALLOW_PRIVATE=1 to allow such receivers"
    )
