"""Failure accounting (spec §7, ADR 0020), called directly: what a streak counts, where
it is scoped, what ends it, and what is stored. The dispatcher's use of it is tested over
MCP in test_mcp_protocol.py; these pin the rules mutation testing found untested here."""

from __future__ import annotations

import hashlib
import logging
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection, transaction

from access_app.audit import Entry, audit_record
from access_app.callers import Caller, Transport
from access_app.failures import (
    KEY_WIDE,
    Conversation,
    FailureCount,
    LocalStreaks,
    call_signature,
    error_identity,
    failure_record,
    failures_clear,
    local_streaks,
)
from access_app.models import FailureStreak
from flowcore.common.errors import SHARED_COUNT
from flowcore.common.limits import (
    KEY_FAILURES_BEFORE_GIVING_UP,
    MAX_ID_LENGTH,
    STREAK_FAILURES_BEFORE_GIVING_UP,
)
from runs_app import agent_steps
from runs_app.selectors import run_visible

pytestmark = pytest.mark.django_db

ALICE = Caller(key="key:alice", name="alice", key_name="alice")
BOB = Caller(key="key:bob", name="bob", key_name="bob")
SIG_A = "a" * 64
SIG_B = "b" * 64


def run_of(caller: Caller) -> str:
    started = agent_steps.run_start(caller=caller, flow_id="refund_request", values=None, ref=None)
    return str(started["run_id"])


# A call with no run, on the connection a conversation holds (its address and port).
NO_RUN = Conversation(connection="10.0.0.7:50001")


def fail(
    caller: Caller,
    run_id: object = None,
    error: str = "invalid arguments",
    sig: str = SIG_A,
    conversation: Conversation = NO_RUN,
) -> FailureCount:
    return failure_record(
        caller=caller,
        run_id=run_id,
        signature=sig,
        error=error,
        run_visible=run_visible,
        conversation=conversation,
    )


def streak(caller: Caller, scope: str = NO_RUN.scope()) -> dict[str, Any]:
    row = FailureStreak.objects.get(caller=caller.key, scope=scope)
    return {
        "scope": row.scope,
        "failures": row.failures,
        "by_error": row.by_error,
        "last_failure": row.last_failure,
    }


def test_the_call_signature_is_the_sha256_of_tool_and_sorted_arguments_as_json() -> None:
    arguments = {"run_id": "r_1", "choice": "déjà vu", "amount": Decimal("1.50")}

    # Keys sorted, non-ASCII kept as it is, what JSON cannot say written as str().
    text = '["guide_answer", {"amount": "1.50", "choice": "déjà vu", "run_id": "r_1"}]'
    assert call_signature("guide_answer", arguments) == hashlib.sha256(text.encode()).hexdigest()


def test_a_call_with_a_lone_surrogate_still_has_a_signature() -> None:
    # Refused, but still counted: its text cannot be UTF-8 as it is.
    expected = hashlib.sha256(
        '["guide_answer", {"choice": "\ud800"}]'.encode("utf-8", "surrogatepass")
    )

    assert call_signature("guide_answer", {"choice": "\ud800"}) == expected.hexdigest()


def test_a_first_failure_on_a_visible_run_is_attempt_one_scoped_to_that_run() -> None:
    run_id = run_of(ALICE)

    assert fail(ALICE, run_id) == FailureCount(attempt=1, repeated=False, on_run=True)
    assert streak(ALICE, run_id) == {
        "scope": run_id,
        "failures": 1,
        "by_error": {"invalid arguments": 1},
        "last_failure": SIG_A,
    }


@pytest.mark.parametrize("run_id", [None, 7, "r_nosuchrun"], ids=["none", "not-text", "unknown"])
def test_a_failure_naming_no_run_it_can_see_is_scoped_to_its_connection(run_id: object) -> None:
    assert fail(ALICE, run_id) == FailureCount(attempt=1, repeated=False, on_run=False)
    assert streak(ALICE)["scope"] == "conn:10.0.0.7:50001"


