"""The endpoints lookups call, in the admin (issue 45): added under the command line's
rules, the secret shown once, when it is added, and never again (a fingerprint instead),
the name fixed once flows may call it, and "Test" calling the endpoint for real."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest
from django.test import Client

from events_app.endpoints import endpoint_add
from events_app.models import Endpoint
from tests.support.receiver import receiving

pytestmark = pytest.mark.django_db

URL = "http://127.0.0.1:9/lookup"
ENDPOINTS = "/admin/events_app/endpoint/"
SECRET = re.compile(r"whsec_[A-Za-z0-9+/=]{32}")


@pytest.fixture(autouse=True)
def private_allowed(settings: Any) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = True


def add(client: Client, **fields: object) -> Any:
    return client.post(ENDPOINTS + "add/", {"name": "crm", "url": URL, "timeout": 3, **fields})


def pages_of(client: Client, endpoint: Endpoint) -> dict[str, str]:
    """Every admin page that shows the endpoint, as a superuser reads it."""
    paths = ["", "?q=crm", f"{endpoint.pk}/change/", f"{endpoint.pk}/history/"]
    pages = {path: client.get(ENDPOINTS + path) for path in paths}
    assert {path: page.status_code for path, page in pages.items()} == dict.fromkeys(paths, 200)
    return {path: page.content.decode() for path, page in pages.items()}


@pytest.mark.hostile
def test_an_endpoint_added_in_the_admin_shows_its_secret_once(admin_client: Client) -> None:
    response = add(admin_client, timeout=2.5)
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    [shown] = SECRET.findall(response.content.decode())
    endpoint = Endpoint.objects.get()
    assert shown == endpoint.secret
    assert (endpoint.name, endpoint.url, endpoint.timeout) == ("crm", URL, 2.5)
    assert endpoint.created_by == "staff:admin"
    pages = pages_of(admin_client, endpoint)
    for path, html in pages.items():
        assert shown.removeprefix("whsec_") not in html, path
    assert hashlib.sha256(shown.encode()).hexdigest()[:12] in pages[""]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"name": "CRM orders"}, "lower-case letters, digits and"),
        ({"timeout": 11}, "less than or equal to 10"),
        ({"timeout": 0}, "greater than or equal to 0.1"),
        ({"url": "ftp://127.0.0.1/x"}, "the URL must start with https://"),
    ],
)
def test_the_admin_refuses_what_the_command_refuses(
    admin_client: Client, fields: dict[str, object], error: str
) -> None:
    response = add(admin_client, **fields)
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not Endpoint.objects.exists()


def test_a_loopback_url_is_refused_without_the_setting(admin_client: Client, settings: Any) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = False
    response = add(admin_client)
    assert "GUIDEPOST_WEBHOOK_ALLOW_PRIVATE=1" in response.content.decode()
    assert not Endpoint.objects.exists()


def test_a_name_is_fixed_once_added_and_a_new_url_is_checked_again(
    admin_client: Client, settings: Any
) -> None:
    endpoint = endpoint_add(name="crm", url=URL)
    change = f"{ENDPOINTS}{endpoint.pk}/change/"
    admin_client.post(change, {"name": "billing", "url": URL, "timeout": 4})
    endpoint.refresh_from_db()
    assert (endpoint.name, endpoint.timeout) == ("crm", 4.0)
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = False
    response = admin_client.post(change, {"url": "http://127.0.0.1:10/x", "timeout": 4})
    assert "not a public address" in response.content.decode()
    endpoint.refresh_from_db()
    assert endpoint.url == URL


def test_test_calls_the_selected_endpoints_and_says_what_came_back(admin_client: Client) -> None:
    with receiving() as receiver:
        endpoint = endpoint_add(name="crm", url=receiver.url)
        receiver.secret = endpoint.secret
        receiver.reply = json.dumps({"label": "found"}).encode()
        response = admin_client.post(
            ENDPOINTS, {"action": "test", "_selected_action": [endpoint.pk]}, follow=True
        )
    html = response.content.decode()
    assert "crm answered HTTP 200 in " in html
    assert "an answer: label &#x27;found&#x27;, values none" in html
    [got] = receiver.received
    assert got.verified
