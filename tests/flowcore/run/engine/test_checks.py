"""Check nodes (ADR 0117): the engine passes a check as soon as the run arrives, takes the
first condition that holds (``else`` when none does), records on the path the condition
and the values it read, and goes on in the same call. The date is the step's, given by
the caller: the branch is a function of the values and that date alone.
"""

from __future__ import annotations

import json
import random
import sys
import threading
from dataclasses import replace
from datetime import date, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from flowcore.flow.conditions import holds
from flowcore.flow.model import Flow
from flowcore.run import engine
from flowcore.run.replay import StoredRun, StoredStep, replay_differences
from flowcore.run.results import result_status, start_result, step_result
from flowcore.run.state import PathEntry, RunState
from tests.flowcore.run.engine.test_transcripts import load_flow

REFUND = """\
id: checked_refund
title: Checked refund
category: test
entry: c_order
on_unknown: escalate
nodes:
  - id: c_order
    kind: collect
    say: collect the refund's details
    slots:
      amount: {ask: the amount to refund, required: true, type: number}
      bought_on: {ask: the date of purchase, required: true, type: date}
      country: {ask: the country it was sent to, required: true}
      email: {ask: their email address}
    next: k_route
  - id: k_route
    kind: check
    say: Refunds above 100 go to a supervisor, old orders are refused
    when:
      - if: amount > 100.0
        next: e_supervisor
      - if: bought_on < today - duration('720h')
        next: e_too_old
      - if: country in ['DE', 'FR'] && has(email)
        next: t_receipt
    else: e_refunded
  - id: t_receipt
    kind: tell
    say: say the receipt goes to their email
    next: e_refunded
  - id: e_supervisor
    kind: end
    say: a supervisor will decide
    outcome: escalated
  - id: e_too_old
    kind: end
    say: too old to refund
    outcome: refused
  - id: e_refunded
    kind: end
    say: refunded
    outcome: refunded
"""

DAY = date(2026, 3, 2)


def order(amount: str, bought_on: str = "2026-03-01", country: str = "NL", **more: str) -> dict:
    return {"amount": amount, "bought_on": bought_on, "country": country, **more}


def test_check_takes_first_condition_that_holds() -> None:
    flow = load_flow(REFUND)
    # Both the first and the second condition hold: the first is taken.
    moved = engine.start(flow, order("150", bought_on="2020-01-01"), today=DAY)
    assert moved.result["outcome"] == "escalated"
    assert moved.state.path[-1] == PathEntry(
        "k_route", "check", "check", "amount > 100.0", (("amount", 150.0),)
    )


def test_check_takes_else_when_no_condition_holds() -> None:
    moved = engine.start(load_flow(REFUND), order("50"), today=DAY)
    assert moved.result["outcome"] == "refunded"
    entry = moved.state.path[-1]
    assert (entry.id, entry.via, entry.value) == ("k_route", "check", "else")
    # Every value the conditions tried read, unset ones as None, the date as text.
    assert entry.read == (
        ("amount", 50.0),
        ("bought_on", "2026-03-01"),
        ("today", "2026-03-02"),
        ("country", "NL"),
        ("email", None),
    )


def test_check_moves_the_run_in_the_same_call_as_the_answer() -> None:
    flow = load_flow(REFUND)
    waiting = engine.start(flow, today=DAY)
    assert waiting.state.node == "c_order"
    moved = engine.answer(
        flow, waiting.state, values=order("20", country="DE", email="a@b.de"), today=DAY
    )
    assert moved.result["status"] == "completed"
    assert [e.id for e in moved.state.path] == ["c_order", "k_route", "t_receipt"]
    assert moved.result["tell"] == [
        {"id": "t_receipt", "say": "say the receipt goes to their email"}
    ]
    assert moved.result["checked"] == [
        {
            "id": "k_route",
            "say": "Refunds above 100 go to a supervisor, old orders are refused",
            "took": "country in ['DE', 'FR'] && has(email)",
            "next": "t_receipt",
        }
    ]


def test_has_is_false_for_an_optional_slot_left_out() -> None:
    moved = engine.start(load_flow(REFUND), order("20", country="DE"), today=DAY)
    assert moved.state.path[-1].value == "else"


def test_today_is_the_date_given_with_the_step() -> None:
    flow = load_flow(REFUND)
    bought = order("20", bought_on="2026-01-01")
    # 30 days (720 hours) after the purchase it is not yet too old; a day later it is.
    assert engine.start(flow, bought, today=date(2026, 1, 31)).result["outcome"] == "refunded"
    assert engine.start(flow, bought, today=date(2026, 2, 1)).result["outcome"] == "refused"


def test_a_condition_that_reads_no_date_without_one_does_not_hold() -> None:
    # Without a date (a caller that gives none), a condition reading today does not hold.
    moved = engine.start(load_flow(REFUND), order("20", bought_on="2000-01-01"))
    assert moved.result["outcome"] == "refunded"
    assert ("today", None) in (moved.state.path[-1].read or ())


def test_back_to_the_collect_and_a_new_amount_takes_another_branch() -> None:
    flow = load_flow(REFUND)
    first = engine.start(flow, order("150"), today=DAY)
    reopened = engine.back(flow, first.state, "c_order")
    assert reopened.state.node == "c_order"
    again = engine.answer(flow, reopened.state, values=order("50"), today=DAY)
    assert again.result["outcome"] == "refunded"
    assert again.state.effective_path()[-1].id == "k_route"


