"""A lookup's call: the run's question POSTed to a registered endpoint, its answer read
and judged (issue 45).

``call_endpoint`` POSTs a payload (a run's ``{run_id, flow, node, values}``) to the
endpoint a name registers, signed as a webhook is, with its secret: the same address
guard (checked again at every call, on what the name resolves to then), the same egress
proxy, one deadline of the endpoint's timeout from connecting to the answer's end, and at
most MAX_LOOKUP_ANSWER_BYTES of answer, which must be JSON. Whatever goes wrong is a
``LookupFailure`` in words, never an exception. The run's engine judges the answer
against its node (``flowcore.run.lookups.judged``), and a failure, of the call or of the
answer, takes the node's ``__error__`` or stalls the run with ``lookup failed: …``.

It waits for the network, so it is called outside any transaction: a run's row is not
held locked for the seconds an endpoint may take.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from events_app.endpoints import endpoint_get
from events_app.models import new_message_id
from events_app.outbound import post, signed_headers
from flowcore.common.errors import NotFound
from flowcore.common.jsontext import compact_json
from flowcore.common.limits import MAX_LOOKUP_ANSWER_BYTES, MAX_LOOKUP_TIMEOUT, MAX_REASON_LENGTH
from flowcore.common.lookups import Misfit, answer_shape
from flowcore.common.text import shown
from flowcore.run.lookups import failure_said

logger = logging.getLogger(__name__)

USER_AGENT = "guidepost-lookups"
# What ``endpoint test`` sends: a run's question without a run, marked as a test.
TEST_PAYLOAD: dict[str, object] = {
    "run_id": None,
    "flow": None,
    "node": None,
    "values": {},
    "test": True,
}
# Characters of a test's answer shown.
ANSWER_SHOWN = 200
# Characters of an endpoint's refusal (a 4xx or 5xx body) quoted in the reason.
REFUSAL_QUOTED = 200


@dataclass(frozen=True)
class Reply:
    """What an endpoint answered with a 2xx, as JSON, before a node judges it."""

    answer: object
    response: str  # the body, as it came
    digest: str  # its SHA-256, hex
    status: int
    response_ms: float


@dataclass(frozen=True)
class LookupFailure:
    """A call that failed, and why in words: no such endpoint, a refused address, a
    timeout, a refused connection, a status other than 2xx, an answer too long, not JSON,
    or not fitting its node."""

    reason: str
    status: int | None = None
    response_ms: float | None = None

    @property
    def said(self) -> str:
        """What a stalled run says."""
        return failure_said(self.reason)


def call_endpoint(name: str, payload: Mapping[str, Any]) -> Reply | LookupFailure:
    """POST ``payload`` to the endpoint ``name`` once, and read its JSON answer. A failure
    is logged at INFO (never the values sent), as a webhook's failed try is."""
    reply = _call(name, payload)
    if isinstance(reply, LookupFailure):
        logger.info("lookup %s: %s", name, reply.said)
    return reply


def _call(name: str, payload: Mapping[str, Any]) -> Reply | LookupFailure:
    try:
        endpoint = endpoint_get(name)
    except NotFound as missing:
        return LookupFailure(missing.reason)
    body = compact_json(payload)
    headers = signed_headers(new_message_id(), [endpoint.secret], body, user_agent=USER_AGENT)
    answered = post(
        endpoint.url,
        headers,
        body.encode(),
        # The admin validates the bound, and the row may have been written around it.
        timeout=min(endpoint.timeout, MAX_LOOKUP_TIMEOUT),
        keep=MAX_LOOKUP_ANSWER_BYTES + 1,  # one byte more: an answer over the limit shows
    )
    status, elapsed = answered.status, answered.response_ms
    if status is None or elapsed is None:
        return LookupFailure(_cut(answered.error), None, elapsed)
    if not 200 <= status < 300:
        text = answered.body.decode("utf-8", "replace").strip()
        why = "redirects are not followed" if 300 <= status < 400 else shown(text, REFUSAL_QUOTED)
        return LookupFailure(_cut(f"HTTP {status}: {why}"), status, elapsed)
    if len(answered.body) > MAX_LOOKUP_ANSWER_BYTES:
        return LookupFailure(
            f"the answer is over {MAX_LOOKUP_ANSWER_BYTES} bytes: too much", status, elapsed
        )
    try:
        response = answered.body.decode("utf-8")
        answer = json.loads(response, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        return LookupFailure(_cut(f"the answer is not JSON ({exc})"), status, elapsed)
    except RecursionError:  # arrays in arrays, deeper than the parser goes
        return LookupFailure("the answer is nested too deep", status, elapsed)
    digest = hashlib.sha256(answered.body).hexdigest()
    return Reply(answer, response, digest, status, elapsed)


def endpoint_test(name: str) -> tuple[bool, list[str]]:
    """Call the endpoint ``name`` with TEST_PAYLOAD now: whether it answered as a lookup's
    endpoint must (a 2xx, JSON shaped as an answer, whatever its label), and what a person
    reads of it, the last line why not."""
    reply = call_endpoint(name, TEST_PAYLOAD)
    if isinstance(reply, LookupFailure):
        return False, [f"endpoint {name}: {reply.said}"]
    came = (
        f"endpoint {name} answered HTTP {reply.status} in {reply.response_ms:.0f} ms: "
        f"{shown(reply.response, ANSWER_SHOWN)}"
    )
    shaped = answer_shape(reply.answer)
    if isinstance(shaped, Misfit):
        return False, [came, f"endpoint {name}: not an answer a lookup takes: {shaped.reason}"]
    label, values = shaped
    return True, [came, f"an answer: label {shown(label)}, values {', '.join(values) or 'none'}"]


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def _cut(reason: str) -> str:
    return reason if len(reason) <= MAX_REASON_LENGTH else reason[: MAX_REASON_LENGTH - 1] + "…"
