"""Racing calls on one run: exactly one transition applies, the others are told the run
moved (or, for a retry carrying ``at``, get the stored result back), and no database
error ever reaches a caller.

First at the service level with barrier-synchronised threads, then over real HTTP
against a real server with many concurrent MCP clients.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from functools import partial
from typing import Any

import anyio
import pytest
from django.db import connection, connections
from mcp import Client
from mcp.types import CallToolResult, Implementation

from access_app.callers import Caller
from flowcore.common.errors import Refusal
from flows_app.models import FlowVersion
from runs_app import agent_steps
from runs_app.chain import steps_verify
from runs_app.models import Run
from tests.support.servers import REPO, Server, serving

CALLER = Caller(key="test:concurrency", name="pytest")
ORDER = {"order_number": "A00118"}
LABELS = ["damaged", "wrong_item", "changed_mind", "not_arrived"]  # n_reason's labels
RACERS = 8
REPETITIONS = 30
JOIN_TIMEOUT = 120.0
# How long, on SQLite, the overtaking call waits for the writer queue the overtaken one holds.
OVERTAKE_WAIT = 0.5


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- service level: threads -----------------------------------------------------------------


def race(calls: Sequence[Callable[[], dict[str, Any]]]) -> list[dict[str, Any] | Exception]:
    """Run ``calls`` at once, one thread each, released together by a barrier.

    Each outcome is the call's result or the exception it raised; every thread closes
    its own database connections.
    """
    barrier = threading.Barrier(len(calls))
    outcomes: list[dict[str, Any] | Exception | None] = [None] * len(calls)

    def racer(i: int) -> None:
        try:
            barrier.wait(timeout=JOIN_TIMEOUT)
            outcomes[i] = calls[i]()
        except Exception as exc:  # every outcome is asserted on by the caller
            outcomes[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a racer did not finish"
    assert all(o is not None for o in outcomes)
    return [o for o in outcomes if o is not None]


def start_refund() -> str:
    """A run waiting at n_reason (the order number given in advance)."""
    started = agent_steps.run_start(caller=CALLER, flow_id="refund_request", values=ORDER, ref=None)
    assert started["node"]["id"] == "n_reason"
    return str(started["run_id"])


def answer(run_id: str, choice: str, at: str | None) -> dict[str, Any]:
    return agent_steps.run_answer(caller=CALLER, run_id=run_id, choice=choice, values=None, at=at)


def assert_our_refusal(outcome: Exception, *allowed: type[Exception]) -> None:
    """A refusal is one of ours, never a database error in disguise."""
    assert isinstance(outcome, allowed), f"{type(outcome).__name__}: {outcome}"
    assert "locked" not in str(outcome).lower()


def assert_chain(run: Run) -> list[int]:
    seqs = list(run.steps.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert run.revision == len(seqs)
    assert steps_verify(run) is None
    return seqs


@pytest.mark.django_db(transaction=True)
def test_racing_answers_with_at_apply_once_and_the_losers_get_moved_or_the_stored_result() -> None:
    choices = [LABELS[i % len(LABELS)] for i in range(RACERS)]
    for _ in range(REPETITIONS):
        run_id = start_refund()

        outcomes = race([partial(answer, run_id, choice, "n_reason") for choice in choices])

        applied = [
            i for i, o in enumerate(outcomes) if isinstance(o, dict) and not o.get("repeated")
        ]
        assert len(applied) == 1, outcomes
        winner = outcomes[applied[0]]
        assert isinstance(winner, dict)
        won_with = choices[applied[0]]
        for choice, outcome in zip(choices, outcomes, strict=True):
            if outcome is winner:
                continue
            if choice == won_with:
                assert outcome == {**winner, "repeated": True}
            else:
                assert isinstance(outcome, Refusal), outcome
                assert outcome.error == "run has moved"
        run = Run.objects.get(public_id=run_id)
        assert assert_chain(run) == [1, 2]
        step = run.steps.get(seq=2)
        assert (step.tool, step.node_before, step.input) == (
            "guide_answer",
            "n_reason",
            {"choice": won_with},
        )


@pytest.mark.django_db(transaction=True)
def test_racing_answers_without_at_apply_once_at_the_node_they_raced_for() -> None:
    """Without ``at`` a call that arrives after the winner is a fresh answer to the next
    node, so only the node raced for is pinned: exactly one step answers it."""
    choices = [LABELS[i % len(LABELS)] for i in range(RACERS)]
    for _ in range(REPETITIONS):
        run_id = start_refund()

        outcomes = race([partial(answer, run_id, choice, None) for choice in choices])

        accepted = [o for o in outcomes if isinstance(o, dict)]
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                # Moved (lost the race), or ended under later calls: n_reason's labels are
                # unmatched at every later node, and the third unmatched one is unknown there
                # (a stall, or n_tracking's __unknown__ route to an end).
                assert_our_refusal(outcome, Refusal)
                assert isinstance(outcome, Refusal)
                assert outcome.error in {"run has moved", "run is stalled", "run is completed"}
        assert all(not o.get("repeated") for o in accepted)
        run = Run.objects.get(public_id=run_id)
        assert len(assert_chain(run)) == 1 + len(accepted)
        at_reason = run.steps.filter(tool="guide_answer", node_before="n_reason")
        assert at_reason.count() == 1


@pytest.mark.django_db(transaction=True)
def test_racing_first_starts_of_a_flow_pin_one_flow_version() -> None:
    for flow_id in ["refund_request", "payment_failed", "identity_check"]:
        outcomes = race(
            [
                partial(
                    agent_steps.run_start, caller=CALLER, flow_id=flow_id, values=None, ref=None
                )
                for _ in range(RACERS)
            ]
        )

        assert all(isinstance(o, dict) for o in outcomes), outcomes
        assert FlowVersion.objects.filter(flow_id=flow_id).count() == 1
        runs = Run.objects.filter(flow_id=flow_id)
        assert runs.count() == RACERS
        assert runs.values("flow_version").distinct().count() == 1
        for run in runs:
            assert assert_chain(run) == [1]


@pytest.mark.django_db(transaction=True)
def test_racing_closes_close_once_and_the_others_get_repeated() -> None:
    for _ in range(REPETITIONS // 3):
        run_id = start_refund()

        outcomes = race(
            [
                partial(agent_steps.run_close, caller=CALLER, run_id=run_id, reason=f"racer {i}")
                for i in range(RACERS)
            ]
        )

        assert all(isinstance(o, dict) for o in outcomes), outcomes
        first = [o for o in outcomes if isinstance(o, dict) and not o.get("repeated")]
        assert len(first) == 1
        assert all(o == {**first[0], "repeated": True} for o in outcomes if o is not first[0])
        run = Run.objects.get(public_id=run_id)
        assert assert_chain(run) == [1, 2]
        assert run.state == Run.State.CLOSED


@contextmanager
def overtaken_before_the_lock(overtake: Callable[[], object]) -> Iterator[list[object]]:
    """Let ``overtake`` run to its commit, on a thread (and connection) of its own, at the
    moment this thread's next service call has read the run but not yet locked it.

    That moment is the call's first statement that takes the lock: ``SELECT ... FOR
    UPDATE`` on PostgreSQL, the ``BEGIN IMMEDIATE`` that takes the write lock on SQLite.
    Both calls are real and commit for real; the hook only fixes their order, so the
    stale read a race can produce happens every time. Yields what ``overtake`` returned.
    """
    done: list[object] = []
    fired_at: list[str] = []

    def run_overtake() -> None:
        try:
            done.append(overtake())
        except Exception as exc:  # asserted on by the caller through `done`
            done.append(exc)
        finally:
            connections.close_all()

    def hook(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        if not done and ("FOR UPDATE" in sql or sql.startswith("BEGIN")):
            fired_at.append(sql)
            thread = threading.Thread(target=run_overtake)
            thread.start()
            thread.join(JOIN_TIMEOUT)
            assert done, "the overtaking call did not finish"
        return execute(sql, params, many, context)

    # On SQLite this thread holds the process's writer queue (guidepost.db.sqlite3) when
    # the hook fires: the overtaking call waits for it until its timeout, then goes ahead
    # (SQLite's own lock is still free). A short timeout for that one wait keeps both calls
    # and their order, without GUIDEPOST_SQLITE_TIMEOUT idle seconds per test (ADR 0085).
    options = connection.settings_dict["OPTIONS"]
    timeout = options.get("timeout")
    if connection.vendor == "sqlite":
        options["timeout"] = OVERTAKE_WAIT
    try:
        with connection.execute_wrapper(hook):
            yield done
    finally:
        if timeout is not None:
            options["timeout"] = timeout
    assert len(done) == 1, "the call never reached its lock"
    assert isinstance(done[0], dict), done[0]
    [lock] = fired_at
    if connection.vendor == "postgresql":
        assert lock.startswith("SELECT") and "FOR UPDATE" in lock, lock
    else:
        assert lock == "BEGIN IMMEDIATE", lock


@pytest.mark.django_db(transaction=True)
def test_an_answer_at_a_node_the_run_left_before_the_lock_loses_and_writes_nothing() -> None:
    """``at`` names the node the caller meant: an answer for n_reason that reaches the run's
    lock after another call moved it on must not apply to the moved run."""
    run_id = start_refund()

    with overtaken_before_the_lock(partial(answer, run_id, "damaged", "n_reason")) as done:
        with pytest.raises(Refusal) as lost:
            answer(run_id, "wrong_item", "n_reason")

    assert (lost.value.error, lost.value.retryable) == ("run has moved", True)
    assert "n_photos" in lost.value.reason
    [overtaking] = done
    assert isinstance(overtaking, dict) and overtaking["node"]["id"] == "n_photos"
    run = Run.objects.get(public_id=run_id)
    assert (run.state, run.node, run.revision) == (Run.State.ACTIVE, "n_photos", 2)
    assert assert_chain(run) == [1, 2]
    assert list(run.steps.order_by("seq").values_list("tool", "input")) == [
        ("guide_start", {"flow_id": "refund_request", "values": ORDER}),
        ("guide_answer", {"choice": "damaged"}),
    ]


LATE_CALLS = {
    "answer": (lambda run_id: answer(run_id, "yes", None), "guide_answer"),
    "back": (
        lambda run_id: agent_steps.run_back(caller=CALLER, run_id=run_id, to="n_reason"),
        "guide_back",
    ),
    "close": (
        lambda run_id: agent_steps.run_close(caller=CALLER, run_id=run_id, reason="left"),
        "guide_close",
    ),
}


@pytest.mark.parametrize(("call", "tool"), LATE_CALLS.values(), ids=LATE_CALLS.keys())
@pytest.mark.django_db(transaction=True)
def test_a_call_without_at_is_decided_on_the_run_as_it_is_under_the_lock(
    call: Callable[[str], dict[str, Any]], tool: str
) -> None:
    """The run is read once, locked (ADR 0039): a call that names no node applies to the run
    as the lock finds it, after the call that overtook it, in one chain without gaps."""
    run_id = start_refund()

    with overtaken_before_the_lock(partial(answer, run_id, "damaged", "n_reason")):
        call(run_id)

    run = Run.objects.get(public_id=run_id)
    assert assert_chain(run) == [1, 2, 3]
    late = run.steps.get(seq=3)
    assert (late.tool, late.node_before) == (tool, "n_photos")


# --- over HTTP: a real server, many MCP clients ----------------------------------------------

WALKERS = 50
BURST = 20
# (flow, values given in advance, answers in order, the outcome reached)
WALKS: list[tuple[str, dict[str, str] | None, list[dict[str, Any]], str]] = [
    (
        "refund_request",
        ORDER,
        [
            {"choice": "damaged"},
            {"choice": "yes"},
            {"choice": "original", "values": {"refund_amount": "20"}},
        ],
        "refunded",
    ),
    (
        "refund_request",
        None,
        [
            {"values": {"order_number": "X1"}},  # unmatched: fails the pattern
            {"values": {"order_number": "A00042"}},
            {"choice": "changed_mind"},
            {"choice": "yes"},
            {"choice": "yes"},
            {"choice": "credit"},
        ],
        "credited",
    ),
    (
        "payment_failed",
        None,
        [{"choice": "E01"}, {"choice": "expired"}, {"choice": "success"}],
        "resolved",
    ),
    (
        "payment_failed",
        {"n_error_code": "E02", "n_balance": "short"},
        [{"choice": "failed"}, {"values": {"order_id": "A00118"}}, {"choice": "mismatch"}],
        "unverified",
    ),
]

STORED_STEPS = textwrap.dedent(
    """
    import json, sys
    import django
    django.setup()
    from runs_app.chain import steps_verify
    from runs_app.models import Run
    report = {}
    for run in Run.objects.filter(public_id__in=json.load(sys.stdin)):
        steps = list(run.steps.order_by("seq"))
        report[run.public_id] = {
            "seqs": [s.seq for s in steps],
            "steps": [[s.tool, s.node_before, s.input] for s in steps],
            "revision": run.revision,
            "broken_at": steps_verify(run),
        }
    json.dump(report, sys.stdout)
    """
)


def stored_steps(database_url: str, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The steps a server wrote, read back from its own database by our own code."""
    done = subprocess.run(
        [sys.executable, "-c", STORED_STEPS],
        input=json.dumps(list(run_ids)),
        capture_output=True,
        text=True,
        cwd=REPO,
        env={
            **os.environ,
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "guidepost.settings",
        },
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, dict[str, Any]] = json.loads(done.stdout)
    assert sorted(report) == sorted(run_ids)
    return report