def test_a_failure_naming_another_keys_run_counts_as_on_no_run() -> None:
    bobs_run = run_of(BOB)

    assert fail(ALICE, bobs_run) == FailureCount(attempt=1, repeated=False, on_run=False)
    assert streak(ALICE)["scope"] == "conn:10.0.0.7:50001"


def test_a_failure_with_a_ref_is_scoped_to_the_ref_not_the_connection() -> None:
    """One connection, two conversations told apart by their ref: each its own count."""
    ticket_1 = Conversation(ref="TICKET-1", connection="10.0.0.7:50001")
    ticket_2 = Conversation(ref="TICKET-2", connection="10.0.0.7:50001")
    fail(ALICE, conversation=ticket_1)
    fail(ALICE, conversation=ticket_1)

    assert fail(ALICE, conversation=ticket_2) == FailureCount(1, repeated=False, on_run=False)
    assert fail(ALICE, conversation=ticket_1) == FailureCount(3, repeated=True, on_run=False)
    assert streak(ALICE, ticket_1.scope())["scope"].startswith("ref:")
    assert "TICKET" not in ticket_1.scope()  # a digest: no text of the caller's stored


@pytest.mark.parametrize("on_run", [True, False], ids=["on-a-run", "on-no-run"])
def test_the_same_error_again_in_the_same_scope_climbs_and_is_repeated(on_run: bool) -> None:
    run_id = run_of(ALICE) if on_run else None
    fail(ALICE, run_id)

    assert fail(ALICE, run_id) == FailureCount(attempt=2, repeated=True, on_run=on_run)
    assert fail(ALICE, run_id, sig=SIG_B) == FailureCount(attempt=3, repeated=False, on_run=on_run)
    assert streak(ALICE, run_id or NO_RUN.scope())["failures"] == 3


def test_another_error_in_the_streak_starts_at_one_and_the_first_keeps_its_count() -> None:
    fail(ALICE, error="invalid arguments")
    fail(ALICE, error="invalid arguments", sig=SIG_B)

    assert fail(ALICE, error="node not found") == FailureCount(1, repeated=False, on_run=False)
    # The same call as the one just before (SIG_A): repeated, whatever the error.
    assert fail(ALICE, error="invalid arguments") == FailureCount(3, repeated=True, on_run=False)
    assert streak(ALICE)["by_error"] == {"invalid arguments": 3, "node not found": 1}


def test_the_same_error_is_its_words_and_its_reason() -> None:
    missing = error_identity("invalid arguments", "yaml is missing")

    assert missing == error_identity("invalid arguments", "yaml is missing")
    assert missing != error_identity("invalid arguments", "unknown argument 'yml'")
    assert missing != error_identity("draft refused", "yaml is missing")


def test_a_failure_in_another_conversation_keeps_each_streak() -> None:
    """Conversations of one key interleave: each keeps its own count."""
    run_id = run_of(ALICE)
    fail(ALICE, None)
    fail(ALICE, None)

    assert fail(ALICE, run_id) == FailureCount(attempt=1, repeated=False, on_run=True)
    assert fail(ALICE, None) == FailureCount(attempt=3, repeated=True, on_run=False)
    assert streak(ALICE, run_id) == {
        "scope": run_id,
        "failures": 1,
        "by_error": {"invalid arguments": 1},
        "last_failure": SIG_A,
    }
    assert streak(ALICE, KEY_WIDE)["failures"] == 4


def test_an_accepted_call_on_another_run_does_not_end_a_runs_streak() -> None:
    mine, other = run_of(ALICE), run_of(ALICE)
    fail(ALICE, mine)
    called(ALICE, run_id=other)

    assert fail(ALICE, mine) == FailureCount(attempt=2, repeated=True, on_run=True)
    called(ALICE, run_id=mine)
    assert fail(ALICE, mine) == FailureCount(attempt=1, repeated=False, on_run=True)


def test_a_streak_whatever_its_errors_breaks_its_loop_at_its_bound() -> None:
    counts = [
        fail(ALICE, error=f"e{n}", sig=f"{n:064d}") for n in range(STREAK_FAILURES_BEFORE_GIVING_UP)
    ]

    assert {c.attempt for c in counts} == {1}
    assert [c.looping for c in counts] == [False] * (STREAK_FAILURES_BEFORE_GIVING_UP - 1) + [True]