def test_a_check_is_never_what_back_reopens() -> None:
    flow = load_flow(REFUND)
    done = engine.start(flow, order("150"), today=DAY)
    # Back without `to` reopens the last node answered, the collect, not the check.
    assert engine.back(flow, done.state).state.node == "c_order"


def test_a_state_with_a_check_reads_back_as_it_was_stored() -> None:
    done = engine.start(load_flow(REFUND), order("50"), today=DAY)
    assert RunState.from_dict(done.state.to_dict()) == done.state


def test_a_flow_without_checks_gives_no_checked_key() -> None:
    plain = REFUND[: REFUND.index("  - id: k_route")].replace("next: k_route", "next: e_end")
    flow = load_flow(plain + "  - {id: e_end, kind: end, say: done, outcome: resolved}\n")
    moved = engine.start(flow, order("500"), today=DAY)
    assert moved.result["status"] == "completed"
    assert "checked" not in moved.result


@settings(max_examples=200, deadline=None)
@given(
    amount=st.decimals(min_value=0, max_value=1000, places=2),
    age=st.integers(min_value=0, max_value=90),
    country=st.sampled_from(["DE", "FR", "NL"]),
    email=st.none() | st.just("a@b.de"),
    today=st.dates(min_value=date(2000, 1, 1), max_value=date(2100, 1, 1)),
)
def test_the_branch_is_a_function_of_the_values_and_the_date(
    amount: object, age: int, country: str, email: str | None, today: date
) -> None:
    flow = load_flow(REFUND)
    values = order(str(amount), (today - timedelta(days=age)).isoformat(), country)
    if email is not None:
        values["email"] = email
    expected = "escalated" if float(str(amount)) > 100.0 else "refused" if age > 30 else "refunded"
    # The same values and date give the same branch, however the run got there.
    started = engine.start(flow, values, today=today)
    answered = engine.answer(
        flow, engine.start(flow, today=today).state, values=values, today=today
    )
    assert started.result["outcome"] == answered.result["outcome"] == expected
    assert started.state.path[-1] == answered.state.path[-1]
    tell = country in ("DE", "FR") and email is not None and expected == "refunded"
    assert ("tell" in started.result) is tell


def recorded_run(flow: Flow, day: date) -> tuple[StoredRun, list[StoredStep]]:
    """A run of REFUND as the services record it on ``day``: a start, then the order, each
    step's input holding the day."""
    given = [{"values": {}, "today": day.isoformat()}]
    started = engine.start(flow, today=day)
    given.append({"values": order("20", bought_on="2026-01-01"), "today": day.isoformat()})
    answered = engine.answer(flow, started.state, values=given[1]["values"], today=day)
    results = [start_result("r_1", flow, started), step_result("r_1", answered)]
    steps = [
        StoredStep(
            seq=i + 1,
            tool=("guide_start", "guide_answer")[i],
            input=given[i],
            result=json.loads(json.dumps(results[i])),
            status=result_status(results[i]),
            node_before=("", "c_order")[i],
            node_after=(started, answered)[i].state.node or "",
        )
        for i in range(2)
    ]
    run = StoredRun(
        "r_1",
        json.loads(json.dumps(answered.state.to_dict())),
        "completed",
        "e_refunded",
        "refunded",
    )
    return run, steps


def test_a_replay_on_a_later_day_takes_the_branch_the_recorded_day_took() -> None:
    flow = load_flow(REFUND)
    # On 2026-01-20 the purchase of 2026-01-01 was recent enough: refunded. Replayed on
    # any later day (today's, when this runs), the recorded date decides again.
    run, steps = recorded_run(flow, date(2026, 1, 20))
    assert replay_differences(flow, run, steps) == []
    # The same steps recorded a month later went to e_too_old: the replay tells them apart.
    later = [replace(s, input={**s.input, "today": "2026-02-20"}) for s in steps]
    assert replay_differences(flow, run, later) != []


def test_conditions_compiled_and_evaluated_from_many_threads_agree_with_one_thread() -> None:
    """serve answers calls on a pool of threads, and cel-expr-python is young (0.1): the
    same compiled conditions, and conditions compiled for the first time, evaluated from
    eight threads at once decide as one thread does."""
    types = {"amount": "number", "country": "text", "bought_on": "date"}
    pick = random.Random(20261208)
    cases = []
    for n in range(300):
        condition = pick.choice(
            [
                "amount > 100.0",
                "country in ['DE', 'FR']",
                "bought_on < today - duration('720h')",
                "has(country) && amount < 50.0",
                f"amount > {n}.5",  # compiled while the other threads evaluate
            ]
        )
        values = {
            "amount": pick.choice([10.0, 99.5, 150.0, 1e6]),
            "country": pick.choice(["DE", "US", "FR"]),
            "bought_on": pick.choice(["2026-01-01", "2026-12-01"]),
        }
        cases.append((condition, values, date(2026, 12, pick.choice([1, 7, 31]))))
    decided: list[list[bool]] = []

    def decide() -> None:
        decided.append([holds(c, types, v, t) for c, v, t in cases])

    threads = [threading.Thread(target=decide) for _ in range(8)]
    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns between any two bytecodes, nearly
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switching)
    alone = [holds(condition, types, values, today) for condition, values, today in cases]
    assert decided == [alone] * 8
