"""The demo order system (``guidepost-mcp endpoint demo``): a real endpoint on loopback,
registered as ``orders``, that answers signed calls from made-up orders and refuses
calls that are not signed."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from unittest.mock import ANY

import pytest

from events_app.demo_orders import demo_server
from events_app.endpoints import endpoint_add, endpoint_demo
from events_app.lookups import Reply, call_endpoint
from flowcore.common.errors import InvalidInput

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def loopback_allowed(settings: Any) -> None:
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = True  # the demo serves on 127.0.0.1


@pytest.fixture
def demo() -> Iterator[str]:
    """The demo serving on a free port, registered as ``orders``; its URL."""
    server = demo_server(0)
    url = f"http://127.0.0.1:{server.server_address[1]}/orders"
    server.secret = endpoint_demo(url).secret
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield url
    server.shutdown()
    server.server_close()


def test_the_demo_answers_a_signed_call_about_an_order(demo: str) -> None:
    given = {"rma_no": "R20240117", "sku": "KTC-0412"}
    reply = call_endpoint("orders", {"run_id": "r_1", "values": given})
    assert isinstance(reply, Reply), reply
    assert reply.answer == {"label": "refunded"}
    accepted = call_endpoint("orders", {"values": {**given, "rma_no": "R20240112"}})
    assert isinstance(accepted, Reply)
    assert accepted.answer == {"label": "accepted", "values": {"accepted_on": ANY}}


def test_the_demo_refuses_a_call_that_is_not_signed(demo: str) -> None:
    request = urllib.request.Request(demo, data=b'{"values": {}}', method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 401


def test_the_demo_keeps_its_endpoint_and_secret_from_one_start_to_the_next(demo: str) -> None:
    assert endpoint_demo(demo).url == demo


def test_the_demo_does_not_take_over_an_endpoint_named_orders_elsewhere() -> None:
    endpoint_add(name="orders", url="http://127.0.0.1:9/real-orders")
    with pytest.raises(InvalidInput) as refused:
        endpoint_demo("http://127.0.0.1:8128/orders")
    assert refused.value.reason == (
        "the endpoint orders calls http://127.0.0.1:9/real-orders, not the demo at "
        "http://127.0.0.1:8128/orders"
    )
