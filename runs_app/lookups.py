"""The lookups a step makes: each call made outside the step's transaction, and what
came back recorded with the step.

The engine calls nothing: at a lookup it has no answer for, it raises ``LookupNeeded``.
A write that may reach one runs inside ``lookups_outside``: its transaction ends without
writing (the engine decides before anything is written, and ``write_transaction`` lets
``LookupNeeded`` through as it lets a refusal), the call is made with no transaction
open and no row locked, and the write runs again with the answer given
(``lookups_given``). An answer holds for the revision of the run it was asked at: a
run that another call moved meanwhile is asked again.

A retry of a step already recorded is answered from the step (``at``, ``request_id``)
before the engine runs, so it never calls again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter, Histogram

from events_app.lookups import LookupFailure, call_endpoint
from flowcore.common.errors import StepNotAllowed
from flowcore.common.limits import MAX_LOOKUPS_PER_STEP
from flowcore.run.lookups import LOOKUPS_KEY, Looked, LookupNeeded
from runs_app.models import new_run_id

# Runs' calls of lookups, for /metrics: by endpoint (names operators register) and result.
LOOKUP_CALLS = Counter(
    "guidepost_lookup_calls",
    "Calls a run's lookups made, by endpoint and result: answered (a 2xx JSON answer) or failed",
    ["endpoint", "result"],
)
LOOKUP_SECONDS = Histogram(
    "guidepost_lookup_seconds",
    "Time a lookup's call took, from connecting to the answer's end, by endpoint",
    ["endpoint"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)


@dataclass(frozen=True)
class Made:
    """One call made for a step: the run's revision it was asked at, what came back, and
    the answer's digest."""

    revision: int
    looked: Looked
    digest: str | None


@dataclass
class _Calls:
    """The calls made for one write, across its tries."""

    run: tuple[str, str, int] | None = None  # (run id, flow id, revision) asked about now
    made: dict[str, Made] = field(default_factory=dict)
    new_run: str | None = None  # the id of the run a start makes, the same in every try

    def make(self, need: LookupNeeded) -> None:
        assert self.run is not None, "lookups_given names the run before the engine runs"
        run_id, flow_id, revision = self.run
        payload = {"run_id": run_id, "flow": flow_id, "node": need.node.id, "values": need.sent}
        reply = call_endpoint(need.node.call, payload)
        if isinstance(reply, LookupFailure):
            looked, digest = Looked(failed=reply.reason, ms=reply.response_ms), None
        else:
            looked, digest = Looked(response=reply.response, ms=reply.response_ms), reply.digest
        LOOKUP_CALLS.labels(
            endpoint=need.node.call, result="failed" if digest is None else "answered"
        ).inc()
        if looked.ms is not None:
            LOOKUP_SECONDS.labels(endpoint=need.node.call).observe(looked.ms / 1000)
        self.made[need.node.id] = Made(revision, looked, digest)


_calls: ContextVar[_Calls | None] = ContextVar("lookup_calls", default=None)


def lookups_outside[T](write: Callable[[], T]) -> T:
    """``write()``, run again after each lookup it needs, the call made between its tries.

    Nested, the outermost makes the calls: the MCP dispatcher wraps its transaction (which
    holds the call's audit record) this way, and the use case inside it too, for the
    callers that open no transaction of their own (a person's answer on a page)."""
    if _calls.get() is not None:
        return write()
    calls = _Calls()
    token = _calls.set(calls)
    try:
        for _ in range(MAX_LOOKUPS_PER_STEP):
            try:
                return write()
            except LookupNeeded as need:
                calls.make(need)
        try:
            return write()  # the last try, every call it may make made
        except LookupNeeded:
            raise StepNotAllowed(
                "too many lookups",
                f"the step needed more than {MAX_LOOKUPS_PER_STEP} calls of lookups",
                "Hand the conversation to a human; report the flow to its authors.",
            ) from None
    finally:
        _calls.reset(token)


def new_run_id_kept() -> str:
    """The id of the run a start makes: the same in every try of one write, since a
    lookup may have sent it."""
    calls = _calls.get()
    if calls is None:
        return new_run_id()
    if calls.new_run is None:
        calls.new_run = new_run_id()
    return calls.new_run


def lookups_given(run_id: str, flow_id: str, revision: int) -> Mapping[str, Looked]:
    """What the calls made for this write came back with, for the run ``run_id`` at
    ``revision`` (its revision before the step): to give the engine."""
    calls = _calls.get()
    if calls is None:
        return {}
    calls.run = (run_id, flow_id, revision)
    return {node: made.looked for node, made in calls.made.items() if made.revision == revision}


def with_lookups(call: dict[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    """The call as its step stores it: with what each lookup the step (its ``result``)
    passed came back with, so that a replay decides the same without calling (a retry is
    compared with the call as sent, without it)."""
    calls = _calls.get()
    passed = result.get("looked_up") or []
    if calls is None or not passed:
        return call
    made = {item["id"]: calls.made[item["id"]] for item in passed}
    return {**call, LOOKUPS_KEY: {node: m.looked.recorded(m.digest) for node, m in made.items()}}
