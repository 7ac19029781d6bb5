"""Waiting for what a real server, process or thread does in its own time."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until[T](
    predicate: Callable[[], T],
    timeout: float = 10.0,
    interval: float = 0.1,
    message: str | Callable[[], str] = "",
) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns something true, and
    return that. After ``timeout`` seconds without, fail with ``message`` (a callable is
    called then, to say what was there at the end). The predicate is called once more
    after the deadline, so that a machine too busy to poll in time still gets its answer.

    >>> wait_until(iter([0, "", 7]).__next__, interval=0)
    7
    >>> wait_until(lambda: None, timeout=0, message=lambda: "nothing came")
    Traceback (most recent call last):
    AssertionError: not within 0 s: nothing came
    """
    deadline = time.monotonic() + timeout
    while True:
        late = time.monotonic() >= deadline
        found = predicate()
        if found:
            return found
        if late:
            said = message() if callable(message) else message
            raise AssertionError(f"not within {timeout:g} s" + (f": {said}" if said else ""))
        time.sleep(interval)
