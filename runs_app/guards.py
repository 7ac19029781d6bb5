"""The guards every interface runs before it calls a service, always in this order:

1. ``authenticate`` — who is calling;
2. ``rate_limit`` — whether the caller is over its budget;
3. ``authorize`` — whether the caller may make this call;
4. ``validate`` — whether the arguments fit the input schema.

Each raises a ``Refusal``. The MCP dispatcher calls them with the transport's
caller; the run pages and the JSON API call them with a signed-in person
(``authenticate_person``), and both interfaces ask ``authorize`` for the same
actions ("runs.view", "flows.view").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from flows_app.domain.errors import InvalidInput, NotAuthenticated, NotPermitted
from flows_app.domain.names import closest
from runs_app.callers import Caller, Transport

# --- input schemas ------------------------------------------------------------------------
# The small JSON Schema dialect tools declare and ``validate`` checks: an object of
# optional or required properties, each a bounded string or a bounded object.


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


# --- the guards ---------------------------------------------------------------------------


def authenticate(transport: Transport) -> Caller:
    """Who is calling. Without credentials configured, a caller is its address and client."""
    key = "anon:" + (transport.peer or "local")
    if transport.client_name:
        key += ":" + transport.client_name[:80]
    return Caller(key=key, name=transport.client_name)


class Person(Protocol):
    """What the guards need of a signed-in user (Django's ``User`` fits)."""

    @property
    def is_authenticated(self) -> bool: ...
    @property
    def is_active(self) -> bool: ...
    @property
    def is_staff(self) -> bool: ...
    def get_username(self) -> str: ...
    def has_perm(self, perm: str, obj: Any = None) -> bool: ...


# The permission each action of the pages and the JSON API needs. Actions not listed
# (the MCP tools) need none. The "Ops" group (runs_app migration 0004) holds these.
ACTION_PERMISSIONS: Mapping[str, str] = {
    "runs.view": "runs_app.view_run",
    "flows.view": "flows_app.view_flowversion",
}


def authenticate_person(user: Person) -> Caller:
    """A signed-in staff member as a caller. Raises NotAuthenticated for anyone else:
    the pages send them to the admin's login, the API answers 401."""
    if not (user.is_authenticated and user.is_active and user.is_staff):
        raise not_signed_in()
    name = user.get_username()
    return Caller(
        key=f"staff:{name}",
        name=name,
        permissions=frozenset(p for p in ACTION_PERMISSIONS.values() if user.has_perm(p)),
    )


def not_signed_in() -> NotAuthenticated:
    return NotAuthenticated(
        "not signed in",
        "this needs a staff account signed in",
        "Sign in at /admin/login/ with a staff account, then call again.",
    )


def rate_limit(caller: Caller, action: str) -> None:
    """Refuse a caller over its budget (retryable, with retry_after). No limit is set yet."""


def authorize(caller: Caller, action: str, args: Mapping[str, Any]) -> None:
    """Refuse a call the caller may not make: an action of ACTION_PERMISSIONS needs its
    permission (NotPermitted); every other call is open to every caller for now."""
    needed = ACTION_PERMISSIONS.get(action)
    if needed is not None and needed not in caller.permissions:
        raise NotPermitted(
            "permission denied",
            f"{caller.name or caller.key} lacks the permission {needed}",
            'Ask an administrator to add your account to the "Ops" group.',
        )


def validate(action: str, schema: Mapping[str, Any], raw: object) -> dict[str, Any]:
    """The arguments of ``action`` checked against ``schema``; JSON null counts as not given.

    Raises InvalidInput ("invalid arguments") naming the argument and the expected shape.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise _bad_arguments(action, schema, "arguments must be a JSON object")
    properties: dict[str, dict[str, Any]] = schema["properties"]
    args = {k: v for k, v in raw.items() if v is not None}
    for key in args:
        if key not in properties:
            raise _bad_arguments(
                action, schema, f"unknown argument {key!r}", closest(key, properties, n=3)
            )
    for key in schema["required"]:
        if key not in args:
            raise _bad_arguments(action, schema, f"{key} is missing")
    for key, value in args.items():
        _check(action, schema, key, properties[key], value)
    return args


def _check(
    action: str, schema: Mapping[str, Any], key: str, spec: dict[str, Any], value: object
) -> None:
    if spec["type"] == "string":
        if not isinstance(value, str):
            raise _bad_arguments(action, schema, f"{key} must be a string, not {_json_type(value)}")
        if len(value) < spec.get("minLength", 0):
            raise _bad_arguments(action, schema, f"{key} is empty")
        if len(value) > spec["maxLength"]:
            raise _bad_arguments(
                action,
                schema,
                f"{key} has {len(value)} characters; the limit is {spec['maxLength']}",
            )
    elif spec["type"] == "object":
        if not isinstance(value, dict):
            raise _bad_arguments(
                action, schema, f"{key} must be an object, not {_json_type(value)}"
            )
        if len(value) > spec["maxProperties"]:
            raise _bad_arguments(
                action,
                schema,
                f"{key} has {len(value)} keys; the limit is {spec['maxProperties']}",
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


def _bad_arguments(
    action: str, schema: Mapping[str, Any], reason: str, candidates: list[str] | None = None
) -> InvalidInput:
    props = schema["properties"]
    required = schema["required"]
    shape = ", ".join(
        f"{name}{'' if name in required else '?'}: {spec['type']}" for name, spec in props.items()
    )
    return InvalidInput(
        "invalid arguments",
        reason,
        f"Call {action} again with arguments {{{shape}}}.",
        candidates=candidates or (),
    )
