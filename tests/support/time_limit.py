"""The time a test may take: more than TEST_SECONDS of wall clock fails it.

What is made once for many tests counts apart: a module's or the session's fixture, and
what a test process makes once for all its tests (``shared``: the template database, the
zygote of tests/support/forks.py). The test that made it fails when making it took more
than the limit. Registered by tests/conftest.py (which imports the hooks)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

# Seconds of wall clock a test may take, its setup, call and teardown together: the suite
# runs in two passes of two workers on two cores within 15 minutes only while no test is
# slow. A test that starts a server or a process shares it (a module's fixture) or waits
# for what it needs (tests/support/waiting.py), not for a fixed time.
TEST_SECONDS = 20.0

SPENT = pytest.StashKey[dict[str, float]]()  # seconds by phase
SHARED = pytest.StashKey[list[tuple[str, str, float]]]()  # (phase, what, seconds) made
OVER = pytest.StashKey[bool]()  # said already

# The test running in this process and its phase, while one runs; and how deep in making
# shared things it is (one made inside another counts once).
_now: dict[str, Any] = {"item": None, "phase": "", "making": 0}


@contextmanager
def shared(what: str) -> Iterator[None]:
    """Time making ``what``, made once for many tests, apart from the test that made it."""
    item, phase = _now["item"], _now["phase"]
    if item is None or _now["making"]:
        yield
        return
    _now["making"] += 1
    started = time.monotonic()
    try:
        yield
    finally:
        _now["making"] -= 1
        item.stash.setdefault(SHARED, []).append((phase, what, time.monotonic() - started))


def _running(item: pytest.Item, phase: str) -> None:
    _now["item"], _now["phase"] = item, phase


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    _running(item, "setup")
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    _running(item, "call")
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    _running(item, "teardown")
    try:
        return (yield)
    finally:
        _running(None, "")  # type: ignore[arg-type]


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest) -> Any:
    """A fixture shared by more than one test is made apart from the test that made it."""
    if fixturedef.scope == "function":
        return (yield)
    with shared(fixturedef.argname):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A test that took more than TEST_SECONDS fails, saying what it took: its call fails,
    or its teardown is the error when that put it over. Not under --pdb or --trace, where
    a person holds the test."""
    report = yield
    spent = item.stash.setdefault(SPENT, {})
    made = item.stash.get(SHARED, [])
    apart = sum(seconds for phase, _, seconds in made if phase == report.when)
    spent[report.when] = report.duration - apart
    total = sum(spent.values())
    slow = [(what, seconds) for _, what, seconds in made if seconds > TEST_SECONDS]
    over = report.when != "setup" and (total > TEST_SECONDS or slow)
    held = item.config.option.usepdb or item.config.option.trace
    if not report.passed:
        item.stash[OVER] = True  # failed or skipped already: that is what it says
    elif over and not held and not item.stash.get(OVER, False):
        item.stash[OVER] = True  # said once: not again at its teardown
        report.outcome = "failed"
        if slow:
            listed = ", ".join(f"{what} {seconds:.1f} s" for what, seconds in slow)
            said = f"made what its tests share in more than the {TEST_SECONDS:g} s: {listed}"
        else:
            parts = ", ".join(f"{when} {seconds:.1f} s" for when, seconds in spent.items())
            said = f"took {total:.1f} s ({parts}): more than the {TEST_SECONDS:g} s a test may take"
        report.longrepr = (
            f"{item.nodeid} {said}. Share what it starts with the other tests of its module, "
            "or make it cheaper; split it if it proves several things."
        )
    return report
