"""Webhooks, and lookups' calls, through the egress proxy the environment names
(HTTPS_PROXY, HTTP_PROXY, NO_PROXY): a real forward proxy and a real receiver in the test
process, an https one with a certificate of a test authority the try is told to trust
(SSL_CERT_FILE)."""

from __future__ import annotations

import base64
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from events_app import outbound, worker
from events_app import services as events
from events_app.endpoints import endpoint_add
from events_app.lookups import Reply, call_endpoint
from events_app.models import Delivery
from tests.support.egress_proxy import EgressProxy, egress_proxy
from tests.support.receiver import Receiver, receiving
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY", "REQUEST_METHOD")


@pytest.fixture(autouse=True)
def no_proxy_but_the_tests(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = True  # receivers and proxies on 127.0.0.1
    settings.GUIDEPOST_WEBHOOK_RETRY_BASE = 60  # one try each: what it did is the point
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    events.forget_subscriptions()


@pytest.fixture
def proxy() -> Iterator[EgressProxy]:
    with egress_proxy() as running:
        yield running


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as running:
        yield running


@pytest.fixture
def https_receiver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    authority = trustme.CA()
    authority.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    # How an operator makes tries trust an internal authority; the process's one TLS
    # context is made again with it, and again without it afterwards.
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    outbound._tls_context.cache_clear()
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    authority.issue_cert("localhost").configure_cert(server)
    try:
        with receiving(tls=server) as running:
            yield running
    finally:
        outbound._tls_context.cache_clear()


def subscribe(receiver: Receiver) -> int:
    subscription = events.subscription_add(url=receiver.url, events=["run.stalled"])
    receiver.secret = subscription.secret
    return subscription.pk


def one_try(subscription: int) -> Delivery:
    """A test message to ``subscription``, tried once by the worker."""
    events.subscription_test(subscription)

    def tried() -> Delivery | None:
        worker.tick()
        return Delivery.objects.filter(attempts__gte=1).first()

    return wait_until(tried, 20, 0.01, message="the worker did not try")


def test_an_https_webhook_goes_through_the_proxys_tunnel_to_the_receivers_name(
    proxy: EgressProxy, https_receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)

    tried = one_try(subscribe(https_receiver))

    assert (tried.state, tried.last_status, tried.last_error) == ("delivered", 200, "")
    assert [line.split(" ")[:2] for line in proxy.lines()] == [
        ["CONNECT", f"localhost:{https_receiver.port}"]
    ]
    [got] = https_receiver.received
    assert got.verified, "the body and its signature arrive as sent"


def test_an_http_webhook_goes_to_the_proxy_whole_with_its_absolute_url(
    proxy: EgressProxy, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)

    tried = one_try(subscribe(receiver))

    assert (tried.state, tried.last_status) == ("delivered", 200)
    assert proxy.lines() == [f"POST http://127.0.0.1:{receiver.port}/hook HTTP/1.1"]
    assert receiver.received[0].verified
    assert receiver.received[0].headers["host"] == f"127.0.0.1:{receiver.port}"


def test_a_receiver_that_no_proxy_names_is_reached_directly(
    proxy: EgressProxy, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")

    tried = one_try(subscribe(receiver))

    assert (tried.state, proxy.lines()) == ("delivered", [])
    assert receiver.received[0].verified


@pytest.mark.parametrize("kind", ["https_receiver", "receiver"])
def test_the_credentials_in_the_proxys_url_are_sent_as_proxy_authorization(
    kind: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    to: Receiver = request.getfixturevalue(kind)
    basic = "Basic " + base64.b64encode(b"hooks:p@ss word").decode()
    with egress_proxy(authorization=basic) as proxy:
        url = f"http://hooks:p%40ss%20word@127.0.0.1:{proxy.port}"
        monkeypatch.setenv("HTTPS_PROXY" if to.scheme == "https" else "HTTP_PROXY", url)

        tried = one_try(subscribe(to))

        assert (tried.state, tried.last_status) == ("delivered", 200)
        assert proxy.requests[0][1] == basic


def test_a_proxy_that_asks_for_credentials_fails_the_try_saying_so_without_the_password(
    https_receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    with egress_proxy(authorization="Basic c29tZW9uZTplbHNl") as proxy:
        monkeypatch.setenv("HTTPS_PROXY", f"http://hooks:wrong-secret@127.0.0.1:{proxy.port}")

        tried = one_try(subscribe(https_receiver))

    assert tried.state == "pending"
    assert "407 Proxy Authentication Required" in tried.last_error, tried.last_error
    assert "wrong-secret" not in tried.last_error
    assert https_receiver.received == []


def test_a_proxy_that_refuses_the_receiver_fails_the_try_with_its_answer(
    https_receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    with egress_proxy(refuse=True) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)

        tried = one_try(subscribe(https_receiver))

    assert "403 Forbidden" in tried.last_error, tried.last_error
    assert https_receiver.received == []


def test_the_address_guard_holds_through_a_proxy(
    proxy: EgressProxy, receiver: Receiver, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    subscription = subscribe(receiver)
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = False  # as a name re-pointed at 127.0.0.1

    refused = one_try(subscription)

    assert refused.last_error.startswith("address refused"), refused.last_error
    assert (proxy.lines(), receiver.received) == ([], [])


def test_an_https_proxy_url_fails_the_try_naming_the_proxy_without_its_credentials(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "https://hooks:secret@127.0.0.1:3128")

    tried = one_try(subscribe(receiver))

    assert tried.last_error == (
        "proxy refused: the proxy https://127.0.0.1:3128 is not an http:// proxy (a tunnel "
        "through it carries TLS to the receiver)"
    )
    assert receiver.received == []


def test_a_lookups_call_leaves_through_the_same_tunnel(
    proxy: EgressProxy, https_receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    https_receiver.secret = endpoint_add(name="crm", url=https_receiver.url).secret
    https_receiver.reply = b'{"label": "found"}'

    answered = call_endpoint("crm", {"run_id": "r_1"})

    assert isinstance(answered, Reply), answered
    assert [line.split(" ")[:2] for line in proxy.lines()] == [
        ["CONNECT", f"localhost:{https_receiver.port}"]
    ]
    assert https_receiver.received[0].verified
