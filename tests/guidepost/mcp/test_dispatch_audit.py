"""The dispatcher's audit record against a real database (ADR 0033): an accepted step and
its record commit together or not at all; the record costs one statement and no
savepoint; a refused call is recorded with its failure count."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest
from django.db import DatabaseError, connection

from access_app.callers import Caller, Transport
from access_app.guards import arguments
from access_app.models import AuditRecord
from flowcore.flow.building import content_hash
from guidepost.mcp.dispatch import dispatch
from guidepost.mcp.tools import Tool, registry
from runs_app.models import Run
from tests.support.drafting import REFUND_TEXT

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = Transport(peer="127.0.0.1", client_name="pytest", client_version="9", key_name="tester")
ORDER = {"order_number": "A00118"}
AUDIT_INSERT = 'INSERT INTO "runs_app_auditrecord"'


def started() -> str:
    payload = dispatch("guide_start", {"flow_id": "refund_request", "values": ORDER}, AGENT)
    assert not payload.is_error, payload
    return str(payload.payload["run_id"])


@contextmanager
def failing(statement: str) -> Iterator[None]:
    """The database refuses every statement starting with ``statement`` (a fault injected
    at the database boundary, as a full disk or a lost connection would)."""

    def refuse(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        if sql.startswith(statement):
            raise DatabaseError("injected: the database refused the statement")
        return execute(sql, *args)

    with connection.execute_wrapper(refuse):
        yield


def test_an_accepted_step_is_not_kept_when_its_audit_record_cannot_be_written() -> None:
    run_id = started()
    steps = Run.objects.get(public_id=run_id).steps.count()

    with failing(AUDIT_INSERT):
        outcome = dispatch("guide_answer", {"run_id": run_id, "choice": "damaged"}, AGENT)

    assert outcome.is_error and outcome.payload["error"] == "internal error"
    run = Run.objects.get(public_id=run_id)
    assert (run.node, run.revision, run.steps.count()) == ("n_reason", 1, steps)


def test_an_accepted_step_and_its_record_are_written_together() -> None:
    run_id = started()

    outcome = dispatch("guide_answer", {"run_id": run_id, "choice": "damaged"}, AGENT)

    assert not outcome.is_error
    record = AuditRecord.objects.filter(tool="guide_answer").get()
    assert (record.key_name, record.caller, record.client, record.run_id, record.outcome) == (
        "tester",
        "key:tester",
        "pytest/9",
        run_id,
        "ok",
    )
    assert Run.objects.get(public_id=run_id).steps.count() == 2


def shape(sql: str) -> str:
    """A statement without its values (ids, times and hashes differ between two runs)."""
    return re.sub(r"'(?:[^']|'')*'|%s|\b\d+(?:\.\d+)?\b", "?", sql)


def test_a_refused_call_is_recorded_with_its_error() -> None:
    outcome = dispatch("guide_status", {"run_id": "r_nothing"}, AGENT)

    assert outcome.is_error and outcome.payload["attempt"] == 1
    record = AuditRecord.objects.get()
    assert (record.tool, record.run_id, record.outcome, record.status) == (
        "guide_status",
        "r_nothing",
        "run not found",
        200,
    )


def test_a_read_only_call_is_recorded_too() -> None:
    dispatch("guide_flows", {}, AGENT)

    assert list(AuditRecord.objects.values_list("tool", "outcome")) == [("guide_flows", "ok")]


def test_a_tools_preparation_runs_before_its_transaction_and_the_handler_inside_it() -> None:
    """A tool's costly part that needs no database (guide_draft's judging) runs outside
    the call's transaction: on SQLite one held through it would hold the database's one
    writer, and every other caller's write with it (issue 18's five hostile drafts)."""
    seen: dict[str, bool] = {}

    def prepare(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
        seen["prepare in a transaction"] = connection.in_atomic_block
        return {**args, "prepared": "yes"}

    def handler(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
        seen["handler in a transaction"] = connection.in_atomic_block
        return {"prepared": args["prepared"]}

    probe = Tool(
        "probe_prepared", "Probe", "A tool with a preparation.", arguments([]), {}, handler
    )
    outcome = dispatch(probe.name, {}, AGENT, replace(probe, prepare=prepare))

    assert outcome.payload == {"prepared": "yes"}
    assert seen == {"prepare in a transaction": False, "handler in a transaction": True}


def test_guide_draft_is_judged_in_its_tools_preparation() -> None:
    tool = registry.get("guide_draft")
    assert tool is not None and tool.prepare is not None

    prepared = tool.prepare(Caller(key="key:tester"), {"yaml": REFUND_TEXT})

    assert (prepared["judged"].flow_id, prepared["judged"].content_hash) == (
        "refund_request",
        content_hash(REFUND_TEXT),
    )