def assert_contiguous_and_verified(report: dict[str, dict[str, Any]]) -> None:
    for run_id, stored in report.items():
        assert stored["seqs"] == list(range(1, len(stored["seqs"]) + 1)), run_id
        assert stored["revision"] == len(stored["seqs"]), run_id
        assert stored["broken_at"] is None, run_id


def payload(result: CallToolResult) -> dict[str, Any]:
    """The JSON object of a tool result, checked to be well formed (spec §5 and §7)."""
    assert len(result.content) == 1
    text = getattr(result.content[0], "text", "")
    assert "locked" not in text.lower()
    data: dict[str, Any] = json.loads(text)
    if result.is_error:
        assert {"error", "reason", "next", "retryable", "attempt"} <= set(data), data
        assert data["error"] != "internal error", data
    else:
        assert result.structured_content == data
        assert data.get("status") in {"advanced", "completed", "unmatched", "branched", "stalled"}
    return data


def assert_each_failure_counted_once(errors: list[dict[str, Any]]) -> None:
    """Concurrent failures of one caller with one error are numbered 1..n, each once,
    and from the third on they are no longer retryable (spec §7, ADR 0020)."""
    assert sorted(e["attempt"] for e in errors) == list(range(1, len(errors) + 1)), errors
    for error in errors:
        assert error["retryable"] is (error["attempt"] < 3), error


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    data = payload(result)
    assert not result.is_error, f"{tool} {arguments} failed: {data}"
    return data


