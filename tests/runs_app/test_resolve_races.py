"""A person resolving a stalled run races other calls on the same run: the run is
read locked, so exactly one answer applies; a person who loses is told the run is no
longer stalled, an agent that answers the stalled node is told the run is stalled (it
came first) or has moved (the person came first). No database error reaches anyone, and
the chain stays whole.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from access_app.callers import RUNS_RESOLVE, RUNS_VIEW, Caller
from flowcore.common.errors import Refusal
from runs_app.models import Run
from runs_app.resolve import run_resolve
from tests.runs_app.test_concurrency import (
    CALLER,
    LABELS,
    answer,
    assert_chain,
    assert_our_refusal,
    race,
    start_refund,
)

REPETITIONS = 10
PEOPLE = [
    Caller(key=f"staff:p{i}", name=f"p{i}", permissions=frozenset({RUNS_VIEW, RUNS_RESOLVE}))
    for i in range(4)
]


def stalled_refund() -> str:
    run_id = start_refund()
    assert answer(run_id, "__unknown__", "n_reason")["status"] == "stalled"
    return run_id


def resolve(person: Caller, run_id: str, choice: str) -> dict[str, Any]:
    return run_resolve(
        caller=person, run_id=run_id, choice=choice, values=None, note=f"{person.name} decided"
    )


@pytest.mark.django_db(transaction=True)
def test_people_racing_to_answer_one_stalled_run_apply_once() -> None:
    for _ in range(REPETITIONS):
        run_id = stalled_refund()

        outcomes = race([partial(resolve, p, run_id, LABELS[i]) for i, p in enumerate(PEOPLE)])

        won = [o for o in outcomes if isinstance(o, dict)]
        assert len(won) == 1, outcomes
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                assert_our_refusal(outcome, Refusal)
                assert isinstance(outcome, Refusal) and outcome.error == "run is not stalled"
        run = Run.objects.get(public_id=run_id)
        assert assert_chain(run) == [1, 2, 3]
        assert run.steps.filter(tool="resolve").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_person_and_the_agent_racing_at_the_stalled_node_one_answer_applies() -> None:
    for _ in range(REPETITIONS):
        run_id = stalled_refund()

        person, agent = race(
            [
                partial(resolve, PEOPLE[0], run_id, "damaged"),
                partial(answer, run_id, "wrong_item", "n_reason"),
            ]
        )

        assert isinstance(person, dict) and person["node"]["id"] == "n_photos"
        assert_our_refusal(agent, Refusal)  # type: ignore[arg-type]
        assert isinstance(agent, Refusal)
        assert agent.error in {"run is stalled", "run has moved"}
        run = Run.objects.get(public_id=run_id)
        assert assert_chain(run) == [1, 2, 3]
        assert (run.state, run.node) == ("active", "n_photos")
        assert run.steps.get(seq=3).caller == PEOPLE[0].key != CALLER.key
