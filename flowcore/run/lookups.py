"""A lookup as the engine sees it: what a call came back with, how its answer moves the
run, and the signal that a call must be made first.

The engine makes no call. When a run reaches a lookup node whose answer the caller has
not given, the engine raises ``LookupNeeded`` (what to send, to which endpoint); the
caller makes the call outside its transaction and asks again, giving what came back as a
``Looked``. The step records each ``Looked``, so a replay (``verify``, a move) decides
every lookup as it was decided, without calling again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flowcore.common.limits import MAX_REASON_LENGTH
from flowcore.common.lookups import Fitted, Misfit, answer_fits
from flowcore.flow.model import LookupNode, Value
from flowcore.flow.slot_types import json_fit

# The key of a step's input holding what its lookups came back with, by node id.
LOOKUPS_KEY = "lookups"


@dataclass(frozen=True)
class Looked:
    """What one call of a lookup came back with: the endpoint's answer as it came (JSON
    text), or why the call failed, in words. ``ms``, the call's duration, is the step's
    record alone: nothing the engine decides depends on it."""

    response: str | None = None
    failed: str | None = None
    ms: float | None = None

    def recorded(self, digest: str | None = None) -> dict[str, Any]:
        """How a step's input holds it (``digest``: the answer's SHA-256)."""
        out: dict[str, Any] = (
            {"response": self.response, "digest": digest}
            if self.response is not None
            else {"failed": self.failed}
        )
        if self.ms is not None:
            out["ms"] = round(self.ms, 1)
        return out

    @classmethod
    def from_recorded(cls, stored: Mapping[str, Any]) -> Looked:
        response, failed, ms = stored.get("response"), stored.get("failed"), stored.get("ms")
        if response is None and not isinstance(failed, str):
            raise ValueError("a recorded lookup holds neither a response nor a failure")
        if response is not None and not isinstance(response, str):
            raise ValueError("a recorded lookup's response is not text")
        return cls(response, failed if response is None else None, ms)


class LookupNeeded(Exception):
    """Raised by the engine at a lookup node it has no answer for: make the call, then
    ask the engine again with what came back. Not a refusal: nothing is wrong with the
    call, and nothing has been decided."""

    def __init__(self, node: LookupNode, sent: dict[str, Value]) -> None:
        super().__init__(f"{node.id} needs a call of {node.call}")
        self.node = node
        self.sent = sent  # the values of ``send`` the run holds


def recorded_lookups(given: Mapping[str, Any]) -> dict[str, Looked]:
    """What a stored step's lookups came back with, by node id (empty: it made none)."""
    stored = given.get(LOOKUPS_KEY)
    if not isinstance(stored, Mapping):
        return {}
    return {node: Looked.from_recorded(item) for node, item in stored.items()}


def judged(node: LookupNode, looked: Looked) -> Fitted | Misfit:
    """The label and values ``looked`` gives ``node``, or why it gives none: the call
    failed, or its answer is not JSON or does not fit ``returns`` and ``sets``."""
    if looked.response is None:
        return Misfit(looked.failed or "no answer")
    try:
        answer = json.loads(looked.response)
    except (ValueError, RecursionError):
        return Misfit("the answer is not JSON")
    fitted = answer_fits(answer, returns=node.returns, sets=node.sets, fit=json_fit)
    if isinstance(fitted, Misfit) and len(fitted.reason) > MAX_REASON_LENGTH:
        return Misfit(fitted.reason[: MAX_REASON_LENGTH - 1] + "…")
    return fitted


def failure_said(reason: str) -> str:
    """What a run says of a failed lookup."""
    return f"lookup failed: {reason}"