async def walk(url: str, number: int) -> tuple[str, int]:
    """One agent walking one run to its end; returns the run id and its call count."""
    flow_id, values, answers, outcome = WALKS[number % len(WALKS)]
    async with Client(url) as client:
        arguments: dict[str, Any] = {"flow_id": flow_id, "ref": f"walker-{number}"}
        if values:
            arguments["values"] = values
        result = await call(client, "guide_start", arguments)
        run_id = result["run_id"]
        for given in answers:
            at = result["node"]["id"]
            result = await call(client, "guide_answer", {"run_id": run_id, "at": at, **given})
        assert (result["status"], result["outcome"]) == ("completed", outcome), result
        return run_id, 1 + len(answers)


async def burst(url: str, run_id: str, choices: Sequence[str]) -> list[CallToolResult]:
    """The same guide_answer from many clients at once (all connected before any call).

    Clients sending the same choice share a client name, so they are one caller: an
    accepted call ends its caller's failure streak (ADR 0020), and the callers whose
    choice lost fail together, with nothing accepted in between.
    """
    tag = uuid.uuid4().hex[:8]
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                Client(url, client_info=Implementation(name=f"racer-{choice}-{tag}", version="1"))
            )
            for choice in choices
        ]
        return await asyncio.gather(
            *(
                client.call_tool(
                    "guide_answer", {"run_id": run_id, "choice": choice, "at": "n_reason"}
                )
                for client, choice in zip(clients, choices, strict=True)
            )
        )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    """A real server of our own, with the URL of its database for reading steps back."""
    tmp = tmp_path_factory.mktemp("concurrency")
    with serving(tmp) as running:
        database_url = running.database_url
        yield running, database_url


