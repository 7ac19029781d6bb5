"""The only way into the tools: guards, the handler, the call's audit record, and every
refusal shaped once.

``dispatch`` is synchronous (services use the ORM) and transport-agnostic;
``runs_app.mcp.server`` plugs it into the MCP SDK.

A tool that writes runs in one transaction opened here, with its audit record as the
transaction's last statement: the services' own ``atomic(savepoint=False)`` blocks join
it, so an accepted step and its record commit together and the record costs one INSERT
(ADR 0033). A read-only tool reads outside any transaction and its record is a single
INSERT after it. A refused call's record is written with its failure count, in the
failure accounting's transaction.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from flows_app.domain.errors import Refusal, error_object, internal_error
from flows_app.domain.names import closest
from runs_app import audit, failures, guards
from runs_app.callers import Caller, Transport
from runs_app.mcp.tools import registry

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """A tool's answer: the JSON object, and whether it is an error."""

    payload: dict[str, Any]
    is_error: bool = False


class _Call:
    """What the audit record of one call needs, gathered as the call goes."""

    def __init__(self, name: str, raw_arguments: object, transport: Transport) -> None:
        self.started = time.monotonic()
        self.name = name
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


def dispatch(name: str, raw_arguments: object, transport: Transport) -> Outcome:
    """Run one tool call through the guards and its handler; never raises."""
    call = _Call(name, raw_arguments, transport)
    try:
        call.caller = guards.authenticate(transport)
        tool = registry.get(name)
        if tool is None:
            names = [t.name for t in registry.all()]
            raise Refusal(
                "unknown tool",
                f"there is no tool named {name!r}",
                "Call one of the tools from tools/list: " + ", ".join(names) + ".",
                candidates=closest(name, names),
            )
        guards.rate_limit(call.caller, tool.name)
        guards.authorize(
            call.caller, tool.name, raw_arguments if isinstance(raw_arguments, dict) else {}
        )
        args = guards.validate(tool.name, tool.input_schema, raw_arguments)
        if tool.read_only:
            payload = tool.handler(call.caller, args)
            audit.audit_record(call.entry("ok", payload.get("run_id")))
        else:
            with transaction.atomic():
                payload = tool.handler(call.caller, args)
                audit.audit_record(call.entry("ok", payload.get("run_id")))
    except Refusal as refusal:
        return _failure(call, refusal)
    except Exception:
        logger.exception("tool %s failed unexpectedly", name[:64])
        return _failure(call, internal_error())
    try:
        failures.failures_clear(call.caller)  # any accepted call ends the caller's streak
    except Exception:  # the call was accepted (and maybe written): never report it as failed
        logger.exception("could not clear a failure streak")
    return Outcome(payload)


def _failure(call: _Call, refusal: Refusal) -> Outcome:
    """The error object of contract section 7, with the failure counted and recorded."""
    try:
        with transaction.atomic():
            count = failures.failure_record(
                caller=call.caller,
                run_id=call.args.get("run_id"),
                signature=failures.call_signature(call.name, call.args),
                error=refusal.error,
            )
            audit.audit_record(call.entry(refusal.error))
    except Exception:  # counting must never hide the real error
        logger.exception("could not record a failed call")
        audit.access_log(call.entry(refusal.error))
        count = failures.FailureCount(attempt=1, repeated=False, on_run=False)
    error = error_object(
        refusal, attempt=count.attempt, repeated=count.repeated, on_run=count.on_run
    )
    return Outcome(dict(error), is_error=True)
