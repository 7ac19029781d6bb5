"""The only way into the tools: guards, the handler, and every refusal shaped once.

``dispatch`` is synchronous (services use the ORM) and transport-agnostic;
``runs_app.mcp.server`` plugs it into the MCP SDK.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from flows_app.domain.errors import Refusal, error_object, internal_error
from flows_app.domain.names import closest
from runs_app import failures, guards
from runs_app.callers import Caller, Transport
from runs_app.mcp.tools import registry

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """A tool's answer: the JSON object, and whether it is an error."""

    payload: dict[str, Any]
    is_error: bool = False


def dispatch(name: str, raw_arguments: object, transport: Transport) -> Outcome:
    """Run one tool call through the guards and its handler; never raises."""
    caller = Caller(key="anon:" + (transport.peer or "local"))
    try:
        caller = guards.authenticate(transport)
        tool = registry.get(name)
        if tool is None:
            names = [t.name for t in registry.all()]
            raise Refusal(
                "unknown tool",
                f"there is no tool named {name!r}",
                "Call one of the tools from tools/list: " + ", ".join(names) + ".",
                candidates=closest(name, names),
            )
        guards.rate_limit(caller, tool.name)
        guards.authorize(
            caller, tool.name, raw_arguments if isinstance(raw_arguments, dict) else {}
        )
        args = guards.validate(tool.name, tool.input_schema, raw_arguments)
        payload = tool.handler(caller, args)
    except Refusal as refusal:
        return _failure(name, raw_arguments, caller, refusal)
    except Exception:
        logger.exception("tool %s failed unexpectedly", name)
        return _failure(name, raw_arguments, caller, internal_error())
    try:
        failures.failures_clear(caller)  # any accepted call ends the caller's failure streak
    except Exception:  # the call was accepted (and maybe written): never report it as failed
        logger.exception("could not clear a failure streak")
    return Outcome(payload)


def _failure(name: str, raw_arguments: object, caller: Caller, refusal: Refusal) -> Outcome:
    """The error object of contract section 7, with the failure counted."""
    args = raw_arguments if isinstance(raw_arguments, dict) else {}
    try:
        count = failures.failure_record(
            caller=caller,
            run_id=args.get("run_id"),
            signature=failures.call_signature(name, args),
            error=refusal.error,
        )
    except Exception:  # counting must never hide the real error
        logger.exception("could not record a failed call")
        count = failures.FailureCount(attempt=1, repeated=False, on_run=False)
    error = error_object(
        refusal, attempt=count.attempt, repeated=count.repeated, on_run=count.on_run
    )
    return Outcome(dict(error), is_error=True)
