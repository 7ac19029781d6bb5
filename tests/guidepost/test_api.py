"""The JSON API under /api/ through Django's test client: typed answers, spec §7's
error shape for every failure, staff sign-in, read-only, and its docs without a CDN."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from access_app.callers import Caller
from runs_app import agent_steps
from runs_app.models import Run, Step

pytestmark = pytest.mark.django_db

AGENT = Caller(key="anon:127.0.0.1:test-agent", name="test-agent")
REFUND = "refund_request"
ERROR_KEYS = {"error", "reason", "next", "retryable"}


def start(values: dict[str, Any] | None = None, ref: str | None = None) -> str:
    return str(
        agent_steps.run_start(caller=AGENT, flow_id=REFUND, values=values, ref=ref)["run_id"]
    )


def is_error(body: dict[str, Any], error: str) -> bool:
    return ERROR_KEYS <= body.keys() and body["error"] == error


# --- access -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/api/runs",
        "/api/runs/r_x",
        "/api/flows",
        f"/api/flows/{REFUND}",
        f"/api/flows/{REFUND}/versions",
        f"/api/flows/{REFUND}/usage",
        "/api/openapi.json",
    ],
)
def test_an_anonymous_api_call_gets_401_in_the_error_shape(client: Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 401
    assert is_error(response.json(), "not signed in")
    assert response.json()["retryable"] is False


def test_the_docs_page_sends_anonymous_people_to_the_login(client: Client) -> None:
    response = client.get("/api/docs")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_staff_outside_the_ops_group_get_403_in_the_error_shape(client: Client) -> None:
    client.force_login(User.objects.create_user("clerk", password="x-clerk-pass", is_staff=True))
    for path in ("/api/runs", "/api/flows"):
        response = client.get(path)
        assert response.status_code == 403
        assert is_error(response.json(), "permission denied")


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_no_endpoint_changes_a_run(ops_client: Client, method: str) -> None:
    run_id = start()
    before = Run.objects.values().get(public_id=run_id), Step.objects.count()
    for path in ("/api/runs", f"/api/runs/{run_id}", "/api/flows", f"/api/flows/{REFUND}"):
        assert getattr(ops_client, method)(path).status_code == 405, path
    assert (Run.objects.values().get(public_id=run_id), Step.objects.count()) == before


# --- runs -----------------------------------------------------------------------------------------


def test_runs_list_filters_and_paginates_like_the_page(ops_client: Client) -> None:
    first = start(ref="TICKET-1")
    second = start({"order_number": "A00119", "n_reason": "changed_mind"}, ref="TICKET-2")
    agent_steps.run_answer(caller=AGENT, run_id=second, choice="__unknown__", values=None, at=None)
    body = ops_client.get("/api/runs?per_page=1").json()
    assert body["count"] == 2 and body["pages"] == 2 and body["per_page"] == 1
    assert [r["run_id"] for r in body["items"]] == [second]
    row = ops_client.get("/api/runs?state=stalled").json()["items"]
    assert [r["run_id"] for r in row] == [second]
    assert row[0]["node"] == "n_within_window"
    assert row[0]["step_count"] == 2
    assert row[0]["flow"]["id"] == REFUND and row[0]["flow"]["version"] == "2024.3"
    assert row[0]["ref"] == "TICKET-2"
    found = ops_client.get("/api/runs?q=ticket-1").json()["items"]
    assert [r["run_id"] for r in found] == [first]
    assert ops_client.get("/api/runs?page=9").json()["items"] == []


def test_runs_list_refuses_bad_parameters_in_the_error_shape(ops_client: Client) -> None:
    for query in ("state=bogus", "per_page=0", "per_page=1000", "page=x"):
        response = ops_client.get(f"/api/runs?{query}")
        assert response.status_code == 422, query
        body = response.json()
        assert is_error(body, "invalid arguments") and body["retryable"] is True, body


@pytest.mark.parametrize("runs", [1, 40])
def test_runs_list_costs_the_same_queries_whatever_its_size(
    ops_client: Client, django_assert_num_queries: Any, runs: int
) -> None:
    for i in range(runs):
        start(ref=f"R{i}")
    # session, user, two permission lookups, the rate limit's bucket, the count, the page,
    # the audit record
    with django_assert_num_queries(8):
        body = ops_client.get("/api/runs?per_page=200").json()
    assert len(body["items"]) == runs


def test_one_run_has_its_path_values_node_states_and_typed_steps(ops_client: Client) -> None:
    run_id = start({"order_number": "A00118"}, ref="TICKET-9")
    agent_steps.run_answer(caller=AGENT, run_id=run_id, choice="damaged", values=None, at=None)
    body = ops_client.get(f"/api/runs/{run_id}").json()
    assert body["run_id"] == run_id and body["state"] == "active" and body["node"] == "n_photos"
    assert body["values"] == {"order_number": "A00118", "n_reason": "damaged"}
    assert [e["id"] for e in body["path"]] == ["n_order", "n_reason"]
    assert body["node_states"]["n_photos"] == "current"
    assert body["node_states"]["n_reason"] == "answered"
    first, second = body["steps"]
    assert first["tool"] == "guide_start" and first["input"]["ref"] == "TICKET-9"
    assert first["result"]["index"]["order_number"].startswith("Ask for the order number")
    assert second["input"] == {"choice": "damaged"}
    assert second["result"]["node"]["id"] == "n_photos"
    assert second["result"]["node"]["accepts"] == {
        "yes": "They can take or already have a photo of the damage",
        "no": "They cannot provide a photo (item thrown away, no camera, refuses)",
    }
    assert "tell" not in second["result"]  # keys the agent did not get are not invented
    assert second["summary"] == "waits at n_photos"
    assert re.fullmatch(r"[0-9a-f]{64}", second["hash"])


def test_an_unknown_run_is_404_with_the_runs_error(ops_client: Client) -> None:
    response = ops_client.get("/api/runs/r_nope")
    assert response.status_code == 404
    assert is_error(response.json(), "run not found")


def test_api_text_is_utf8_not_escaped(ops_client: Client) -> None:
    agent_steps.run_start(caller=AGENT, flow_id="payment_failed", values=None, ref=None)
    raw = ops_client.get("/api/runs").content.decode()
    assert "支払いが失敗した" in raw and "\\u" not in raw


# --- flows --------------------------------------------------------------------------------------


def test_flows_list_and_one_flow_with_its_nodes(ops_client: Client) -> None:
    flows = ops_client.get("/api/flows").json()
    assert REFUND in {f["id"] for f in flows}
    body = ops_client.get(f"/api/flows/{REFUND}").json()
    assert body["live"] is True and body["entry"] == "n_order"
    nodes = {n["id"]: n for n in body["nodes"]}
    assert nodes["n_order"]["slots"][0]["name"] == "order_number"
    assert {"label": "__other__", "to": "n_agent_review"} in nodes["n_reason"]["next"]
    assert body["source"].startswith("id: refund_request")
    missing = ops_client.get("/api/flows/refund_requst")
    assert missing.status_code == 404
    assert is_error(missing.json(), "flow not found")
    assert missing.json()["candidates"] == [REFUND]


def test_flow_versions_count_their_runs(ops_client: Client) -> None:
    assert ops_client.get(f"/api/flows/{REFUND}/versions").json() == []
    start()
    start()
    (version,) = ops_client.get(f"/api/flows/{REFUND}/versions").json()
    assert version["run_count"] == 2 and version["live"] is True
    assert version["version"] == "2024.3"


def test_flow_usage_counts_nodes_edges_and_leaks(ops_client: Client) -> None:
    start({"order_number": "A00118"})
    stalled = start({"order_number": "A00119", "n_reason": "changed_mind"})
    agent_steps.run_answer(caller=AGENT, run_id=stalled, choice="__unknown__", values=None, at=None)
    body = ops_client.get(f"/api/flows/{REFUND}/usage").json()
    assert body["runs"] == 2 and body["days"] == 30 and body["capped"] is False
    nodes = {n["id"]: n for n in body["nodes"]}
    assert nodes["n_order"]["reached"] == 2
    assert nodes["n_reason"]["waiting"] == 1
    assert nodes["n_within_window"]["stalled"] == 1
    edges = {(e["source"], e["label"]): e for e in body["edges"]}
    assert edges[("n_order", None)]["runs"] == 2
    assert edges[("n_order", None)]["target"] == "n_reason"
    assert edges[("n_reason", "changed_mind")]["target"] == "n_within_window"
    assert body["leaks"] == [
        {"node": "n_within_window", "label": "__unknown__", "kind": "unknown", "count": 1}
    ]
    assert ops_client.get(f"/api/flows/{REFUND}/usage?days=0").status_code == 422


# --- schema and docs ------------------------------------------------------------------------------


def test_the_openapi_schema_is_typed_throughout(ops_client: Client) -> None:
    schema = ops_client.get("/api/openapi.json").json()
    assert {"/api/runs", "/api/runs/{run_id}", "/api/flows", "/api/flows/{flow_id}/usage"} <= set(
        schema["paths"]
    )
    components = schema["components"]["schemas"]
    assert {"RunOut", "StepOut", "FlowOut", "FlowUsageOut", "ErrorOut"} <= set(components)

    def loose(node: object, where: str) -> list[str]:
        """Places an object schema accepts anything (a dict[str, Any])."""
        found = []
        if isinstance(node, dict):
            extra = node.get("additionalProperties")
            if node.get("type") == "object" and extra in (True, {}):
                found.append(where)
            for key, value in node.items():
                found += loose(value, f"{where}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                found += loose(value, f"{where}/{i}")
        return found

    # StepInputOut.values holds what the agent sent, which may be any JSON: it is typed as
    # pydantic's JsonValue, which OpenAPI can only spell as "anything".
    assert [p for p in loose(components, "") if "StepInputOut" not in p] == []
    get_run = schema["paths"]["/api/runs/{run_id}"]["get"]["responses"]
    assert set(get_run) >= {"200", "401", "403", "404"}


def test_the_docs_page_loads_its_assets_from_this_server(ops_client: Client) -> None:
    html = ops_client.get("/api/docs").content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    # The plain name, or its hashed copy once `serve` has collected the static files.
    assert any(re.search(r"/swagger-ui-bundle(\.[0-9a-f]{12})?\.js$", s) for s in sources), sources
    assert all(s.startswith("/") for s in sources), sources
    assert '"validatorUrl": null' in html


def test_the_api_answers_through_ninjas_test_client_as_through_django(ops_user: Any) -> None:
    from ninja.testing import TestClient

    from guidepost.api import api

    run_id = start(ref="TICKET-N")
    client = TestClient(api)
    body = client.get("/runs?q=TICKET-N", user=ops_user).json()
    assert [r["run_id"] for r in body["items"]] == [run_id]
    refused = client.get("/runs")  # ninja's test request has no signed-in user
    assert refused.status_code == 401 and is_error(refused.json(), "not signed in")


def test_a_stalled_run_gives_when_it_stalled_and_an_active_one_none(ops_client: Client) -> None:
    active = start()
    stalled = start({"order_number": "A00119", "n_reason": "changed_mind"})
    agent_steps.run_answer(caller=AGENT, run_id=stalled, choice="__unknown__", values=None, at=None)
    stall = Step.objects.get(run__public_id=stalled, status="stalled").created_at
    rows = {r["run_id"]: r for r in ops_client.get("/api/runs").json()["items"]}
    assert rows[active]["stalled_at"] is None
    assert rows[stalled]["stalled_at"] == stall.isoformat(timespec="milliseconds")[:-6] + "Z"
    assert (
        ops_client.get(f"/api/runs/{stalled}").json()["stalled_at"] == rows[stalled]["stalled_at"]
    )
