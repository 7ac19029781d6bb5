"""A stalled run's ``stalled_at`` is the time of the step that stalled it: kept through
adopt steps, begun again by a person's answer that stalls it again, gone once it moves on;
filled from the steps by its migration, and bound to them by ``verify``."""

from __future__ import annotations

import pytest

from access_app.callers import Caller
from runs_app import adoption, agent_steps
from runs_app.models import Run
from runs_app.verification import verify
from tests.runs_app.test_packing import migrate

CALLER = Caller(key="test:stalls", name="pytest")
BEFORE = ("runs_app", "0021_digests_stored_as_bytes")


def stalled() -> Run:
    started = agent_steps.run_start(
        caller=CALLER, flow_id="refund_request", values={"order_number": "__unknown__"}, ref=None
    )
    return Run.objects.get(public_id=started["run_id"])


def stall_time(run: Run) -> object:
    return run.steps.get(status="stalled").created_at


@pytest.mark.django_db
def test_an_adoption_keeps_the_stall_and_verify_binds_it() -> None:
    run = stalled()
    adoption.run_adopt(run_id=run.public_id, owner="key:other", by="staff:maria")
    run.refresh_from_db()
    assert run.stalled_at == stall_time(run) < run.updated_at
    assert verify([run.public_id]).problems == []
    Run.objects.filter(pk=run.pk).update(stalled_at=run.updated_at)
    [problem] = verify([run.public_id]).problems
    assert "stalled_at is" in problem


@pytest.mark.django_db
def test_a_run_that_is_not_stalled_has_no_stall_time() -> None:
    started = agent_steps.run_start(caller=CALLER, flow_id="refund_request", values=None, ref=None)
    assert Run.objects.get(public_id=started["run_id"]).stalled_at is None
    run = stalled()
    agent_steps.run_close(caller=CALLER, run_id=run.public_id, reason="a person took over")
    run.refresh_from_db()
    assert (run.state, run.stalled_at) == ("closed", None)


@pytest.mark.django_db(transaction=True)
def test_the_migration_fills_each_stalled_run_from_its_steps() -> None:
    adopted, plain = stalled(), stalled()
    adoption.run_adopt(run_id=adopted.public_id, owner="key:other", by="staff:maria")
    active = agent_steps.run_start(caller=CALLER, flow_id="refund_request", values=None, ref=None)

    migrate([BEFORE])
    migrate()

    runs = {r.public_id: r for r in Run.objects.all()}
    for run in (adopted, plain):
        assert runs[run.public_id].stalled_at == stall_time(run)
    assert runs[active["run_id"]].stalled_at is None
    assert verify(list(runs)).problems == []
