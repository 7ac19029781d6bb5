"""Another key's run is refused by the code path that refuses a run that does not exist
(issue 18: it took 0.46 ms longer, significant over 1,500 pairs; ADR 0072): who may see
what is part of the query, so the other key's row is never read, decoded or locked.
The timing itself is `bench/ownership_bench.py`'s (docs/research/limits-under-floods.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction
from django.db.models.signals import post_init

from access_app import guards
from access_app.callers import Caller
from flowcore.common.errors import NotFound
from runs_app import agent_steps, selectors
from runs_app.models import Run, new_run_id

pytestmark = pytest.mark.django_db

ALPHA, BETA = guards.key_caller("alpha"), guards.key_caller("beta")
KEYLESS = Caller(key="anon:127.0.0.1:x", address="127.0.0.1")
STAFF_WITHOUT_RUNS = Caller(key="staff:someone", name="someone")


@pytest.fixture
def runs_built() -> Iterator[list[str]]:
    """The ids of the Run instances built while the test runs (a row read into a model)."""
    built: list[str] = []

    def seen(sender: Any, instance: Run, **kwargs: Any) -> None:
        built.append(instance.public_id)

    post_init.connect(seen, sender=Run)
    try:
        yield built
    finally:
        post_init.disconnect(seen, sender=Run)


def start(caller: Caller) -> str:
    started = agent_steps.run_start(caller=caller, flow_id="refund_request", values=None, ref=None)
    return str(started["run_id"])


def refusal(caller: Caller, run_id: str, *, for_update: bool) -> dict[str, Any]:
    with transaction.atomic(), pytest.raises(NotFound) as refused:
        selectors.run_get(caller, run_id, for_update=for_update)
    error = refused.value
    return {"error": error.error, "reason": error.reason.replace(run_id, "ID"), "next": error.next}


@pytest.mark.parametrize("for_update", [False, True], ids=["read", "locked read"])
@pytest.mark.parametrize(
    ("owner", "asker"),
    [(ALPHA, BETA), (ALPHA, KEYLESS), (ALPHA, STAFF_WITHOUT_RUNS), (KEYLESS, BETA)],
    ids=["another key", "keyless asks a key's", "staff without the permission", "key asks keyless"],
)
def test_a_run_the_caller_may_not_see_is_never_read(
    owner: Caller, asker: Caller, for_update: bool, runs_built: list[str]
) -> None:
    theirs = start(owner)
    runs_built.clear()

    refused = refusal(asker, theirs, for_update=for_update)
    missing = refusal(asker, new_run_id(), for_update=for_update)

    assert runs_built == []
    assert refused == missing


@pytest.mark.parametrize("for_update", [False, True], ids=["read", "locked read"])
def test_the_callers_own_run_and_a_keyless_run_without_keys_are_still_read(
    for_update: bool,
) -> None:
    mine, keyless = start(ALPHA), start(KEYLESS)
    with transaction.atomic():
        assert selectors.run_get(ALPHA, mine, for_update=for_update).public_id == mine
        other_keyless = Caller(key="anon:10.0.0.9:y", address="10.0.0.9")
        assert selectors.run_get(other_keyless, keyless, for_update=for_update).public_id == keyless


def test_owners_are_compared_in_constant_time_and_by_the_same_rule() -> None:
    assert selectors.may_see(ALPHA, "key:alpha")
    assert not selectors.may_see(ALPHA, "key:alphabet")
    assert not selectors.may_see(BETA, "key:alpha")
    assert selectors.may_see(KEYLESS, "anon:10.1.1.1:z")
    assert not selectors.may_see(KEYLESS, "key:alpha")
    assert not selectors.may_see(STAFF_WITHOUT_RUNS, "anon:10.1.1.1:z")
