"""Proof (issue 11, point 7): schemathesis against /api/openapi.json, in process through
Django's WSGI application, signed in as an Ops staff member (ADR 0028):

- no request gets a 5xx;
- every status code and body is one the schema documents (status code, content type and
  response schema conformance);
- a GET writes nothing: runs, steps, flow versions, drafts, keys and users are the same
  before and after each request (the audit record and the rate-limit bucket every request
  leaves are the API's documented bookkeeping, ADR 0033/0034, and are not counted).

The schema is read over HTTP with the staff session, as a client reads it; runs exist so
that generated requests also meet real ids (schemathesis draws from the schema's
examples and from the values it has seen).
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.wsgi import get_wsgi_application
from django.db import connection
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from access_app import services as key_services
from access_app.callers import Caller
from access_app.models import AgentKey
from flows_app.models import Draft, FlowVersion
from runs_app import agent_steps
from runs_app.models import Run, Step

pytestmark = pytest.mark.django_db(transaction=True)

CALLER = Caller(key="anon:127.0.0.1", name="proof")
# Requests generated per operation (half valid by the schema, half not).
EXAMPLES = 40
EXAMPLES_OTHERS = 5
FLOW_IDS = ("refund_request", "payment_failed")


def not_a_server_error(ctx: Any, response: Any, case: Any) -> bool | None:
    assert response.status_code < 500, (response.status_code, response.text[:300])
    return None


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


COUNTED = (Run, Step, FlowVersion, Draft, AgentKey, User)
# Every table's count in one statement: read before and after each of some 400 requests.
COUNTS = "SELECT " + ", ".join(
    f"(SELECT COUNT(*) FROM {model._meta.db_table})" for model in COUNTED
)


def rows() -> tuple[int, ...]:
    with connection.cursor() as cursor:
        cursor.execute(COUNTS)
        counts = tuple(cursor.fetchone())
    return counts + (hash(tuple(Run.objects.order_by("id").values_list("revision", "updated_at"))),)


def api_schema(ops_client: Any) -> Any:
    """/api/openapi.json as the signed-in staff member gets it, bound to Django's WSGI
    application (schemathesis then calls it in process)."""
    response = ops_client.get("/api/openapi.json")
    assert response.status_code == 200
    loaded = schemathesis.openapi.from_dict(response.json())
    loaded.app = get_wsgi_application()  # what from_wsgi does once it has the schema
    return loaded


def some_runs() -> list[str]:
    started = agent_steps.run_start(
        caller=CALLER, flow_id="refund_request", values={"order_number": "A00118"}, ref="T-1"
    )
    agent_steps.run_answer(
        caller=CALLER, run_id=started["run_id"], choice="damaged", values=None, at=None
    )
    other = agent_steps.run_start(caller=CALLER, flow_id="payment_failed", values=None, ref=None)
    return [started["run_id"], other["run_id"]]


def test_the_api_answers_every_generated_request_as_its_schema_documents(
    ops_client: Any,
) -> None:
    run_ids = some_runs()
    schema = api_schema(ops_client)
    session = {"cookies": {"sessionid": ops_client.cookies["sessionid"].value}}
    _, key = key_services.key_create(name="proof-agent")
    # Signed in as staff; with an agent key (its own runs only, no flows: 403); neither (401).
    ways_in: list[tuple[dict[str, Any], int]] = [
        (session, EXAMPLES),
        ({"headers": {"Authorization": f"Bearer {key}"}}, EXAMPLES_OTHERS),
        ({}, EXAMPLES_OTHERS),
    ]
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 6  # runs, one run, flows, one flow, versions, usage
    seen: set[tuple[str, int]] = set()

    for operation in operations:
        # Real ids too: the generated ones almost never name a run or a flow.
        for run_id in run_ids:
            for flow_id in FLOW_IDS:
                parameters = {"run_id": run_id, "flow_id": flow_id}
                names = {p.name for p in operation.path_parameters}
                case = operation.Case(path_parameters={n: parameters[n] for n in names})
                response = case.call_and_validate(**session, checks=CHECKS)
                seen.add((operation.path, response.status_code))
        for way_in, examples in ways_in:
            check_generated(operation, way_in, examples, seen)

    print(sorted(seen))
    # The generated requests met more than the happy path: refusals were checked too.
    statuses = {status for _, status in seen}
    assert statuses >= {200, 401, 403, 404, 422}, sorted(seen)
    assert ("/api/runs/{run_id}", 200) in seen and ("/api/flows/{flow_id}", 200) in seen


def check_generated(
    operation: Any, way_in: dict[str, Any], examples: int, seen: set[tuple[str, int]]
) -> None:
    cases = operation.as_strategy(GenerationMode.POSITIVE) | operation.as_strategy(
        GenerationMode.NEGATIVE
    )

    @given(case=cases)
    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def answers_as_documented(case: Any) -> None:
        before = rows()
        response = case.call_and_validate(**way_in, checks=CHECKS)
        seen.add((operation.path, response.status_code))
        if case.method.upper() in ("GET", "HEAD"):
            assert rows() == before, "a GET changed what the database holds"

    answers_as_documented()
