"""The demo order system: a lookup endpoint to try lookups with, which answers the bundled
refund flow's ``orders`` lookup from made-up orders (``guidepost-mcp endpoint demo``).

It does what any endpoint must, in few lines: it checks the signature (Standard
Webhooks, with the endpoint's secret) and refuses a call that is not signed, reads the
``values`` sent, and answers ``{"label": ..., "values": {...}}``. Its orders are made up
from the order number alone, so the same number always gets the same answer: the last
digit 0 to 4 was delivered 2 to 18 days ago, 5 and 6 more than 30 days ago, 7 is on its
way, 8 and 9 do not exist.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from flowcore.common.limits import MAX_LOOKUP_ANSWER_BYTES

logger = logging.getLogger(__name__)

DEMO_ENDPOINT = "orders"
DEMO_PORT = 8128
_ORDER_RE = re.compile(r"A[0-9]{5}")


def order_answer(values: dict[str, Any], today: datetime) -> dict[str, Any]:
    """What the demo order system answers about the order ``values["order_number"]``.

    >>> day = datetime(2026, 3, 31, tzinfo=UTC)
    >>> order_answer({"order_number": "A00112"}, day)
    {'label': 'delivered', 'values': {'delivered_on': '2026-03-21'}}
    >>> order_answer({"order_number": "A00115"}, day), order_answer({"order_number": "x"}, day)
    ({'label': 'delivered', 'values': {'delivered_on': '2026-02-19'}}, {'label': 'not_found'})
    """
    number = values.get("order_number")
    if not isinstance(number, str) or not _ORDER_RE.fullmatch(number):
        return {"label": "not_found"}
    digit = int(number[-1])
    if digit <= 6:
        days = 2 + 4 * digit if digit <= 4 else 35 + digit
        delivered = (today - timedelta(days=days)).date().isoformat()
        return {"label": "delivered", "values": {"delivered_on": delivered}}
    return {"label": "in_transit"} if digit == 7 else {"label": "not_found"}


class DemoServer(ThreadingHTTPServer):
    """The demo order system's server: calls not signed with ``secret`` are refused (set
    it, the endpoint's, before serving)."""

    secret = ""


def demo_server(port: int = DEMO_PORT) -> DemoServer:
    """The demo order system on 127.0.0.1:``port`` (0: any free port), not yet serving."""

    class Handler(BaseHTTPRequestHandler):
        server: DemoServer

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            if length > MAX_LOOKUP_ANSWER_BYTES:
                self._answer(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": "too large"})
                return
            body = self.rfile.read(length)
            try:
                call = Webhook(self.server.secret).verify(body, dict(self.headers.items()))
            except WebhookVerificationError:
                self._answer(HTTPStatus.UNAUTHORIZED, {"error": "not signed by guidepost"})
                return
            values = call.get("values") if isinstance(call, dict) else None
            answer = order_answer(values if isinstance(values, dict) else {}, datetime.now(UTC))
            logger.info("%s %s: %s", call.get("run_id"), call.get("node"), answer["label"])
            self._answer(HTTPStatus.OK, answer)

        def _answer(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
            pass  # each call is logged once, above, without the values sent

    return DemoServer(("127.0.0.1", port), Handler)