def test_a_key_failing_everywhere_breaks_its_loop_at_the_much_higher_bound() -> None:
    """Every conversation's first failure, and no call of the key accepted between: the
    key's own bound stops the loop."""
    counts = [
        fail(ALICE, conversation=Conversation(connection=f"10.0.0.7:{port}"))
        for port in range(KEY_FAILURES_BEFORE_GIVING_UP)
    ]

    assert {c.attempt for c in counts} == {1}
    assert [c.looping for c in counts].index(True) == KEY_FAILURES_BEFORE_GIVING_UP - 1
    called(ALICE)
    assert not fail(ALICE).looping


def test_streaks_are_per_caller() -> None:
    fail(ALICE)
    fail(ALICE)

    assert fail(BOB) == FailureCount(attempt=1, repeated=False, on_run=False)
    assert streak(ALICE)["failures"] == 2
    assert streak(BOB)["failures"] == 1


def called(
    caller: Caller, outcome: str = "ok", tool: str = "guide_status", run_id: str = ""
) -> None:
    """What the dispatcher writes for a tool call: its audit record ("ok" when accepted)."""
    audit_record(
        Entry(
            tool=tool,
            outcome=outcome,
            status=200,
            duration_ms=1.0,
            caller=caller.key,
            key_name=caller.key_name,
            run_id=run_id,
        )
    )


def test_an_accepted_call_after_a_failure_starts_a_new_streak() -> None:
    run_id = run_of(ALICE)
    fail(ALICE, run_id)
    fail(ALICE, run_id)

    called(ALICE, run_id=run_id)

    assert fail(ALICE, run_id) == FailureCount(attempt=1, repeated=False, on_run=True)
    assert streak(ALICE, run_id) == {
        "scope": run_id,
        "failures": 1,
        "by_error": {"invalid arguments": 1},
        "last_failure": SIG_A,
    }


def test_a_refused_call_or_another_callers_accepted_call_does_not_end_a_streak() -> None:
    fail(ALICE)
    called(ALICE, outcome="run not found")
    called(BOB)

    assert fail(ALICE) == FailureCount(attempt=2, repeated=True, on_run=False)


def test_an_accepted_request_that_is_no_tool_call_does_not_end_a_streak() -> None:
    fail(ALICE)
    called(ALICE, tool="GET /api/runs")  # the JSON API's audit record, accepted

    assert fail(ALICE) == FailureCount(attempt=2, repeated=True, on_run=False)


def test_an_accepted_call_costs_no_statement_for_the_streak(
    django_assert_num_queries: Any,
) -> None:
    fail(ALICE)

    with django_assert_num_queries(0):  # the audit record ends the stored streak
        failures_clear(ALICE)


def test_counting_a_failure_inside_the_callers_transaction_adds_no_savepoint(
    django_assert_num_queries: Any,
) -> None:
    fail(ALICE)

    # The conversation's and the key's streaks read under a lock, whether a call was
    # accepted since each, then their updates: no SAVEPOINT/RELEASE around them.
    with transaction.atomic(), django_assert_num_queries(6):
        fail(ALICE)


# --- counted in this process (the database cannot hold the streak) ---------------------------


@pytest.fixture
def no_local_streaks() -> Any:
    local_streaks.clear(ALICE.key)
    yield
    local_streaks.clear(ALICE.key)


@pytest.mark.parametrize(
    ("run_id", "on_run"),
    [("r", True), ("r" * MAX_ID_LENGTH, True), ("r" * (MAX_ID_LENGTH + 1), False), ("", False)],
    ids=["one-character", "longest-id", "too-long", "empty"],
)
def test_a_failure_counted_in_process_is_on_any_id_that_could_name_a_run(
    no_local_streaks: None, run_id: str, on_run: bool
) -> None:
    counted = failure_record(
        caller=ALICE,
        run_id=run_id,
        signature=SIG_A,
        error="e",
        run_visible=run_visible,
        stored=False,
    )

    assert counted == FailureCount(attempt=1, repeated=False, on_run=on_run)
    assert not FailureStreak.objects.exists()  # nothing stored


