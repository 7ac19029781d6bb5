"""A person and a stalled run, through runs_app.claims, runs_app.resolve and the JSON API,
on a real database: claims, releases, answers and closes, what each refuses, the step that
names the person and carries the note, ``verify`` clean over it, and what the agent
sees next with guide_status.

Personas: a support lead and an ops person (staff in the groups the migrations create),
a staff member in Ops's view-only shape (may read runs, may not resolve them), and an
agent key's caller.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from access_app import guards
from access_app.callers import Caller
from access_app.models import AuditRecord
from flowcore.common.errors import InvalidInput, NotPermitted, StepNotAllowed
from runs_app import agent_steps, claims, resolve, selectors
from runs_app.models import Claim, Run
from runs_app.verification import verify

pytestmark = pytest.mark.django_db

AGENT = Caller(key="key:desk", name="desk", key_name="desk")
NOTE = "Checked the order in the back office: it is A00118."


def person(name: str, group: str | None = "Support lead", *, view_only: bool = False) -> User:
    user = User.objects.create_user(name, password="pw-" + name, is_staff=True)
    if group:
        user.groups.add(Group.objects.get(name=group))
    if view_only:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="runs_app", codename="view_run")
        )
    return user


def caller_of(user: User) -> Caller:
    return guards.authenticate_person(user)


@pytest.fixture
def lead() -> Caller:
    return caller_of(person("maria"))


@pytest.fixture
def stalled() -> str:
    """A refund run stalled at its first node: the order number is not known."""
    started = agent_steps.run_start(caller=AGENT, flow_id="refund_request", values=None, ref="T-9")
    run_id = str(started["run_id"])
    result = agent_steps.run_answer(
        caller=AGENT, run_id=run_id, choice=None, values={"order_number": "__unknown__"}, at=None
    )
    assert result["status"] == "stalled"
    return run_id


def test_the_ops_and_support_lead_groups_may_resolve_runs() -> None:
    for group in ("Ops", "Support lead"):
        codenames = set(
            Group.objects.get(name=group).permissions.values_list("codename", flat=True)
        )
        assert {"resolve_run", "view_run"} <= codenames, group


def test_a_person_resolves_a_stalled_run_and_the_agent_goes_on(lead: Caller, stalled: str) -> None:
    result = resolve.run_resolve(
        caller=lead, run_id=stalled, choice=None, values={"order_number": "A00118"}, note=NOTE
    )

    assert result["status"] == "advanced"
    assert result["node"]["id"] == "n_reason"
    assert result["next"].startswith("A person answered n_order. ")
    status = selectors.run_status(caller=AGENT, run_id=stalled)
    assert status["state"] == "active"
    assert status["path"][0] == {"id": "n_order", "kind": "collect", "via": "person"}
    assert status["next"].startswith("A person answered n_order")
    assert "handoff" not in status
    step = Run.objects.get(public_id=stalled).steps.order_by("-seq").first()
    assert step is not None
    assert (step.tool, step.caller) == ("resolve", "staff:maria")
    assert step.input == {"values": {"order_number": "A00118"}, "note": NOTE}
    # The agent answers the next node as usual, and can complete the run.
    after = agent_steps.run_answer(
        caller=AGENT, run_id=stalled, choice="changed_mind", values=None, at="n_reason"
    )
    assert after["status"] == "advanced"
    assert verify([stalled]).problems == []


def test_verify_proves_the_person_step_and_notices_it_edited(lead: Caller, stalled: str) -> None:
    resolve.run_resolve(
        caller=lead, run_id=stalled, choice=None, values={"order_number": "A00118"}, note=NOTE
    )
    assert verify([stalled]).problems == []
    run = Run.objects.get(public_id=stalled)
    step = run.steps.get(tool="resolve")

    step.caller = "key:desk"  # as if the agent had answered for itself
    step.save()

    problems = verify([stalled]).problems
    assert f"{stalled}: the hash chain breaks at step {step.seq}" in problems
    assert any("answers for a person without naming one" in line for line in problems)


def test_a_run_can_stall_again_and_be_answered_again(lead: Caller, stalled: str) -> None:
    resolve.run_resolve(
        caller=lead, run_id=stalled, choice=None, values={"order_number": "A00118"}, note=NOTE
    )
    again = agent_steps.run_answer(
        caller=AGENT, run_id=stalled, choice="__unknown__", values=None, at="n_reason"
    )
    assert again["status"] == "stalled"

    result = resolve.run_resolve(
        caller=lead, run_id=stalled, choice="changed_mind", values=None, note="Policy 4.2."
    )

    assert result["node"]["id"] == "n_within_window"
    path = selectors.run_status(caller=AGENT, run_id=stalled)["path"]
    assert [(e["id"], e["via"]) for e in path] == [("n_order", "person"), ("n_reason", "person")]
    assert verify([stalled]).problems == []


@pytest.mark.parametrize(
    ("answer", "error", "kind"),
    [
        (
            {"choice": None, "values": {"order_number": "118"}, "note": NOTE},
            "value does not fit",
            InvalidInput,
        ),
        (
            {"choice": "__unknown__", "values": None, "note": NOTE},
            "a person must answer",
            InvalidInput,
        ),
        (
            {"choice": None, "values": {"order_number": "A00118"}, "note": "  "},
            "note required",
            InvalidInput,
        ),
        (
            {"choice": None, "values": {"order_number": "A00118"}, "note": None},
            "note required",
            InvalidInput,
        ),
    ],
)
def test_a_refused_answer_leaves_no_trace(
    lead: Caller, stalled: str, answer: dict[str, Any], error: str, kind: type[Exception]
) -> None:
    before = Run.objects.get(public_id=stalled)

    with pytest.raises(kind) as refused:
        resolve.run_resolve(caller=lead, run_id=stalled, **answer)

    assert refused.value.error == error  # type: ignore[attr-defined]
    after = Run.objects.get(public_id=stalled)
    assert (after.revision, after.state, after.engine_state) == (
        before.revision,
        before.state,
        before.engine_state,
    )


def test_a_bad_label_is_refused_with_the_labels_as_candidates(lead: Caller) -> None:
    started = agent_steps.run_start(
        caller=AGENT, flow_id="refund_request", values={"order_number": "A00118"}, ref=None
    )
    run_id = str(started["run_id"])
    agent_steps.run_answer(caller=AGENT, run_id=run_id, choice="__unknown__", values=None, at=None)

    with pytest.raises(InvalidInput) as refused:
        resolve.run_resolve(caller=lead, run_id=run_id, choice="damagd", values=None, note=NOTE)

    assert refused.value.error == "not a label"
    assert list(refused.value.candidates or ()) == ["damaged"]


def test_only_a_stalled_run_takes_a_person_answer(lead: Caller) -> None:
    started = agent_steps.run_start(caller=AGENT, flow_id="refund_request", values=None, ref=None)

    with pytest.raises(StepNotAllowed) as refused:
        resolve.run_resolve(
            caller=lead,
            run_id=str(started["run_id"]),
            choice=None,
            values={"order_number": "A00118"},
            note=NOTE,
        )

    assert refused.value.error == "run is not stalled"


def test_without_the_permission_nobody_resolves_claims_or_closes(stalled: str) -> None:
    viewer = caller_of(person("vic", None, view_only=True))

    for act in (
        lambda: resolve.run_resolve(
            caller=viewer, run_id=stalled, choice=None, values={"order_number": "A00118"}, note=NOTE
        ),
        lambda: claims.run_claim(caller=viewer, run_id=stalled),
        lambda: claims.run_release(caller=viewer, run_id=stalled),
        lambda: resolve.run_close_stalled(caller=viewer, run_id=stalled, reason="no"),
        lambda: resolve.run_resolve(
            caller=AGENT, run_id=stalled, choice=None, values={"order_number": "A00118"}, note=NOTE
        ),
    ):
        with pytest.raises(NotPermitted):
            act()
    assert Run.objects.get(public_id=stalled).state == "stalled"


def test_a_claim_is_shown_held_by_one_person_and_released(lead: Caller, stalled: str) -> None:
    ops = caller_of(person("omar", "Ops"))

    claim = claims.run_claim(caller=lead, run_id=stalled)
    assert (claim.by, claims.run_claim(caller=lead, run_id=stalled).pk) == ("maria", claim.pk)
    with pytest.raises(StepNotAllowed) as taken:
        claims.run_claim(caller=ops, run_id=stalled)
    assert taken.value.error == "run claimed by another person"
    with pytest.raises(StepNotAllowed):
        resolve.run_resolve(
            caller=ops, run_id=stalled, choice=None, values={"order_number": "A00118"}, note=NOTE
        )

    assert claims.run_release(caller=ops, run_id=stalled) == "maria"
    assert claims.run_release(caller=ops, run_id=stalled) is None
    assert not Claim.objects.exists()
    outcomes = list(
        AuditRecord.objects.filter(run_id=stalled, tool__in=["claim run", "release run"])
        .order_by("id")
        .values_list("caller", "tool", "outcome")
    )
    assert outcomes == [
        ("staff:maria", "claim run", "claimed"),
        ("staff:omar", "release run", "released (held by maria)"),
    ]


def test_answering_or_closing_ends_the_claim(lead: Caller, stalled: str) -> None:
    claims.run_claim(caller=lead, run_id=stalled)

    resolve.run_resolve(
        caller=lead, run_id=stalled, choice=None, values={"order_number": "A00118"}, note=NOTE
    )

    assert not Claim.objects.exists()
    with pytest.raises(StepNotAllowed):  # an active run is not claimed
        claims.run_claim(caller=lead, run_id=stalled)


def test_a_person_closes_a_stalled_run_with_a_reason(lead: Caller, stalled: str) -> None:
    claims.run_claim(caller=lead, run_id=stalled)

    result = resolve.run_close_stalled(caller=lead, run_id=stalled, reason="Customer left.")

    assert result["state"] == "closed"
    run = Run.objects.get(public_id=stalled)
    assert (run.state, run.close_reason) == ("closed", "Customer left.")
    assert run.steps.order_by("-seq").values_list("caller", flat=True)[0] == "staff:maria"
    assert not Claim.objects.exists()
    assert verify([stalled]).problems == []
    with pytest.raises(StepNotAllowed):
        resolve.run_close_stalled(caller=lead, run_id=stalled, reason="again")
    with pytest.raises(InvalidInput):
        resolve.run_close_stalled(caller=lead, run_id="r_x", reason="")


# --- the JSON API ---------------------------------------------------------------------------


def api_client(user: User, *, csrf: bool = True) -> tuple[Client, dict[str, str]]:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    headers: dict[str, str] = {}
    if csrf:
        client.get("/")  # a page with a form sets the CSRF cookie, as the admin's do
        headers["X-CSRFToken"] = client.cookies["csrftoken"].value
    return client, headers


def post_resolve(client: Client, headers: dict[str, str], run_id: str, body: object) -> Any:
    return client.post(
        f"/api/runs/{run_id}/resolve",
        data=json.dumps(body),
        content_type="application/json",
        headers=headers,
    )


def test_the_api_resolves_a_stalled_run_for_a_staff_session(stalled: str) -> None:
    client, headers = api_client(person("maria"))

    answered = post_resolve(
        client, headers, stalled, {"values": {"order_number": "A00118"}, "note": NOTE}
    )

    assert answered.status_code == 200, answered.content
    body = answered.json()
    assert (body["run_id"], body["status"], body["node"]["id"]) == (stalled, "advanced", "n_reason")
    assert "rejected" not in body  # keys that do not apply are left out
    steps = client.get(f"/api/runs/{stalled}").json()["steps"]
    assert steps[-1]["tool"] == "resolve"
    assert steps[-1]["input"]["note"] == NOTE


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"values": {"order_number": "A00118"}}, 422, "invalid arguments"),  # no note
        ({"values": {"order_number": "A00118"}, "note": " "}, 422, "note required"),
        ({"choice": "damaged", "note": NOTE}, 422, "choice at a collect node"),
        ({"values": {"order_number": "x"}, "note": NOTE}, 422, "value does not fit"),
    ],
)
def test_the_api_refuses_in_the_error_shape(
    stalled: str, body: dict[str, Any], status: int, error: str
) -> None:
    client, headers = api_client(person("maria"))

    refused = post_resolve(client, headers, stalled, body)

    assert refused.status_code == status
    assert refused.json()["error"] == error
    assert {"error", "reason", "next", "retryable"} <= set(refused.json())


def test_the_api_refuses_without_csrf_permission_or_a_stall(stalled: str) -> None:
    answer = {"values": {"order_number": "A00118"}, "note": NOTE}
    no_csrf, _ = api_client(person("maria"), csrf=False)
    assert post_resolve(no_csrf, {}, stalled, answer).status_code == 403
    viewer, headers = api_client(person("vic", None, view_only=True))
    denied = post_resolve(viewer, headers, stalled, answer)
    assert (denied.status_code, denied.json()["error"]) == (403, "permission denied")
    lead, headers = api_client(person("maria2"))
    assert post_resolve(lead, headers, stalled, answer).status_code == 200
    again = post_resolve(lead, headers, stalled, answer)
    assert (again.status_code, again.json()["error"]) == (409, "run is not stalled")
    missing = post_resolve(lead, headers, "r_nope", answer)
    assert (missing.status_code, missing.json()["error"]) == (404, "run not found")


def test_the_openapi_schema_types_the_resolve_call() -> None:
    client, _ = api_client(person("maria"), csrf=False)

    schema = client.get("/api/openapi.json").json()

    operation = schema["paths"]["/api/runs/{run_id}/resolve"]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    resolve_in = schema["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]
    assert resolve_in["required"] == ["note"]
    assert set(resolve_in["properties"]) == {"choice", "values", "note"}
    assert {"200", "403", "404", "409", "422"} <= set(operation["responses"])
    error = operation["responses"]["409"]["content"]["application/json"]["schema"]["$ref"]
    assert error.endswith("/ErrorOut")
