"""The only way into the tools (and to resource reads, which are calls like them): guards,
the handler, the call's audit record, and every refusal shaped once.

A tool that writes runs in one transaction opened here, its audit record the last
statement, so an accepted step and its record commit together; its ``prepare``
(guide_draft's judging) runs before that transaction, where it would hold SQLite's one
writer. A read-only tool reads outside any transaction, and its record may fail without
failing the read. An accepted call's record is also what ends the caller's failure
streak (``access_app.failures``).
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from access_app import audit, failures, guards, request_ids
from access_app.callers import ANONYMOUS, Caller, Transport
from access_app.faults import fault_refusal
from flowcore.common.errors import (
    RateLimited,
    Refusal,
    Unavailable,
    error_object,
    internal_error,
)
from flowcore.common.names import closest
from flowcore.common.text import shown
from guidepost import tracing
from guidepost.mcp.tools import Tool, registry
from guidepost.metrics import tool_called
from runs_app.lookups import lookups_outside
from runs_app.selectors import run_visible

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """A call's answer: the JSON object, whether it is an error, and whether the server
    rather than the request is why (rate limit, database fault, internal error)."""

    payload: dict[str, Any]
    is_error: bool = False
    server_side: bool = False


class _Call:
    """What the audit record of one call needs, gathered as the call goes."""

    def __init__(
        self, name: str, raw_arguments: object, transport: Transport, tool: Tool | None = None
    ) -> None:
        self.started = time.monotonic()
        self.name = name
        self.tool = tool
        self.raw_arguments = raw_arguments
        self.args = raw_arguments if isinstance(raw_arguments, dict) else {}
        self.transport = transport
        self.caller = Caller(key="anon:" + (transport.peer or "local"))

    def entry(self, outcome: str, run_id: object = None) -> audit.Entry:
        return audit.Entry(
            tool=self.name,
            outcome=outcome,
            status=200,
            duration_ms=(time.monotonic() - self.started) * 1000,
            key_name=self.caller.key_name,
            caller=self.caller.key,
            client=audit.client_of(self.transport.client_name, self.transport.client_version)
            or self.transport.headers.get("user-agent", ""),
            peer=self.transport.peer,
            run_id=audit.run_id_of(run_id if run_id is not None else self.args.get("run_id")),
        )


def dispatch(
    name: str, raw_arguments: object, transport: Transport, tool: Tool | None = None
) -> Outcome:
    """Run one tool call through the guards and its handler; never raises. ``tool``: a
    call that is not a listed tool (a resource read), else the registry's tool ``name``.

    Every failure is the error object: a refusal, a database fault
    (``access_app.faults``: busy or unavailable, with an honest ``retryable``), or an
    internal error. Even when counting or recording the failure fails, the client gets
    an error object, never an exception.
    """
    call = _Call(name, raw_arguments, transport, tool)
    try:
        outcome = _dispatch(call)
    except Exception:  # the last line: shaping or counting the error itself failed
        logger.exception("tool %s could not be answered", name[:64])
        outcome = Outcome(dict(error_object(internal_error())), is_error=True, server_side=True)
    _count(call, outcome)
    if tracing.enabled():
        tracing.describe_call(
            {
                "guidepost.run_id": audit.run_id_of(
                    outcome.payload.get("run_id") or call.args.get("run_id")
                ),
                "guidepost.outcome": str(outcome.payload.get("error", "ok"))[:64],
                "guidepost.request_id": request_ids.current.get(),
                "guidepost.caller": call.caller.key_name,
            }
        )
    return outcome


def _count(call: _Call, outcome: Outcome) -> None:
    """The call in the metrics: a counter and, for a step, the histogram. A name
    that is no tool is counted as "unknown", so callers cannot make up label values."""
    try:
        known = call.tool is not None or registry.get(call.name) is not None
        result = str(outcome.payload.get("error", "")) if outcome.is_error else "ok"
        tool_called(
            call.name if known else "unknown",
            result[:64] or "error",
            time.monotonic() - call.started,
        )
    except Exception:  # counting never fails a call
        logger.exception("could not count a call in the metrics")


def _dispatch(call: _Call) -> Outcome:
    try:
        call.caller = guards.authenticate(call.transport)
        # Before anything else: a flood of calls costs a statement or two each, no more.
        guards.rate_limit(call.caller, call.name)
        tool = call.tool or registry.get(call.name)
        if tool is None:
            names = [t.name for t in registry.all()]
            raise Refusal(
                "unknown tool",
                f"there is no tool named {shown(call.name)}",
                "Call one of the tools from tools/list: " + ", ".join(names) + ".",
                candidates=closest(call.name, names),
            )
        guards.authorize(call.caller, tool.name, call.args, scope=tool.scope)
        if tool.budget is not None:  # a costly tool's own budget, before its arguments
            tool.budget(call.caller)  # are read (guide_draft: 256 KiB of text)
        args = guards.validate(tool.name, tool.input_schema, call.raw_arguments)
        if tool.prepare is not None:  # before the transaction (guide_draft's judging)
            args = tool.prepare(call.caller, args)
        if tool.read_only:
            with tracing.database_span():
                payload = tool.handler(call.caller, args)
            # A read is served even when its record cannot be written (a locked or
            # unwritable database): the access-log line still goes out.
            audit.audit_safely(call.entry("ok", payload.get("run_id")))
        else:
            # A step that reaches a lookup leaves this transaction to make the call, and
            # comes back: the audit record is written with the step, once.
            payload = lookups_outside(functools.partial(_write, call, tool, args))
    except RateLimited as refusal:
        # Not the caller's mistake: recorded, but not counted in its failure streak.
        audit.audit_safely(call.entry(refusal.error))
        return Outcome(dict(error_object(refusal)), is_error=True, server_side=True)
    except Refusal as refusal:
        return _failure(call, refusal)
    except Exception as exc:
        fault = fault_refusal(exc)
        if fault is None:
            logger.exception("tool %s failed unexpectedly", call.name[:64])
            return _failure(call, internal_error(), server_side=True)
        logger.warning("tool %s refused: %s (%s)", call.name[:64], fault.error, str(exc)[:200])
        return _failure(call, fault, server_side=True)
    # Any accepted call ends the caller's streak: the one counted in this process here, the
    # stored one by this call's audit record.
    failures.failures_clear(call.caller)
    return Outcome(payload)


def _write(call: _Call, tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
    """A tool that writes: its handler and the call's audit record, one transaction."""
    with tracing.database_span(), transaction.atomic():
        payload = tool.handler(call.caller, args)
        audit.audit_record(call.entry("ok", payload.get("run_id")))
    return payload


