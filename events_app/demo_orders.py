"""The demo order system: a lookup endpoint to try lookups with, which answers the bundled
returns flow's ``orders`` lookup (``returns_inspection``: is this return accepted?) from
made-up returns (``guidepost-mcp endpoint demo``).

It does what any endpoint must, in few lines: it checks the signature (Standard
Webhooks, with the endpoint's secret) and refuses a call that is not signed, reads the
``values`` sent, and answers ``{"label": ..., "values": {...}}``. Its returns are made up
from the return number alone, so the same number always gets the same answer: a last
digit 0 to 6 was accepted that many days ago and one more, 7 was refunded already, 8 and 9
were never registered (as is a number or a SKU not written as the flow's patterns say).
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
_RETURN_RE = re.compile(r"R[0-9]{8}")
_SKU_RE = re.compile(r"[A-Z]{3}-[0-9]{4}")


def return_answer(values: dict[str, Any], today: datetime) -> dict[str, Any]:
    """What the demo order system answers about the return ``values["rma_no"]`` of the
    item ``values["sku"]``.

    >>> day = datetime(2026, 3, 31, tzinfo=UTC)
    >>> return_answer({"rma_no": "R20240112", "sku": "KTC-0412"}, day)
    {'label': 'accepted', 'values': {'accepted_on': '2026-03-28'}}
    >>> return_answer({"rma_no": "R20240117", "sku": "KTC-0412"}, day)
    {'label': 'refunded'}
    >>> return_answer({"rma_no": "R20240112", "sku": "kettle"}, day)
    {'label': 'unknown'}
    """
    number, sku = values.get("rma_no"), values.get("sku")
    if not (isinstance(number, str) and _RETURN_RE.fullmatch(number)):
        return {"label": "unknown"}
    if not (isinstance(sku, str) and _SKU_RE.fullmatch(sku)):
        return {"label": "unknown"}
    digit = int(number[-1])
    if digit <= 6:
        accepted = (today - timedelta(days=digit + 1)).date().isoformat()
        return {"label": "accepted", "values": {"accepted_on": accepted}}
    return {"label": "refunded"} if digit == 7 else {"label": "unknown"}


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
            answer = return_answer(values if isinstance(values, dict) else {}, datetime.now(UTC))
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
