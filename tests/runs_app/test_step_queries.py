"""What one step costs the database (ADR 0039), pinned statement by statement: a
``guide_answer`` through the service is one locked read of the run, one UPDATE of the
columns a step changes and one INSERT of the step (one statement on PostgreSQL, ADR
0088), in one transaction; through the dispatcher it adds the rate limit's bucket
statement and the call's audit record, and nothing else (an accepted call does not touch
the failure streaks). The same whatever the run's length."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from access_app import guards, ratelimit
from access_app.callers import Transport
from events_app.services import forget_subscriptions
from guidepost.mcp.dispatch import dispatch
from runs_app import agent_steps

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = Transport(peer="127.0.0.1", client_name="pytest", client_version="9", key_name="tester")
ORDER = {"order_number": "A00118"}
# back to n_reason and answer it again: two steps a round, the run growing each time
ROUNDS = 40


def statement(sql: str) -> str:
    """A statement as its kind and table: ``SELECT runs_app_run``, ``BEGIN``, ``COMMIT``;
    one with a WITH clause as what it writes: ``UPDATE runs_app_run + INSERT runs_app_step``."""
    words = sql.split()
    kind = words[0].upper()
    if kind in ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE"):
        return kind
    if kind == "WITH":
        writes = re.findall(r'\b(UPDATE|INSERT INTO|DELETE FROM)\s+"?(\w+)"?', sql)
        return " + ".join(f"{verb.split()[0]} {table}" for verb, table in writes)
    table = re.search(r'(?:FROM|INTO|UPDATE)\s+"?(\w+)"?', sql)
    return f"{kind} {table.group(1) if table else '?'}"


# A step's writes: the run's UPDATE and the step's INSERT, one statement on PostgreSQL.
STEP_WRITES = (
    ["UPDATE runs_app_run + INSERT runs_app_step"]
    if connection.vendor == "postgresql"
    else ["UPDATE runs_app_run", "INSERT runs_app_step"]
)


def captured(call: object) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        call()  # type: ignore[operator]
    return [statement(q["sql"]) for q in queries.captured_queries]


@pytest.mark.parametrize("rounds", [0, ROUNDS], ids=["new run", f"{2 * ROUNDS + 1} steps"])
def test_an_answer_through_the_dispatcher_adds_only_its_audit_record_and_a_bucket_per_lease(
    rounds: int, settings: Any
) -> None:
    # Which events are wanted is read once a second per process, not per step: kept for
    # the test, so that a slow machine does not see that read land inside a counted step.
    settings.GUIDEPOST_EVENTS_CACHE = 3600.0
    forget_subscriptions()  # read afresh from this test's database by the first call
    started = dispatch("guide_start", {"flow_id": "refund_request", "values": ORDER}, AGENT)
    run_id = started.payload["run_id"]
    for _ in range(rounds):
        dispatch("guide_answer", {"run_id": run_id, "choice": "damaged"}, AGENT)
        dispatch("guide_back", {"run_id": run_id, "to": "n_reason"}, AGENT)

    def answer() -> list[str]:
        return captured(
            lambda: dispatch(
                "guide_answer", {"run_id": run_id, "choice": "damaged", "at": "n_reason"}, AGENT
            )
        )

    step = [
        "BEGIN",
        "SELECT runs_app_run",
        *STEP_WRITES,
        "INSERT runs_app_auditrecord",
        "COMMIT",
    ]
    ratelimit.leases_forget()
    assert answer() == ["INSERT runs_app_ratebucket", *step]  # it takes a lease of tokens
    dispatch("guide_back", {"run_id": run_id, "to": "n_reason"}, AGENT)
    assert answer() == step  # the lease pays for this one


def test_the_update_of_a_step_writes_only_the_columns_a_step_changes() -> None:
    caller = guards.authenticate(AGENT)
    run_id = agent_steps.run_start(caller=caller, flow_id="refund_request", values=ORDER, ref=None)[
        "run_id"
    ]

    with CaptureQueriesContext(connection) as queries:
        agent_steps.run_answer(caller=caller, run_id=run_id, choice="damaged", values=None, at=None)

    [update] = [
        q["sql"] for q in queries.captured_queries if "UPDATE runs_app_run" in statement(q["sql"])
    ]
    columns = re.findall(r'"(\w+)" = ', update.split(" SET ", 1)[1].split(" WHERE ")[0])
    assert sorted(columns) == sorted(
        [
            "packed_state",
            "state",
            "node",
            "outcome",
            "revision",
            "updated_at",
            "stalled_at",
            "head_hash",
        ]
    )


def test_an_accepted_call_ends_the_failure_streak_without_writing_to_it() -> None:
    first = dispatch("guide_status", {"run_id": "r_nothing"}, AGENT)
    second = dispatch("guide_status", {"run_id": "r_nothing"}, AGENT)
    accepted = dispatch("guide_flows", {}, AGENT)
    after = dispatch("guide_status", {"run_id": "r_nothing"}, AGENT)

    assert (first.payload["attempt"], second.payload["attempt"]) == (1, 2)
    assert not accepted.is_error
    assert after.payload["attempt"] == 1 and not after.payload.get("repeated", False)
