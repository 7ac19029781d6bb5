"""The seven MCP tools: one registry, one guard layer, one small handler each.

``dispatch`` is the only way in: it finds the tool, runs the guards in a fixed
order (authentication, rate limit, authorization, input validation), calls the
handler, and turns every refusal into contract section 7's error object. It is
synchronous (services use the ORM) and transport-agnostic; ``runs_app.mcp``
plugs it into the MCP SDK.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from flows_app.engine import EngineError
from flows_app.model import MAX_LABEL_LENGTH, MAX_SLOT_VALUE_LENGTH, MAX_VALUES_PER_CALL
from flows_app.services import DraftRefused, draft_create
from runs_app import services
from runs_app.models import Run
from runs_app.services import Caller, ServiceError

logger = logging.getLogger(__name__)

MAX_YAML_CHARS = 256 * 1024
Handler = Callable[[Caller, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Transport:
    """What the transport knows about a call: where it came from and who says it is."""

    peer: str = ""
    client_name: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    read_only: bool = False


@dataclass(frozen=True)
class Outcome:
    """A tool's answer: the JSON object, and whether it is an error."""

    payload: dict[str, Any]
    is_error: bool = False


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise ImproperlyConfigured(f"two MCP tools are named {tool.name!r}")
        self._tools[tool.name] = tool
        return tool

    def tool(
        self,
        *,
        name: str,
        title: str,
        description: str,
        schema: dict[str, Any],
        read_only: bool = False,
    ) -> Callable[[Handler], Handler]:
        def decorate(handler: Handler) -> Handler:
            self.register(Tool(name, title, description, schema, handler, read_only))
            return handler

        return decorate

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def all(self) -> list[Tool]:
        return list(self._tools.values())


registry = ToolRegistry()


# --- input schemas ------------------------------------------------------------------------


def string(description: str, *, max_length: int, min_length: int = 1) -> dict[str, Any]:
    return {
        "type": "string",
        "description": description,
        "minLength": min_length,
        "maxLength": max_length,
    }