@pytest.mark.slow
@pytest.mark.anyio
async def test_fifty_concurrent_clients_walk_their_runs_to_the_end_with_intact_step_logs(
    served: tuple[Server, str],
) -> None:
    server, database_url = served

    walked = await asyncio.gather(*(walk(server.url, n) for n in range(WALKERS)))

    report = await anyio.to_thread.run_sync(
        stored_steps, database_url, [run_id for run_id, _ in walked]
    )
    assert_contiguous_and_verified(report)
    for run_id, calls in walked:
        assert len(report[run_id]["seqs"]) == calls
    assert "database is locked" not in server.output()
    assert "Traceback" not in server.output()


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_burst_of_identical_answers_with_at_applies_once_and_repeats_the_result(
    served: tuple[Server, str],
) -> None:
    server, database_url = served
    async with Client(server.url) as client:
        run_id = (
            await call(client, "guide_start", {"flow_id": "refund_request", "values": ORDER})
        )["run_id"]

    results = [payload(r) for r in await burst(server.url, run_id, ["damaged"] * BURST)]

    assert all(not r.get("error") for r in results), results
    first = [r for r in results if not r.get("repeated")]
    assert len(first) == 1, results
    assert all(r == {**first[0], "repeated": True} for r in results if r is not first[0])
    assert first[0]["node"]["id"] == "n_photos"
    report = await anyio.to_thread.run_sync(stored_steps, database_url, [run_id])
    assert_contiguous_and_verified(report)
    assert report[run_id]["steps"][1:] == [["guide_answer", "n_reason", {"choice": "damaged"}]]
    assert "database is locked" not in server.output()


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_burst_of_different_answers_applies_one_and_refuses_the_others_as_moved(
    served: tuple[Server, str],
) -> None:
    server, database_url = served
    async with Client(server.url) as client:
        run_id = (
            await call(client, "guide_start", {"flow_id": "refund_request", "values": ORDER})
        )["run_id"]
    choices = [LABELS[i % len(LABELS)] for i in range(BURST)]

    results = await burst(server.url, run_id, choices)

    data = [payload(r) for r in results]
    applied = [i for i, r in enumerate(results) if not r.is_error and not data[i].get("repeated")]
    assert len(applied) == 1, data
    won_with = choices[applied[0]]
    for i, (choice, result) in enumerate(zip(choices, results, strict=True)):
        if i == applied[0]:
            continue
        if choice == won_with:
            assert not result.is_error, data[i]
            assert data[i] == {**data[applied[0]], "repeated": True}
        else:
            assert result.is_error, data[i]
            assert data[i]["error"] == "run has moved"
    for choice in set(choices) - {won_with}:
        assert_each_failure_counted_once(
            [d for c, d in zip(choices, data, strict=True) if c == choice]
        )
    report = await anyio.to_thread.run_sync(stored_steps, database_url, [run_id])
    assert_contiguous_and_verified(report)
    assert report[run_id]["steps"][1:] == [["guide_answer", "n_reason", {"choice": won_with}]]
    assert "database is locked" not in server.output()


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_burst_of_failing_calls_without_a_run_counts_each_failure_once(
    served: tuple[Server, str],
) -> None:
    server, _ = served
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Client(server.url)) for _ in range(BURST)]
        # A successful call without a run ends the client's failure streak.
        await call(clients[0], "guide_start", {"flow_id": "refund_request"})

        # One conversation (its ref) over many connections: one streak, raced.
        wrong = {"flow_id": "refund_requets", "ref": "ticket-4411"}
        results = await asyncio.gather(*(c.call_tool("guide_start", wrong) for c in clients))

    errors = [payload(r) for r in results]
    assert all(r.is_error for r in results)
    assert {e["error"] for e in errors} == {"flow not found"}
    assert all("refund_request" in e["candidates"] for e in errors)
    assert_each_failure_counted_once(errors)
    assert "database is locked" not in server.output()
