"""The guards every interface runs before it calls a service, always in this order:

0. ``check_host``, ``check_origin`` — whether the request is addressed to this server
   (DNS rebinding), for /mcp (``guidepost.mcp.gate``) and Django alike;
1. ``authenticate`` — who is calling: ``authenticate_key`` checks the agent key an HTTP
   request presents (the MCP gate, the JSON API), ``authenticate`` makes the caller of a
   tool call from its transport, ``authenticate_person`` the caller of a page;
2. ``rate_limit`` — whether the caller is over its budget;
3. ``authorize`` — whether the caller may make this call;
4. ``validate`` — whether the arguments fit the input schema.

Each raises a ``Refusal``. The MCP dispatcher calls them with the transport's
caller; the run pages and the JSON API call them with a signed-in person
(``authenticate_person``) or an agent key, and both interfaces ask ``authorize`` for
the same actions ("runs.view", "flows.view").
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from access_app import oauth, ratelimit
from access_app.agent_keys import bearer_token, is_loopback, key_digest, keys_required
from access_app.callers import (
    ANONYMOUS,
    DEFAULT_LIMITS,
    KEY_OWNER,
    STAFF,
    Caller,
    Limits,
    Transport,
)
from access_app.selectors import KeyStatus
from flowcore.common.errors import (
    BadRequest,
    InvalidInput,
    Misdirected,
    NotAuthenticated,
    NotPermitted,
    RateLimited,
)
from flowcore.common.limits import MAX_CLIENT_NAME_LENGTH
from flowcore.common.names import closest
from flowcore.common.text import CONTROLS, refuse_controls, shown

logger = logging.getLogger(__name__)

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


# The string arguments that are text, and so may hold tabs and line breaks; every other
# string argument (ids, labels, refs) may hold no control character (flowcore.common.text).
TEXT_ARGUMENTS = frozenset({"reason", "yaml"})


def arguments(required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


# --- the request: host, origin, agent key -------------------------------------------------------

# Browser origins always allowed to call /mcp (any port, or none): this machine's.
LOOPBACK_ORIGINS = ("localhost", "127.0.0.1", "[::1]")


def check_host(host: str | None, server_name: str = "") -> None:
    """Refuse a request not addressed to this server, exactly as Django does for its pages.

    The Host header (else, for HTTP/1.0, the address the request arrived on) must be a
    host name or address with an optional port, and the name must be in ALLOWED_HOSTS
    (``GUIDEPOST_ALLOWED_HOSTS``); the port is not checked. Raises BadRequest (400) for a
    malformed value such as ``user@127.0.0.1:8127``, Misdirected (421) for a name this
    server does not serve (DNS rebinding).
    """
    raw = host if host is not None else server_name
    domain, _ = split_domain_port(raw)
    if not domain:
        raise BadRequest(
            "invalid host",
            f"the Host header {shown(raw)} is not a host name or address with an optional port",
            "Send the server's host name (and port) in the Host header, nothing else.",
        )
    if not validate_host(domain, settings.ALLOWED_HOSTS):
        raise Misdirected(
            "host not allowed",
            f"this server does not serve {shown(domain)}",
            "Call the server by one of its names; its operator lists them in "
            "GUIDEPOST_ALLOWED_HOSTS.",
        )


def check_origin(origin: str | None) -> None:
    """Refuse a browser request from a page of another site (NotPermitted, 403).

    No Origin (not a browser) passes; so do this machine's origins, over http or https
    with any port or none, and those listed in GUIDEPOST_ALLOWED_ORIGINS (exactly).
    """
    if origin is None or origin in settings.GUIDEPOST_ALLOWED_ORIGINS:
        return
    scheme, _, rest = origin.partition("://")
    domain, _ = split_domain_port(rest)
    if scheme in ("http", "https") and domain in LOOPBACK_ORIGINS:
        return
    raise NotPermitted(
        "origin not allowed",
        f"a page at {shown(origin)} may not call this server",
        "Call from a page this server allows (its operator lists them in "
        "GUIDEPOST_ALLOWED_ORIGINS), or from outside a browser.",
    )


def exposed(local_address: str = "") -> bool:
    """Whether a request may come from beyond this machine: the server listens beyond
    loopback (GUIDEPOST_HOST, which ``serve --host`` sets), sits behind trusted proxies,
    or the request arrived on an address that is not loopback."""
    return (
        not is_loopback(settings.GUIDEPOST_HOST)
        or bool(settings.GUIDEPOST_TRUSTED_PROXIES)
        or bool(local_address and not is_loopback(local_address))
    )


KEY_HOWTO = (
    "Send Authorization: Bearer <key> with every request (a key in the URL is never read); "
    "the server's operator creates keys with guidepost-mcp createkey NAME."
)


def authenticate_key(
    authorization: str | None,
    *,
    exposed: bool,
    find: Callable[[str], KeyStatus | None],
    any_key: Callable[[], bool],
) -> KeyStatus | None:
    """The agent key an ``Authorization`` header proves (its name and own limits), or None
    for a request without a key where none is needed (GUIDEPOST_AUTH).

    ``find`` looks a key up by its digest, ``any_key`` says whether any key exists (the
    keyring's cached or database lookups). Raises NotAuthenticated (401) for a missing key
    where one is needed, and for an unknown or revoked key wherever it is presented.
    """
    token = bearer_token(authorization)
    if token is None:
        issuer = settings.GUIDEPOST_OAUTH_ISSUER
        if issuer:
            raise NotAuthenticated(
                "key required",
                "this server requires an access token or an agent key",
                oauth.token_howto(issuer),
            )
        if keys_required(settings.GUIDEPOST_AUTH, exposed=exposed, any_key=any_key):
            raise NotAuthenticated("key required", "this server requires an agent key", KEY_HOWTO)
        return None
    key = find(key_digest(token))
    if key is None:
        raise NotAuthenticated("invalid key", "the key sent is not one of this server's", KEY_HOWTO)
    if key.revoked:
        raise NotAuthenticated(
            "key revoked",
            "the key sent has been revoked",
            "Ask the server's operator for a new key (guidepost-mcp createkey NAME).",
        )
    return key


def key_caller(
    name: str, limits: Limits = DEFAULT_LIMITS, scopes: frozenset[str] | None = None
) -> Caller:
    """The caller an accepted agent key makes: its runs and failures are the key name's.
    An OAuth access token is a key named "oauth:SUBJECT" whose calls its ``scopes`` bound."""
    return Caller(key=KEY_OWNER + name, name=name, key_name=name, limits=limits, scopes=scopes)


def authenticate(transport: Transport) -> Caller:
    """Who is calling: the agent key or OAuth access token the transport's request proved,
    else its address and client (a caller without a key, where none is needed)."""
    if transport.key_name:
        return key_caller(transport.key_name, transport.key_limits, transport.token_scopes)
    key = ANONYMOUS + (transport.peer or "local")
    # The client names itself: cut short, and with no character a database refuses.
    name = CONTROLS.sub("?", transport.client_name[:MAX_CLIENT_NAME_LENGTH])
    if name:
        key += ":" + name
    return Caller(key=key, name=name, address=transport.peer)


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
# (the MCP tools) need none. The "Ops" group (runs_app migration 0005) holds these.
ACTION_PERMISSIONS: Mapping[str, str] = {
    "runs.view": "runs_app.view_run",
    "flows.view": "flows_app.view_flowversion",
    # Claim, answer or close a stalled run: the "Ops" and "Support lead" groups.
    "runs.resolve": "runs_app.resolve_run",
}
# Which group to ask for, per action, when a person lacks its permission.
_GROUP_FOR = {"runs.resolve": '"Ops" or "Support lead"'}


# Not an action: what a person may see on the pages and in the API they may open. Without
# it, values marked personal are masked; the "Support lead" group holds it (runs_app
# migration 0012), "Ops" does not.
SEE_PERSONAL_VALUES = "runs_app.see_personal_values"


def authenticate_person(user: Person) -> Caller:
    """A signed-in staff member as a caller. Raises NotAuthenticated for anyone else:
    the pages send them to the admin's login, the API answers 401."""
    if not (user.is_authenticated and user.is_active and user.is_staff):
        raise not_signed_in()
    name = user.get_username()
    return Caller(
        key=STAFF + name,
        name=name,
        permissions=frozenset(
            p for p in (*ACTION_PERMISSIONS.values(), SEE_PERSONAL_VALUES) if user.has_perm(p)
        ),
    )


def not_signed_in() -> NotAuthenticated:
    return NotAuthenticated(
        "not signed in",
        "this needs a staff account signed in",
        "Sign in at /admin/login/ with a staff account, then call again.",
    )


def api_not_signed_in() -> NotAuthenticated:
    """The JSON API's 401: it names both ways in."""
    return NotAuthenticated(
        "not signed in",
        "the API needs a staff session or an agent key, and this request has neither",
        "Sign in at /admin/login/ with a staff account (the session's cookie is sent with "
        "each call), or send Authorization: Bearer <agent key> (a key reads its own runs).",
    )


def rate_limit(caller: Caller, action: str) -> None:
    """Refuse a caller over its budget: RateLimited ("rate limited", retryable, with
    ``retry_after`` seconds). One token of the caller's bucket per call, whatever the
    action: a key's bucket has the key's own burst and rate when it has them, a keyless
    caller's is its address's. GUIDEPOST_RATE_BURST=0 turns the limit off, for keys with
    limits of their own too.

    A store that fails (the database locked or down, Redis unreachable) lets the call
    through: the call then meets the same fault itself and is answered for it, and a
    read that can still be served is.
    """
    if settings.GUIDEPOST_RATE_BURST == 0:
        return
    burst = caller.limits.burst or settings.GUIDEPOST_RATE_BURST
    rate = caller.limits.per_second or settings.GUIDEPOST_RATE_PER_SECOND
    try:
        decision = ratelimit.bucket_take(caller.limit_key, burst=burst, rate=rate, lease=True)
    except Exception as exc:  # the limiter never fails a call on its own
        _store_failed(exc)
        return
    if not decision.allowed:
        ratelimit.count_refusal("calls")
        wait = math.ceil(decision.retry_after * 10) / 10 or 0.1
        raise RateLimited(
            "rate limited",
            f"more than {burst} calls at once, or over {rate:g} a second, from this caller",
            f"Wait {wait:g} seconds (retry_after), then make the same call again.",
            retry_after=wait,
        )


def draft_budget(caller: Caller) -> None:
    """Refuse a draft past the caller's budget of drafts (GUIDEPOST_DRAFTS_PER_HOUR, a
    bucket of that many refilled over an hour; 0 turns it off): judging a draft costs up
    to ~0.1 s of CPU, a thousand times a step's, and agents propose flows rarely.
    RateLimited, with ``retry_after``; a failing store lets the draft through.
    """
    per_hour = settings.GUIDEPOST_DRAFTS_PER_HOUR
    if per_hour == 0:
        return
    try:
        decision = ratelimit.bucket_take(
            DRAFTS_BUCKET + caller.limit_key, burst=per_hour, rate=per_hour / 3600
        )
    except Exception as exc:
        _store_failed(exc)
        return
    if not decision.allowed:
        ratelimit.count_refusal("drafts")
        wait = math.ceil(decision.retry_after)
        raise RateLimited(
            "rate limited",
            f"more than {per_hour} drafts an hour from this caller",
            f"Wait {wait} seconds (retry_after) before sending another draft; a person "
            "reviews each one, so send a draft only when it is ready.",
            retry_after=float(wait),
        )


# A caller's budget of drafts is a bucket of its own: "drafts:" and its rate-limit bucket.
DRAFTS_BUCKET = "drafts:"

_store_warned = 0.0


def _store_failed(exc: Exception) -> None:
    """Log a failing rate-limit store at most once a minute per process (no traceback:
    a store that is down would otherwise write one per call)."""
    global _store_warned
    now = time.monotonic()
    if now - _store_warned >= 60:
        _store_warned = now
        logger.warning(
            "rate limit not applied: its %s failed (%s)",
            ratelimit.store_name(),
            str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__,
        )


# What an agent key may do through the JSON API besides its tools: read its own runs
# (run_get and owner_scope keep it to them).
AGENT_ACTIONS = frozenset({"runs.view"})


def authorize(
    caller: Caller, action: str, args: Mapping[str, Any], *, scope: str | None = None
) -> None:
    """Refuse a call the caller may not make: an action of ACTION_PERMISSIONS needs its
    permission (NotPermitted), except that an agent key may read its own runs
    (AGENT_ACTIONS); a tool needs its ``scope`` among an OAuth caller's; every other call
    is open to every caller for now."""
    if scope is not None and caller.scopes is not None and scope not in caller.scopes:
        held = " ".join(sorted(caller.scopes)) or "none"
        raise NotPermitted(
            "insufficient scope",
            f"{action} needs the scope {scope}; the token's scopes are {shown(held)}",
            f"Ask the authorization server for a token with the scope {scope} (its operator "
            "grants it to your client), then call again.",
        )
    needed = ACTION_PERMISSIONS.get(action)
    if needed is not None and caller.key_name:
        if action in AGENT_ACTIONS:
            return
        raise NotPermitted(
            "permission denied",
            f"an agent key may not use {action}",
            "With an agent key the API reads only your own runs (/api/runs); "
            "guide_flows lists the flows.",
        )
    if needed is not None and needed not in caller.permissions:
        group = _GROUP_FOR.get(action, '"Ops"')
        raise NotPermitted(
            "permission denied",
            f"{caller.name or caller.key} lacks the permission {needed}",
            f"Ask an administrator to add your account to the {group} group.",
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
                action, schema, f"unknown argument {shown(key)}", closest(key, properties, n=3)
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
        refuse_controls(key, value, lines=key in TEXT_ARGUMENTS)
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
        longest = spec.get("propertyNames", {}).get("maxLength")
        for name in value:
            if longest is not None and len(name) > longest:
                raise _bad_arguments(
                    action,
                    schema,
                    f"{key} has the key {shown(name)} of {len(name)} characters; keys are at "
                    f"most {longest} (the keys of guide_start's index)",
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