def arguments(required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


RUN_ID = string("The run_id returned by guide_start.", max_length=64)
VALUES = {
    "type": "object",
    "description": (
        "Answers already known, keyed as in guide_start's index: an ask node's id -> one of "
        f"its labels (at most {MAX_LABEL_LENGTH} characters), a slot name -> its value (at most "
        f'{MAX_SLOT_VALUE_LENGTH}). "__unknown__" means the person does not know.'
    ),
    "additionalProperties": {"type": "string", "maxLength": MAX_SLOT_VALUE_LENGTH},
    "propertyNames": {"maxLength": 64},
    "maxProperties": MAX_VALUES_PER_CALL,
}


# --- the guard layer ----------------------------------------------------------------------


def authenticate(transport: Transport) -> Caller:
    """Who is calling. Without credentials configured, a caller is its address and client."""
    key = "anon:" + (transport.peer or "local")
    if transport.client_name:
        key += ":" + transport.client_name[:80]
    return Caller(key=key, name=transport.client_name)


def rate_limit(caller: Caller, tool: Tool) -> None:
    """Refuse a caller over its budget (retryable, with retry_after). No limit is set yet."""


def authorize(caller: Caller, tool: Tool, args: Mapping[str, Any]) -> None:
    """Refuse a call the caller may not make. Every caller may call every tool for now."""


def validate(tool: Tool, raw: object) -> dict[str, Any]:
    """Check arguments against the tool's input schema; JSON null counts as not given."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise _bad_arguments(tool, "arguments must be a JSON object")
    schema = tool.input_schema
    properties: dict[str, dict[str, Any]] = schema["properties"]
    args = {k: v for k, v in raw.items() if v is not None}
    for key in args:
        if key not in properties:
            close = difflib.get_close_matches(key, list(properties), n=3, cutoff=0.5)
            raise _bad_arguments(tool, f"unknown argument {key!r}", close)
    for key in schema["required"]:
        if key not in args:
            raise _bad_arguments(tool, f"{key} is missing")
    for key, value in args.items():
        _check(tool, key, properties[key], value)
    return args


def _check(tool: Tool, key: str, spec: dict[str, Any], value: object) -> None:
    if spec["type"] == "string":
        if not isinstance(value, str):
            raise _bad_arguments(tool, f"{key} must be a string, not {_json_type(value)}")
        if len(value) < spec.get("minLength", 0):
            raise _bad_arguments(tool, f"{key} is empty")
        if len(value) > spec["maxLength"]:
            raise _bad_arguments(
                tool, f"{key} has {len(value)} characters; the limit is {spec['maxLength']}"
            )
    elif spec["type"] == "object":
        if not isinstance(value, dict):
            raise _bad_arguments(tool, f"{key} must be an object, not {_json_type(value)}")
        if len(value) > spec["maxProperties"]:
            raise _bad_arguments(
                tool, f"{key} has {len(value)} keys; the limit is {spec['maxProperties']}"
            )


def _json_type(value: object) -> str:
    names = {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        list: "an array",
        dict: "an object",
    }
    return names.get(type(value), type(value).__name__)


def _bad_arguments(tool: Tool, reason: str, candidates: list[str] | None = None) -> ServiceError:
    props = tool.input_schema["properties"]
    required = tool.input_schema["required"]
    shape = ", ".join(
        f"{name}{'' if name in required else '?'}: {spec['type']}" for name, spec in props.items()
    )
    return ServiceError(
        "invalid arguments",
        reason,
        f"Call {tool.name} again with arguments {{{shape}}}.",
        retryable=True,
        candidates=candidates or (),
    )


def dispatch(name: str, raw_arguments: object, transport: Transport) -> Outcome:
    """Run one tool call through the guards and its handler; never raises."""
    caller = Caller(key="anon:" + (transport.peer or "local"))
    try:
        caller = authenticate(transport)
        tool = registry.get(name)
        if tool is None:
            names = [t.name for t in registry.all()]
            raise ServiceError(
                "unknown tool",
                f"there is no tool named {name!r}",
                "Call one of the tools from tools/list: " + ", ".join(names) + ".",
                retryable=False,
                candidates=difflib.get_close_matches(name, names, n=5),
            )
        rate_limit(caller, tool)
        authorize(caller, tool, raw_arguments if isinstance(raw_arguments, dict) else {})
        args = validate(tool, raw_arguments)
        payload = tool.handler(caller, args)
        if "run_id" not in args and not tool.read_only:
            services.client_failures_clear(caller)
        return Outcome(payload)
    except (ServiceError, EngineError, DraftRefused) as exc:
        return _failure(name, raw_arguments, caller, _as_service_error(exc))
    except Exception:
        logger.exception("tool %s failed unexpectedly", name)
        internal = ServiceError(
            "internal error",
            "the server failed while handling this call; nothing was changed",
            "Call the tool again in a moment; if it fails again, hand the conversation to a human.",
            retryable=True,
        )
        return _failure(name, raw_arguments, caller, internal)


def _as_service_error(exc: ServiceError | EngineError | DraftRefused) -> ServiceError:
    if isinstance(exc, ServiceError):
        return exc
    if isinstance(exc, DraftRefused):
        return ServiceError("draft refused", exc.reason, exc.next, retryable=True)
    return ServiceError(
        exc.error, exc.reason, exc.next, retryable=exc.retryable, candidates=exc.candidates
    )


def _failure(name: str, raw_arguments: object, caller: Caller, refused: ServiceError) -> Outcome:
    """The error object of contract section 7, with the failure counted."""
    args = raw_arguments if isinstance(raw_arguments, dict) else {}
    run_id = args.get("run_id")
    run = Run.objects.filter(public_id=run_id).first() if isinstance(run_id, str) else None
    error: dict[str, Any] = {
        "error": refused.error,
        "reason": refused.reason,
        "next": refused.next,
        "retryable": refused.retryable,
    }
    if refused.candidates:
        error["candidates"] = refused.candidates[:5]
    try:
        attempt, repeated = services.failure_record(
            caller=caller, run=run, signature=services.call_signature(name, args)
        )
    except Exception:  # counting must never hide the real error
        logger.exception("could not record a failed call")
        attempt, repeated = 1, False
    error["attempt"] = attempt
    if repeated:
        error["repeated"] = True
    if attempt >= services.FAILURES_BEFORE_GIVING_UP:
        error["retryable"] = False
        if run is not None:
            error["next"] = (
                f"{attempt} calls in a row have failed on this run: stop retrying. Hand the "
                "conversation to a human (guide_close), or read guide_status and change approach."
            )
        else:
            error["next"] = (
                f"{attempt} calls in a row have failed: stop retrying. Change approach "
                "(guide_flows lists what exists) or hand the conversation to a human."
            )
    return Outcome(error, is_error=True)


# --- the tools ----------------------------------------------------------------------------


@registry.tool(
    name="guide_flows",
    title="List procedures",
    description=(
        "Find the procedure (flow) for the person's need. Without category: the categories "
        "with how many flows each has. With category: that category's flows (id, title, "
        "summary). Call it first, pick the flow whose summary fits, then call guide_start. "
        "If no flow fits, do not invent a procedure."
    ),
    schema=arguments([], category=string("A category id from the list.", max_length=64)),
    read_only=True,
)
def guide_flows(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    return services.flows_overview(args.get("category"))


@registry.tool(
    name="guide_start",
    title="Start a procedure",
    description=(
        "Start a run of a flow. Returns the first thing to tell or ask (node, tell), and an "
        "index of every key the flow accepts. Pass values you already know from the "
        "conversation (see index) so the run skips questions already answered; pass ref to "
        "link the run to your conversation or ticket id. Then follow `next`."
    ),
    schema=arguments(
        ["flow_id"],
        flow_id=string("The flow's id, from guide_flows.", max_length=64),
        values=VALUES,
        ref=string(
            "Your own conversation or ticket id, stored with the run.",
            max_length=services.MAX_REF_LENGTH,
        ),
    ),
)
def guide_start(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    return services.run_start(
        caller=caller, flow_id=args["flow_id"], values=args.get("values"), ref=args.get("ref")
    )


@registry.tool(
    name="guide_answer",
    title="Answer the current step",
    description=(
        "Send the person's answer for the node the run waits at. At an ask node, choice is the "
        "label of node.accepts whose condition matches what the person said (you map their "
        'words to a label; the server never interprets free text); "__unknown__" if they do '
        "not know. At a collect node, send the slot values in values. values may also carry "
        "answers for later nodes. Set at to the node id you are answering: a retry after a "
        "time-out then returns the first result (repeated: true) instead of applying twice. "
        "Then follow `next`: deliver `tell` items in order, ask `node`, or hand over."
    ),
    schema=arguments(
        ["run_id"],
        run_id=RUN_ID,
        choice=string(
            'A label of the waiting ask node\'s accepts, or "__unknown__".',
            max_length=MAX_LABEL_LENGTH,
        ),
        values=VALUES,
        at=string("The node id you are answering (node.id from the last result).", max_length=64),
    ),
)
def guide_answer(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    return services.run_answer(
        caller=caller,
        run_id=args["run_id"],
        choice=args.get("choice"),
        values=args.get("values"),
        at=args.get("at"),
    )


@registry.tool(
    name="guide_status",
    title="Show a run",
    description=(
        "Where a run is and how it got there: state, the waiting node, the path taken, the "
        "values given, and what to do next. Use it to resume after losing context, or to "
        "brief the human who takes over."
    ),
    schema=arguments(["run_id"], run_id=RUN_ID),
    read_only=True,
)
def guide_status(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    return services.run_status(caller=caller, run_id=args["run_id"])


@registry.tool(
    name="guide_back",
    title="Go back to an earlier step",
    description=(
        "Reopen an ask or collect node the run already passed, when the person corrects an "
        "earlier answer. Without to: the last node the run waited at. Everything answered at "
        "or after that node is discarded; the run waits there again."
    ),
    schema=arguments(
        ["run_id"],
        run_id=RUN_ID,
        to=string("The id of an ask or collect node on the run's path.", max_length=64),
    ),
)
def guide_back(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    return services.run_back(caller=caller, run_id=args["run_id"], to=args.get("to"))


@registry.tool(
    name="guide_close",
    title="Close a run",
    description=(
        "End a run that will not reach an end: the person left, or a human took over. "
        "Closing twice is harmless."
    ),
    schema=arguments(
        ["run_id", "reason"],
        run_id=RUN_ID,
        reason=string("Why the run ends here, in a few words.", max_length=500),
    ),
)
def guide_close(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    return services.run_close(caller=caller, run_id=args["run_id"], reason=args["reason"])


@registry.tool(
    name="guide_draft",
    title="Submit a flow for review",
    description=(
        "Submit a new or changed flow (YAML, see the authoring guide) for human review. Returns "
        "lint findings; ok means no errors. A draft is never used by any run until a person "
        "approves it."
    ),
    schema=arguments(["yaml"], yaml=string("The flow's YAML text.", max_length=MAX_YAML_CHARS)),
)
def guide_draft(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    return draft_create(text=args["yaml"], submitted_by=caller.key)