def test_in_process_streaks_follow_the_stored_rules() -> None:
    streaks = LocalStreaks()

    def record(scope: str, sig: str, error: str) -> FailureCount:
        return streaks.record("key:a", scope, sig, error, on_run=scope == "run:r_1")

    assert record("run:r_1", SIG_A, "e") == FailureCount(1, False, on_run=True)
    assert record("run:r_1", SIG_A, "e") == FailureCount(2, True, on_run=True)
    assert record("run:r_1", SIG_B, "f") == FailureCount(1, False, on_run=True)
    # Another conversation: its own streak, and the first one's goes on.
    assert record("conn:x", SIG_B, "e") == FailureCount(1, False, on_run=False)
    assert record("run:r_1", SIG_A, "e") == FailureCount(3, False, on_run=True)
    streaks.clear("key:a")
    assert record("conn:x", SIG_B, "e") == FailureCount(1, False, on_run=False)


def test_in_process_streaks_keep_ten_thousand_callers_by_default() -> None:
    assert LocalStreaks().max_callers == 10_000


def test_in_process_streaks_forget_the_oldest_caller_past_the_limit() -> None:
    streaks = LocalStreaks(max_callers=2)

    def record(key: str) -> FailureCount:
        return streaks.record(key, "conn:x", SIG_A, "e", on_run=False)

    record("key:a")
    record("key:b")

    # Two callers fit: a's streak goes on (and a becomes the most recent).
    assert record("key:a").attempt == 2
    record("key:c")  # a third: b, now the oldest, is forgotten

    assert record("key:a").attempt == 3
    assert record("key:b").attempt == 1


def test_an_accepted_call_ends_the_streak_counted_in_process(no_local_streaks: None) -> None:
    def fail_in_process() -> FailureCount:
        return failure_record(
            caller=ALICE,
            run_id=None,
            signature=SIG_A,
            error="e",
            run_visible=run_visible,
            stored=False,
        )

    fail_in_process()
    assert fail_in_process().attempt == 2

    failures_clear(ALICE)

    assert fail_in_process() == FailureCount(attempt=1, repeated=False, on_run=False)


def test_a_database_failing_while_counting_is_logged_and_the_failure_counted_in_process(
    no_local_streaks: None, caplog: pytest.LogCaptureFixture
) -> None:
    with connection.cursor() as cursor:  # rolled back with the test's transaction
        cursor.execute(f"DROP TABLE {FailureStreak._meta.db_table}")

    with caplog.at_level(logging.WARNING, logger="access_app.failures"):
        counted = fail(ALICE)

    assert counted == FailureCount(attempt=1, repeated=False, on_run=False)
    [record] = [r for r in caplog.records if r.name == "access_app.failures"]
    message = record.getMessage()
    assert message.startswith("failure streak counted in this process: ")
    assert FailureStreak._meta.db_table in message  # the database's own reason


@pytest.mark.parametrize(
    ("key_name", "told"), [("", True), ("support-bot", False)], ids=["keyless", "keyed"]
)
def test_a_keyless_caller_that_gives_up_is_told_its_count_is_shared(
    key_name: str, told: bool
) -> None:
    """Issue 20: keyless local processes with the same client name share `attempt`; the
    MCP transport is stateless and tells no process from another (no session id, and a
    client's connections come and go), so the count stays per address and client name,
    and the caller that gives up is told so, and how to get a count of its own."""
    from guidepost.mcp.dispatch import dispatch

    via = Transport(peer="127.0.0.1", client_name="shared-name", key_name=key_name)
    errors = [dispatch("guide_flows", {"category": "nope"}, via).payload for _ in range(3)]

    assert [e["attempt"] for e in errors] == [1, 2, 3]
    assert all(SHARED_COUNT not in e["next"] for e in errors[:2])
    assert (SHARED_COUNT in errors[2]["next"]) is told
    assert errors[2]["retryable"] is False