def _failure(call: _Call, refusal: Refusal, *, server_side: bool = False) -> Outcome:
    """The error object, with the failure counted and recorded: in the database in one
    transaction, or, when the database is what failed, counted in this process and
    logged."""
    entry = call.entry(refusal.error)
    count_failure = functools.partial(
        failures.failure_record,
        caller=call.caller,
        run_id=call.args.get("run_id"),
        signature=failures.call_signature(call.name, call.args),
        error=failures.error_identity(refusal.error, refusal.reason),
        run_visible=run_visible,
        conversation=failures.Conversation(call.args.get("ref"), call.transport.connection),
    )
    count = None
    if isinstance(refusal, Unavailable):
        count = count_failure(stored=False)
        audit.access_log(entry)
    else:
        try:
            with transaction.atomic():
                count = count_failure()
                audit.audit_record(entry)
        except Exception:  # recording must never hide the real error
            logger.exception("could not record a failed call")
            audit.access_log(entry)
    if count is None:
        count = failures.FailureCount(attempt=1, repeated=False, on_run=False)
    error = error_object(
        refusal,
        attempt=count.attempt,
        repeated=count.repeated,
        on_run=count.on_run,
        looping=count.looping,
        shared=call.caller.key.startswith(ANONYMOUS),
    )
    return Outcome(
        dict(error), is_error=True, server_side=server_side or isinstance(refusal, Unavailable)
    )
