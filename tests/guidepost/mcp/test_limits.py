"""Every bound of the input schemas, through the tool dispatcher on a real database
(both SQLite and PostgreSQL passes): sizes, echoed names cut short, control characters
refused in every string, unknown values neither echoed nor stored, a run's step limit,
request_id retries, and identical drafts stored once. ADR 0034, 0035."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from django.db import connection

from access_app.callers import Caller, Transport
from flowcore.common.errors import Refusal, error_object
from flowcore.common.limits import MAX_RUN_STEPS
from flows_app.models import Draft
from guidepost.mcp.dispatch import dispatch
from runs_app import agent_steps
from runs_app.models import Run, Step

pytestmark = pytest.mark.django_db

TRANSPORT = Transport(peer="127.0.0.1", client_name="limits-tests")
ERROR_KEYS = {"error", "reason", "next", "retryable", "candidates", "attempt", "repeated"}


def call(tool: str, arguments: object, transport: Transport = TRANSPORT) -> dict[str, Any]:
    outcome = dispatch(tool, arguments, transport)
    return {"is_error": outcome.is_error, **outcome.payload}


def error_of(tool: str, arguments: object) -> dict[str, Any]:
    result = call(tool, arguments)
    assert result.pop("is_error"), result
    assert set(result) <= ERROR_KEYS and {"error", "reason", "next", "retryable"} <= set(result)
    return result


def start(**arguments: Any) -> dict[str, Any]:
    result = call("guide_start", {"flow_id": "identity_check", **arguments})
    assert not result.pop("is_error"), result
    return result


def compact(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


# --- sizes and echoes ---------------------------------------------------------------------------


def test_a_values_key_over_64_characters_is_refused_naming_it_cut_short() -> None:
    key = "k" * 4900
    error = error_of("guide_start", {"flow_id": "identity_check", "values": {key: "x"}})

    assert (error["error"], error["retryable"]) == ("invalid arguments", True)
    assert "4900 characters" in error["reason"] and "keys are at most 64" in error["reason"]
    assert len(compact(error)) < 700
    assert Run.objects.count() == 0


def test_an_unknown_tool_name_of_1_MB_comes_back_cut_short() -> None:
    error = error_of("x" * 1_000_000, {})

    assert error["error"] == "unknown tool"
    assert "'" + "x" * 64 + "…'" in error["reason"]
    assert len(compact(error)) < 700


def test_an_unknown_argument_name_is_echoed_cut_short() -> None:
    error = error_of("guide_flows", {"c" * 10_000: "x"})

    assert error["error"] == "invalid arguments"
    assert len(error["reason"]) < 120 and "…" in error["reason"]


def test_a_long_rejected_value_is_quoted_cut_short_in_the_reason() -> None:
    run = start()
    long_label = "E" * 64
    # A collect refuses a choice: the error names the node, never the whole value.
    error = error_of("guide_answer", {"run_id": run["run_id"], "choice": long_label})
    assert len(compact(error)) < 700


def test_an_unknown_key_is_ignored_by_name_its_value_neither_echoed_nor_stored() -> None:
    big = "秘" * 900  # under the slot limit: the guard lets it in, the flow does not know it
    result = start(values={"not_a_key_of_the_flow": big})

    assert result["ignored"] == [
        {"key": "not_a_key_of_the_flow", "reason": "not a key of this flow"}
    ]
    assert big not in compact(result)
    step = Step.objects.get(run__public_id=result["run_id"])
    assert step.input["values"] == {"not_a_key_of_the_flow": None}
    assert big not in json.dumps(step.input, ensure_ascii=False)


def test_a_retry_with_at_still_matches_a_call_whose_unknown_values_were_not_stored() -> None:
    run = start()
    node = run["node"]["id"]
    arguments = {
        "run_id": run["run_id"],
        "at": node,
        "values": {
            "member_id": "M00012345",
            "birth_date": "1990-01-01",
            "postal_code": "150-0041",
            "stray": "z" * 900,
        },
    }
    first = call("guide_answer", arguments)
    assert not first.pop("is_error"), first
    again = call("guide_answer", arguments)

    assert not again.pop("is_error"), again
    assert again == {**first, "repeated": True}
    assert Step.objects.filter(run__public_id=run["run_id"]).count() == 2


# --- control characters -------------------------------------------------------------------------

# (tool, arguments with "\x00" somewhere); {run} is replaced by a real run id.
NUL_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "run_id": ("guide_status", {"run_id": "r_\x00abc"}),
    "flow_id": ("guide_start", {"flow_id": "identity\x00check"}),
    "category": ("guide_flows", {"category": "pay\x00ments"}),
    "ref": ("guide_start", {"flow_id": "identity_check", "ref": "T\x00-1"}),
    "request_id": ("guide_start", {"flow_id": "identity_check", "request_id": "q\x00"}),
    "choice": ("guide_answer", {"run_id": "{run}", "choice": "a\x00"}),
    "at": ("guide_answer", {"run_id": "{run}", "choice": "x", "at": "n\x00"}),
    "values-key": ("guide_answer", {"run_id": "{run}", "values": {"member\x00id": "M1"}}),
    "values-slot": ("guide_answer", {"run_id": "{run}", "values": {"member_id": "M\x001"}}),
    "values-slot-DEL": ("guide_answer", {"run_id": "{run}", "values": {"member_id": "M\x7f"}}),
    "values-slot-C1": ("guide_answer", {"run_id": "{run}", "values": {"member_id": "M\x85"}}),
    "reason-C1": ("guide_close", {"run_id": "{run}", "reason": "left\x9f"}),
    "to": ("guide_back", {"run_id": "{run}", "to": "n\x00"}),
    "reason": ("guide_close", {"run_id": "{run}", "reason": "left\x00"}),
    "yaml": ("guide_draft", {"yaml": "id: x\x00\ntitle: X\n"}),
    "lone-surrogate": ("guide_start", {"flow_id": "identity_check", "ref": "T\ud800"}),
}


@pytest.mark.parametrize(("tool", "arguments"), NUL_CALLS.values(), ids=NUL_CALLS.keys())
def test_a_control_character_in_any_string_is_refused_in_the_error_shape(
    tool: str, arguments: dict[str, Any]
) -> None:
    run_id = start()["run_id"]
    filled = json.loads(json.dumps(arguments).replace("{run}", run_id))
    steps, drafts = Step.objects.count(), Draft.objects.count()

    error = error_of(tool, filled)

    assert (error["error"], error["retryable"], error["attempt"]) == (
        "control character",
        True,
        1,
    ), error
    assert "U+00" in error["reason"] or "U+D800" in error["reason"]
    assert "\x00" not in compact(error)
    assert (Step.objects.count(), Draft.objects.count()) == (steps, drafts)


def test_slot_values_and_a_close_reason_may_hold_tabs_and_line_breaks() -> None:
    run = start()
    answered = call(
        "guide_answer", {"run_id": run["run_id"], "values": {"kana_name": "ヤマダ\tタロウ\nX"}}
    )
    assert not answered["is_error"], answered
    closed = call("guide_close", {"run_id": run["run_id"], "reason": "left\r\nthe chat"})
    assert not closed["is_error"], closed


def test_a_label_may_not_hold_a_line_break() -> None:
    run = call("guide_start", {"flow_id": "payment_failed"})
    error = error_of("guide_answer", {"run_id": run["run_id"], "choice": "E01\n"})
    assert error["error"] == "control character"


def test_a_client_name_with_control_characters_still_makes_a_caller_that_can_be_stored() -> None:
    transport = Transport(peer="127.0.0.1", client_name="bad\x00name\ud800")
    result = call("guide_start", {"flow_id": "identity_check"}, transport)

    assert not result["is_error"], result
    assert Run.objects.get(public_id=result["run_id"]).owner == "anon:127.0.0.1:bad?name?"


def test_a_failure_is_still_counted_and_shaped_when_the_streak_table_cannot_be_written() -> None:
    """The failure path writes the streak; with its table gone (a real database error, in
    this test's transaction) the count moves to the process and still gives up at 3."""
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE runs_app_failurestreak")
    errors = [error_of("guide_flows", {"category": "nope"}) for _ in range(3)]

    assert [e["attempt"] for e in errors] == [1, 2, 3]
    assert [e["retryable"] for e in errors] == [True, True, False]
    assert errors[1]["repeated"] is True


# --- a run's length -----------------------------------------------------------------------------

AGENT = Caller(key="anon:test:steps")


def test_a_run_over_500_steps_is_refused_but_can_still_be_closed() -> None:
    """A loop of answer and back grows a run by two steps a turn: at 500 steps both are
    refused (not retryable), and guide_close still ends the run."""
    run_id = agent_steps.run_start(caller=AGENT, flow_id="payment_failed", values=None, ref=None)[
        "run_id"
    ]
    revision = 1
    while revision < MAX_RUN_STEPS:
        agent_steps.run_answer(caller=AGENT, run_id=run_id, choice="E01", values=None, at=None)
        revision += 1
        if revision < MAX_RUN_STEPS:
            agent_steps.run_back(caller=AGENT, run_id=run_id, to="n_error_code")
            revision += 1
    assert Run.objects.get(public_id=run_id).revision == MAX_RUN_STEPS

    with pytest.raises(Refusal) as answered:
        agent_steps.run_answer(caller=AGENT, run_id=run_id, choice="new", values=None, at=None)
    with pytest.raises(Refusal) as backed:
        agent_steps.run_back(caller=AGENT, run_id=run_id, to=None)
    for refused in (answered.value, backed.value):
        shaped = error_object(refused)
        assert (shaped["error"], shaped["retryable"]) == ("run has too many steps", False)
        assert shaped["reason"] == "the run holds 500 steps; a run may hold at most 500"
        assert shaped["next"] == (
            "Close the run with guide_close and hand the conversation to a human, or start "
            "a new run with guide_start."
        )

    closed = agent_steps.run_close(caller=AGENT, run_id=run_id, reason="too long")
    assert closed["state"] == "closed"
    assert Step.objects.filter(run__public_id=run_id).count() == MAX_RUN_STEPS + 1


# --- request_id ---------------------------------------------------------------------------------


def test_a_guide_start_retried_with_its_request_id_returns_the_first_run() -> None:
    arguments = {"flow_id": "payment_failed", "ref": "T-1", "request_id": "req-1"}
    first = call("guide_start", arguments)
    again = call("guide_start", arguments)

    assert not first["is_error"] and not again["is_error"]
    assert again == {**first, "repeated": True}
    assert Run.objects.count() == 1


def test_the_same_request_id_from_another_caller_starts_its_own_run() -> None:
    arguments = {"flow_id": "payment_failed", "request_id": "req-1"}
    mine = call("guide_start", arguments)
    theirs = call("guide_start", arguments, Transport(peer="127.0.0.2", client_name="other"))

    assert mine["run_id"] != theirs["run_id"] and "repeated" not in theirs


def test_a_request_id_reused_with_other_arguments_is_refused() -> None:
    call("guide_start", {"flow_id": "payment_failed", "request_id": "req-1"})
    error = error_of(
        "guide_start", {"flow_id": "payment_failed", "request_id": "req-1", "ref": "other"}
    )

    assert (error["error"], error["retryable"]) == ("request_id already used", True)
    assert Run.objects.count() == 1


def test_a_request_id_still_returns_its_run_after_the_run_moved_on() -> None:
    first = call("guide_start", {"flow_id": "payment_failed", "request_id": "req-1"})
    call("guide_answer", {"run_id": first["run_id"], "choice": "E01"})
    again = call("guide_start", {"flow_id": "payment_failed", "request_id": "req-1"})

    assert again == {**first, "repeated": True}


@pytest.mark.django_db(transaction=True)
def test_two_starts_racing_with_one_request_id_make_one_run() -> None:
    """Eight threads start at once with the same request_id: the unique constraint lets one
    run be created, and every other call gets that run back."""
    barrier = threading.Barrier(8)
    results: list[dict[str, Any]] = []
    lock = threading.Lock()

    def racer() -> None:
        barrier.wait()
        try:
            outcome = dispatch(
                "guide_start", {"flow_id": "payment_failed", "request_id": "race"}, TRANSPORT
            )
            with lock:
                results.append({"is_error": outcome.is_error, **outcome.payload})
        finally:
            connection.close()

    threads = [threading.Thread(target=racer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [r for r in results if r["is_error"]] == []
    assert len({r["run_id"] for r in results}) == 1
    assert sum(1 for r in results if not r.get("repeated")) == 1
    assert Run.objects.count() == 1


# --- drafts -------------------------------------------------------------------------------------


def test_an_identical_pending_draft_is_stored_once() -> None:
    text = "id: twice\ntitle: Twice\n"
    first = call("guide_draft", {"yaml": text})
    again = call("guide_draft", {"yaml": text})
    other = call("guide_draft", {"yaml": text + "summary: changed\n"})

    assert again["draft_id"] == first["draft_id"] != other["draft_id"]
    assert again["findings"] == first["findings"]
    assert "already waiting for review" in again["next"]
    assert Draft.objects.count() == 2


def test_a_draft_identical_to_a_discarded_one_is_stored_again() -> None:
    text = "id: again\ntitle: Again\n"
    first = call("guide_draft", {"yaml": text})
    Draft.objects.filter(public_id=first["draft_id"]).update(status=Draft.Status.DISCARDED)
    again = call("guide_draft", {"yaml": text})

    assert again["draft_id"] != first["draft_id"]


# --- pages and the API --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/api/runs?q=a%00b", "/api/runs/r_%00x", "/?q=%00", "/r/r_%01x", "/api/runs?%00=1"]
)
def test_a_control_character_in_a_path_or_parameter_is_a_400_error_object(
    ops_client: Any, path: str
) -> None:
    response = ops_client.get(path)

    assert response.status_code == 400
    body = response.json()
    assert (body["error"], body["retryable"]) == ("control character", True)
