"""``guidepost-mcp endpoint add|list|remove|test``: operators register the endpoints
lookups call (issue 45), and ``test`` calls one as a lookup would, signed, for real."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError

from events_app.models import Endpoint
from tests.guidepost.test_cli import guidepost_mcp
from tests.support.commands import typed
from tests.support.receiver import Receiver, receiving
from tests.support.servers import fresh_database

pytestmark = pytest.mark.django_db

URL = "http://127.0.0.1:9/lookup"


@pytest.fixture(autouse=True)
def private_allowed(settings: Any) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = True


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as running:
        yield running


def endpoint(*args: str) -> list[str]:
    """``guidepost-mcp endpoint ARGS`` as an operator types it, its lines."""
    return typed("endpoint", *args).splitlines()


def test_add_prints_the_signing_secret_once_on_its_last_line() -> None:
    lines = endpoint("add", "crm", URL, "--timeout", "2.5")
    registered = Endpoint.objects.get()
    assert lines[-1] == registered.secret and lines[-1].startswith("whsec_")
    assert sum(line.count("whsec_") for line in lines) == 1
    assert lines[0] == f"endpoint crm: {URL} (timeout 2.5 s)"
    assert (registered.name, registered.url, registered.timeout) == ("crm", URL, 2.5)
    assert registered.created_by == "operator:endpoint add"


def test_an_endpoint_waits_three_seconds_unless_told() -> None:
    endpoint("add", "crm", URL)
    assert Endpoint.objects.get().timeout == 3.0


def test_list_shows_each_endpoint_with_its_secrets_print_never_the_secret() -> None:
    assert endpoint("list") == ["no endpoints (add one: guidepost-mcp endpoint add NAME URL)"]
    secret = endpoint("add", "crm", URL)[-1]
    endpoint("add", "billing", "http://127.0.0.1:9/billing", "--timeout", "10")
    listed = endpoint("list")
    fingerprints = {e.name: e.fingerprint for e in Endpoint.objects.all()}
    assert listed == [
        f"billing\thttp://127.0.0.1:9/billing\ttimeout 10 s\tsecret {fingerprints['billing']}",
        f"crm\t{URL}\ttimeout 3 s\tsecret {fingerprints['crm']}",
    ]
    assert secret.removeprefix("whsec_") not in "".join(listed)


def test_remove_forgets_the_endpoint() -> None:
    endpoint("add", "crm", URL)
    assert endpoint("remove", "crm") == ["endpoint crm removed"]
    assert not Endpoint.objects.exists()


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["add", "CRM", URL], "bad endpoint name: 'CRM' is not a name"),
        (["add", "crm", URL, "--timeout", "11"], "bad timeout: 11 s is not between 0.1 and 10"),
        (["add", "crm", URL, "--timeout", "0"], "bad timeout: 0 s is not between 0.1 and 10"),
        (["add", "crm", "ftp://127.0.0.1/x"], "endpoint URL refused: the URL must start with"),
        (["remove", "crm"], "endpoint not found: no endpoint is named 'crm'"),
        (["test", "crm"], "endpoint not found: no endpoint is named 'crm'"),
    ],
)
def test_a_refusal_is_one_line_in_the_projects_words(args: list[str], error: str) -> None:
    with pytest.raises(CommandError, match=error):
        endpoint(*args)
    assert not Endpoint.objects.exists()


def test_a_name_is_registered_once() -> None:
    endpoint("add", "crm", URL)
    with pytest.raises(CommandError, match="endpoint exists: an endpoint is named crm already"):
        endpoint("add", "crm", "http://127.0.0.1:9/other")
    assert Endpoint.objects.get().url == URL


def test_a_misspelt_name_is_offered_the_closest() -> None:
    endpoint("add", "crm_orders", URL)
    with pytest.raises(CommandError) as refused:
        endpoint("remove", "crm_order")
    assert str(refused.value) == (
        "endpoint not found: no endpoint is named 'crm_order'. Did you mean crm_orders? List "
        "them with guidepost-mcp endpoint list."
    )


def test_a_loopback_url_is_refused_without_the_setting(settings: Any) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(CommandError, match="GUIDEPOST_WEBHOOK_ALLOW_PRIVATE=1"):
        endpoint("add", "crm", URL)
    assert not Endpoint.objects.exists()


def test_test_sends_a_signed_test_call_and_says_what_came_back(receiver: Receiver) -> None:
    receiver.secret = endpoint("add", "crm", receiver.url)[-1]
    receiver.reply = json.dumps({"label": "found", "values": {"tier": "gold"}}).encode()
    lines = endpoint("test", "crm")
    [got] = receiver.received
    assert got.verified
    assert got.json == {"run_id": None, "flow": None, "node": None, "values": {}, "test": True}
    assert lines[0].startswith("endpoint crm answered HTTP 200 in ")
    assert lines[0].endswith(""" ms: '{"label": "found", "values": {"tier": "gold"}}'""")
    assert lines[1] == "an answer: label 'found', values tier"


def test_test_says_why_a_call_failed(receiver: Receiver) -> None:
    endpoint("add", "crm", receiver.url)
    receiver.reply, receiver.then = b"no such route", 404
    with pytest.raises(
        CommandError, match="^endpoint crm: lookup failed: HTTP 404: 'no such route'$"
    ):
        endpoint("test", "crm")


def test_test_says_when_the_answer_is_not_one_a_lookup_takes(receiver: Receiver) -> None:
    endpoint("add", "crm", receiver.url)
    receiver.reply = b'{"status": "ok"}'
    with pytest.raises(
        CommandError,
        match="^endpoint crm: not an answer a lookup takes: the answer holds 'status' beside",
    ):
        endpoint("test", "crm")


@pytest.mark.slow
def test_the_secret_is_the_last_line_a_shell_takes(tmp_path: Path) -> None:
    with fresh_database(tmp_path) as database_url:
        env = {"DATABASE_URL": database_url, "GUIDEPOST_WEBHOOK_ALLOW_PRIVATE": "1"}
        added = guidepost_mcp("endpoint", "add", "crm", URL, env=env)
        assert added.returncode == 0, added.stderr
        secret = added.stdout.splitlines()[-1]  # $(guidepost-mcp endpoint add … | tail -1)
        assert secret.startswith("whsec_")
        listed = guidepost_mcp("endpoint", "list", env=env)
        assert listed.stdout.startswith(f"crm\t{URL}\ttimeout 3 s\tsecret ")
        assert secret not in listed.stdout
        removed = guidepost_mcp("endpoint", "remove", "crm", env=env)
        assert removed.stdout == "endpoint crm removed\n"
        again = guidepost_mcp("endpoint", "remove", "crm", env=env)
        assert again.returncode == 1
        assert again.stderr.startswith("CommandError: endpoint not found: ")
