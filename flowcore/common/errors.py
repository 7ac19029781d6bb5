"""One error family for every refused call, and the one shape it reaches clients in.

The engine, the services and the draft intake raise a ``Refusal`` (or a
subclass); every interface (MCP tools, the JSON API) turns it into the
error object with ``error_object`` and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NotRequired, TypedDict

from flowcore.common.jsontext import compact_json
from flowcore.common.limits import (
    FAILURES_BEFORE_GIVING_UP,
    MAX_CANDIDATES,
    MAX_ECHO_LENGTH,
    MAX_REASON_LENGTH,
)


class Refusal(Exception):
    """A call refused: what failed, why, what to do now.

    ``retryable`` says whether the same call, fixed or repeated later, can succeed;
    ``candidates`` are the names closest to one that was not found;
    ``retry_after`` is how many seconds to wait before calling again.
    """

    default_retryable = False

    def __init__(
        self,
        error: str,
        reason: str,
        next: str,
        *,
        retryable: bool | None = None,
        candidates: Iterable[str] = (),
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{error}: {reason}")
        self.error = error
        self.reason = reason
        self.next = next
        self.retryable = self.default_retryable if retryable is None else retryable
        self.candidates = tuple(candidates)
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[object, ...]:
        """A refusal pickles as its class and fields (its arguments are keywords), so one
        raised in another process (a draft judged by ``flows_app.judging``) is itself."""
        return (_restored, (type(self), dict(self.__dict__)))


def _restored(kind: type[Refusal], fields: dict[str, object]) -> Refusal:
    refusal = kind.__new__(kind)
    Exception.__init__(refusal, f"{fields['error']}: {fields['reason']}")
    refusal.__dict__.update(fields)
    return refusal


class InvalidInput(Refusal):
    """The arguments are wrong; the same call, fixed, can succeed."""

    default_retryable = True


class StepNotAllowed(Refusal):
    """The run's state forbids this call (completed, stalled or closed)."""


class NotFound(Refusal):
    """What the call names does not exist, or the caller may not know it exists."""


class NotAuthenticated(Refusal):
    """The caller is not signed in, or its credentials are not valid."""


class NotPermitted(Refusal):
    """The caller is known but may not make this call."""


class BadRequest(Refusal):
    """The request itself is malformed (a header no client may send); it never reaches a tool."""


class Misdirected(Refusal):
    """The request names a host this server does not serve (DNS rebinding, a wrong name)."""


class NotConfirmed(Refusal):
    """A decision that needs a person's explicit confirmation was made without it.

    ``details`` are the lines the person has to read before confirming (an interface
    may print them; the error object leaves them out). Retryable: confirmed, it can
    succeed.
    """

    default_retryable = True

    def __init__(self, error: str, reason: str, next: str, *, details: Iterable[str] = ()) -> None:
        super().__init__(error, reason, next)
        self.details = tuple(details)


class TestsFail(Refusal):
    """Flows refused because they fail their tests (``guidepost-mcp publish``); ``details``
    are the runner's lines (an interface prints them; the error object leaves them out).
    Not retryable: the flows or their tests must change first."""

    def __init__(self, error: str, reason: str, next: str, *, details: Iterable[str] = ()) -> None:
        super().__init__(error, reason, next)
        self.details = tuple(details)


class RateLimited(Refusal):
    """The caller is over its budget of calls; it may call again after ``retry_after``
    seconds. Not the caller's mistake: it never counts in a failure streak."""

    default_retryable = True


class RunLimitReached(RateLimited):
    """The caller has started as many runs today as its cap allows. Not retryable: no
    conversation can wait for the day to end, so the agent hands over; ``retry_after``
    still says when the count starts again. Like the rate limit, never counted in a
    failure streak."""

    default_retryable = False


class Unavailable(Refusal):
    """The server cannot serve the call now (its database is busy or cannot be written)."""


def internal_error() -> Refusal:
    """What a client sees when the server failed unexpectedly (never a stack trace)."""
    return Refusal(
        "internal error",
        "the server failed while handling this call; nothing was changed",
        "Call the tool again in a moment; if it fails again, hand the conversation to a human.",
        retryable=True,
    )


class ErrorObject(TypedDict):
    """The error object of spec §7."""

    error: str
    reason: str
    next: str
    retryable: bool
    candidates: NotRequired[list[str]]
    attempt: NotRequired[int]
    repeated: NotRequired[bool]
    retry_after: NotRequired[float]


# What a keyless caller that gives up is told: callers without a key share its count.
SHARED_COUNT = (
    " Keyless clients of this address and name share this count; an agent key (guidepost-mcp "
    "createkey NAME) gives one its own."
)


def error_object(
    refusal: Refusal,
    *,
    attempt: int | None = None,
    repeated: bool = False,
    on_run: bool = False,
    looping: bool = False,
    shared: bool = False,
) -> ErrorObject:
    """The error object for ``refusal``, as the ``attempt``-th failure with the same
    error in the caller's streak. From FAILURES_BEFORE_GIVING_UP on, or once a loop
    breaker trips (``looping``), ``retryable`` is false and ``next`` keeps how to fix the
    call and adds to stop retrying it and hand over (``on_run``: the streak is on a run)
    or change approach, and (``shared``) that callers without a key share the count."""
    error: ErrorObject = {
        "error": refusal.error,
        "reason": _cut(refusal.reason, MAX_REASON_LENGTH),
        "next": refusal.next,
        "retryable": refusal.retryable,
    }
    if refusal.candidates:
        error["candidates"] = [
            _cut(c, MAX_ECHO_LENGTH) for c in refusal.candidates[:MAX_CANDIDATES]
        ]
    if refusal.retry_after is not None:
        error["retry_after"] = refusal.retry_after
    if attempt is None:
        return error
    error["attempt"] = attempt
    if repeated:
        error["repeated"] = True
    if attempt >= FAILURES_BEFORE_GIVING_UP or looping:
        error["retryable"] = False
        times = (
            f"Failed {attempt} times the same way"
            if attempt >= FAILURES_BEFORE_GIVING_UP
            else "Failed call after call"
        )
        if on_run:
            stop = (
                f"{times} on this run: stop retrying as is; unless that fix applies, hand "
                "over (guide_close) or read guide_status and change approach."
            )
        else:
            stop = (
                f"{times}: stop retrying as is; unless that fix applies, change approach "
                "(guide_flows) or hand over."
            )
        error["next"] = f"{refusal.next} {stop}"
        if shared:
            error["next"] += SHARED_COUNT
    return error


def error_body(refusal: Refusal) -> bytes:
    return compact_json(error_object(refusal)).encode()


def _cut(text: str, limit: int) -> str:
    """Every reason quotes caller text through ``text.shown`` already; this is the backstop.

    >>> _cut("abcdef", 3), _cut("abc", 3)
    ('abc…', 'abc')
    """
    return text if len(text) <= limit else text[:limit] + "…"
