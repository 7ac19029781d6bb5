"""Events are recorded with the change they report (spec §8, ADR 0077): in the step's or
the decision's transaction, as ONE INSERT and only when some subscription wants the kind;
never one for a change rolled back, never none for a change committed."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from access_app.callers import Caller
from events_app import services as events
from events_app.models import Event
from flows_app import services as flows
from flows_app.models import Draft
from runs_app import agent_steps, resolve
from tests.runs_app.test_step_queries import STEP_WRITES, captured
from tests.support.paths import BUNDLED_FLOWS

pytestmark = pytest.mark.django_db(transaction=True)

CALLER = Caller(key="test:events", name="pytest")
ORDER = {"order_number": "A00118"}
RECEIVER = "http://127.0.0.1:9/hook"  # never called here
# A step through the service, alone: its own transaction (tests/runs_app/test_step_queries.py).
STEP = ["BEGIN", "SELECT runs_app_run", *STEP_WRITES, "COMMIT"]


@pytest.fixture(autouse=True)
def subscriptions_cached_for_the_test(settings: Any) -> None:
    """What the process knows of subscriptions changes only when a subscription does (the
    statement counts below must not see a reload because a second went by)."""
    settings.GUIDEPOST_EVENTS_CACHE = 3600.0
    settings.GUIDEPOST_WEBHOOK_ALLOW_PRIVATE = True
    events.forget_subscriptions()


def subscribe(*kinds: str, **options: Any) -> None:
    events.subscription_add(url=RECEIVER, events=kinds, **options)


def start(values: dict[str, Any] | None = None) -> str:
    result = agent_steps.run_start(
        caller=CALLER, flow_id="refund_request", values=values, ref="T-9"
    )
    return str(result["run_id"])


def answer(run_id: str, choice: str) -> dict[str, Any]:
    return agent_steps.run_answer(caller=CALLER, run_id=run_id, choice=choice, values=None, at=None)


def recorded() -> list[tuple[str, dict[str, Any], Any]]:
    return [(e.kind, e.data, e.values) for e in Event.objects.order_by("pk")]


def test_without_a_subscription_a_completing_step_is_only_its_own_statements_and_no_event() -> None:
    run_id = start(ORDER)
    answer(run_id, "wrong_item")
    statements = captured(lambda: answer(run_id, "credit"))
    assert statements == STEP
    assert recorded() == []


def test_with_a_subscription_the_step_that_completes_adds_one_insert_of_the_event() -> None:
    subscribe("run.completed")
    run_id = start(ORDER)
    events.kinds_wanted()  # read once, outside the steps measured
    advancing = captured(lambda: answer(run_id, "wrong_item"))
    completing = captured(lambda: answer(run_id, "credit"))
    assert advancing == STEP
    assert completing == [*STEP[:-1], "INSERT events_app_event", "COMMIT"]
    [(kind, data, values)] = recorded()
    assert kind == "run.completed"
    assert data == {
        "run_id": run_id,
        "flow": {"id": "refund_request", "version": data["flow"]["version"]},
        "state": "completed",
        "node": data["node"],
        "ref": "T-9",
        "url": f"/r/{run_id}",
        "outcome": "credited",
    }
    assert values["order_number"] == "A00118"  # kept apart from data


def test_a_stall_and_a_close_are_recorded_with_their_reason_and_handoff() -> None:
    subscribe("run.stalled", "run.closed")
    run_id = start({**ORDER, "n_reason": "__unknown__"})
    agent_steps.run_close(caller=CALLER, run_id=run_id, reason="a person took over")
    (stalled, data, _), (closed, closed_data, _) = recorded()
    assert (stalled, data["state"], data["node"]) == ("run.stalled", "stalled", "n_reason")
    assert data["reason"] and "handoff" in data
    assert (closed, closed_data["reason"]) == ("run.closed", "a person took over")


def test_a_kind_nobody_wants_is_not_recorded() -> None:
    subscribe("run.stalled")
    run_id = start(ORDER)
    answer(run_id, "wrong_item")
    answer(run_id, "credit")
    assert recorded() == []


def test_a_step_rolled_back_leaves_no_event_and_a_committed_one_leaves_exactly_one() -> None:
    subscribe("run.completed")
    run_id = start(ORDER)
    answer(run_id, "wrong_item")
    with pytest.raises(RuntimeError), transaction.atomic():
        answer(run_id, "credit")
        assert len(recorded()) == 1  # written with the step, inside its transaction
        raise RuntimeError("the transaction fails after the step")
    assert recorded() == []
    answer(run_id, "credit")
    assert [kind for kind, _, _ in recorded()] == ["run.completed"]


def test_a_person_resolving_a_stalled_run_is_recorded_as_resumed_in_the_same_step() -> None:
    """Resolving a stalled run reports run.resumed, then what the answer led to, each
    time a person resolves it; an agent's answer never does."""
    from django.contrib.auth.models import Permission, User

    from access_app import guards

    subscribe("run.resumed", "run.stalled", "run.completed")
    lead = User.objects.create_user("maria", is_staff=True)
    # Granted directly: a transactional test's flush empties the groups' table.
    lead.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="runs_app", codename__in=["resolve_run", "view_run"]
        )
    )
    person = guards.authenticate_person(lead)
    run_id = start({"order_number": "__unknown__"})
    resolved = resolve.run_resolve(
        caller=person, run_id=run_id, choice=None, values=ORDER, note="From the back office."
    )
    assert resolved["status"] == "advanced"
    answer(run_id, "wrong_item")
    answer(run_id, "credit")

    kinds = [(kind, data["run_id"], data["state"]) for kind, data, _ in recorded()]
    assert kinds == [
        ("run.stalled", run_id, "stalled"),
        ("run.resumed", run_id, "active"),
        ("run.completed", run_id, "completed"),
    ]


def test_draft_submitted_approved_and_discarded_are_recorded(settings: Any, tmp_path: Any) -> None:
    import shutil

    settings.GUIDEPOST_FLOWS_DIR = tmp_path / "flows"
    shutil.copytree(BUNDLED_FLOWS, settings.GUIDEPOST_FLOWS_DIR)
    subscribe("draft.submitted", "draft.approved", "draft.discarded")
    text = (BUNDLED_FLOWS / "refund_request.yaml").read_text()
    first = flows.draft_create(
        text=text.replace('version: "', 'version: "9.'),
        submitted_via=Draft.Via.CLI,
        submitted_by="me",
    ).draft
    flows.draft_discard(draft=first, discarded_by="lead", reason="not now")
    second = flows.draft_create(
        text=text.replace('version: "', 'version: "8.'),
        submitted_via=Draft.Via.CLI,
        submitted_by="me",
    ).draft
    flows.draft_approve(draft=second, approved_by="lead", confirm_broken_tests=True)
    kinds = [(kind, data["draft_id"], data["state"]) for kind, data, _ in recorded()]
    assert kinds == [
        ("draft.submitted", first.public_id, Draft.Status.PENDING),
        ("draft.discarded", first.public_id, Draft.Status.DISCARDED),
        ("draft.submitted", second.public_id, Draft.Status.PENDING),
        ("draft.approved", second.public_id, Draft.Status.APPROVED),
    ]
    assert all(
        data["url"].endswith(
            f"/admin/flows_app/draft/{Draft.objects.get(public_id=data['draft_id']).pk}/change/"
        )
        for _, data, _ in recorded()
    )
