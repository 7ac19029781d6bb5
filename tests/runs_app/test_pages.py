"""The run pages through Django's test client: what they show, who may see them, that
they never change a run, and how many queries they cost.

Runs are made by the real services on the bundled flows.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from access_app import ratelimit
from access_app.callers import Caller
from runs_app import agent_steps
from runs_app.models import Run, Step

pytestmark = pytest.mark.django_db

AGENT = Caller(key="anon:127.0.0.1:test-agent", name="test-agent")
REFUND = "refund_request"


def start(values: dict[str, Any] | None = None, ref: str | None = None) -> str:
    result = agent_steps.run_start(caller=AGENT, flow_id=REFUND, values=values, ref=ref)
    return str(result["run_id"])


def answer(run_id: str, choice: str | None = None, values: dict[str, Any] | None = None) -> None:
    agent_steps.run_answer(caller=AGENT, run_id=run_id, choice=choice, values=values, at=None)


def stalled_run() -> str:
    """A refund run stalled at n_within_window: the person does not know the date."""
    run_id = start({"order_number": "A00119", "n_reason": "changed_mind"}, ref="TICKET-1043")
    answer(run_id, "__unknown__")
    return run_id


def node_classes(html: str, node_id: str) -> str:
    found = re.search(rf'<g id="node-{node_id}" class="([^"]*)"', html)
    assert found, f"node-{node_id} not in the page"
    return found.group(1)


# --- access -------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/r/r_nope", "/f/", f"/f/{REFUND}"])
def test_an_anonymous_page_request_is_sent_to_the_admin_login(client: Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/admin/login/?next={path}"


def test_an_anonymous_live_update_gets_401_in_the_error_shape(client: Client) -> None:
    run_id = start()
    response = client.get(f"/r/{run_id}/live?after=0")
    assert response.status_code == 401
    assert response.json()["error"] == "not signed in"
    assert response.json()["retryable"] is False


def test_a_signed_in_user_who_is_not_staff_is_sent_to_the_login(client: Client) -> None:
    client.force_login(User.objects.create_user("visitor", password="x-visitor-pass"))
    assert client.get("/").status_code == 302


def test_staff_outside_the_ops_group_are_refused_with_403(client: Client) -> None:
    client.force_login(User.objects.create_user("clerk", password="x-clerk-pass", is_staff=True))
    assert client.get("/").status_code == 403
    assert client.get(f"/f/{REFUND}").status_code == 403
    response = client.get(f"/r/{start()}/live")
    assert response.status_code == 403
    assert response.json()["error"] == "permission denied"


def test_a_superuser_sees_the_pages_without_the_group(client: Client) -> None:
    client.force_login(User.objects.create_superuser("root", password="x-root-pass"))
    assert client.get("/").status_code == 200


def test_the_admin_login_signs_an_ops_member_in_and_back_to_the_page(
    client: Client, ops_user: Any
) -> None:
    from tests.conftest import OPS_PASSWORD

    response = client.post(
        "/admin/login/?next=/", {"username": "ops", "password": OPS_PASSWORD, "next": "/"}
    )
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_no_page_accepts_a_method_that_could_change_something(
    ops_client: Client, method: str
) -> None:
    run_id = stalled_run()
    before = Run.objects.values().get(public_id=run_id), Step.objects.count()
    for path in ("/", f"/r/{run_id}", f"/r/{run_id}/live", "/f/", f"/f/{REFUND}"):
        response = getattr(ops_client, method)(path)
        assert response.status_code == 405, path
    assert (Run.objects.values().get(public_id=run_id), Step.objects.count()) == before


def test_an_unknown_run_is_a_404(ops_client: Client) -> None:
    assert ops_client.get("/r/r_doesnotexist").status_code == 404
    response = ops_client.get("/r/r_doesnotexist/live")
    assert response.status_code == 404 and response.json()["error"] == "run not found"


# --- the runs list -------------------------------------------------------------------------------


def test_the_runs_list_shows_each_run_with_flow_state_node_ref_and_steps(
    ops_client: Client,
) -> None:
    waiting = start({"order_number": "A00118"}, ref="TICKET-1042")
    html = ops_client.get("/").content.decode()
    row = html[html.index(f'data-run="{waiting}"') :]
    row = row[: row.index("</tr>")]
    assert "Customer asks for a refund" in row
    assert "n_reason" in row  # where it waits
    assert "TICKET-1042" in row
    assert "state-active" in row
    assert re.search(r'<td data-label="Steps" class="num">1</td>', row)  # one step


def test_stalled_runs_stand_out_as_waiting_for_a_human(ops_client: Client) -> None:
    start()
    stalled = stalled_run()
    html = ops_client.get("/").content.decode()
    assert "1 run waiting for a human" in html
    assert f'<tr class="run-row state-stalled" data-run="{stalled}">' in html
    assert "needs a human" in html


def test_the_runs_list_filters_by_state_and_flow_and_finds_a_run_by_id_or_ref(
    ops_client: Client,
) -> None:
    active = start(ref="TICKET-1")
    stalled = stalled_run()
    other = agent_steps.run_start(caller=AGENT, flow_id="payment_failed", values=None, ref="chat-9")
    other_id = other["run_id"]

    def listed(query: str) -> set[str]:
        html = ops_client.get("/" + query).content.decode()
        return set(re.findall(r'data-run="([^"]+)"', html))

    assert listed("") == {active, stalled, other_id}
    assert listed("?state=stalled") == {stalled}
    assert listed("?flow=payment_failed") == {other_id}
    assert listed("?state=active&flow=refund_request") == {active}
    assert listed(f"?q={stalled[:10]}") == {stalled}
    assert listed("?q=ticket-1") == {active, stalled}  # TICKET-1 and TICKET-1043
    assert listed("?q=chat-9") == {other_id}
    assert listed("?state=bogus") == {active, stalled, other_id}


def test_the_runs_list_is_newest_activity_first_and_paginated(ops_client: Client) -> None:
    ids = [start(ref=f"R{i}") for i in range(5)]
    html = ops_client.get("/?per_page=2").content.decode()
    assert re.findall(r'data-run="([^"]+)"', html) == [ids[4], ids[3]]
    assert "page 1 of 3" in html
    page3 = ops_client.get("/?per_page=2&page=3").content.decode()
    assert re.findall(r'data-run="([^"]+)"', page3) == [ids[0]]
    answer(ids[0], values={"order_number": "A00120"})  # activity moves it to the top
    first = ops_client.get("/?per_page=2").content.decode()
    assert re.findall(r'data-run="([^"]+)"', first)[0] == ids[0]
    beyond = ops_client.get("/?per_page=2&page=99").content.decode()
    assert "page 3 of 3" in beyond


@pytest.mark.parametrize("runs", [1, 60])
def test_the_runs_list_costs_the_same_queries_whatever_the_page_size(
    ops_client: Client, django_assert_num_queries: Any, runs: int
) -> None:
    for i in range(runs):
        start(ref=f"R{i}")
    stalled_run()
    # session, user, the user's and the group's permissions, the rate limit's bucket,
    # stalled and claimed counts, flow ids, run count, one page of runs (with claims)
    with django_assert_num_queries(9):
        response = ops_client.get("/?per_page=200")
    assert response.content.decode().count('class="run-row') == runs + 1


# --- one run -----------------------------------------------------------------------------------


def test_the_run_page_draws_the_pinned_flow_with_each_node_state(ops_client: Client) -> None:
    run_id = start({"order_number": "A00118"})
    answer(run_id, "damaged")
    html = ops_client.get(f"/r/{run_id}").content.decode()
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="gp-diagram"' in html
    assert "state-prefilled" in node_classes(html, "n_order")
    assert "state-answered" in node_classes(html, "n_reason")
    assert "state-current" in node_classes(html, "n_photos")
    assert "kind-ask" in node_classes(html, "n_photos")
    assert "state-unvisited" in node_classes(html, "n_tracking")
    assert re.search(r'<g class="edge state-taken" data-from="n_reason" data-to="n_photos"', html)
    assert 'class="gp-diagram gp-legend"' in html  # the legend


def test_the_run_page_shows_the_timeline_values_and_what_was_said(ops_client: Client) -> None:
    run_id = start({"order_number": "A00118", "n_reason": "damaged"}, ref="TICKET-7")
    answer(run_id, "maybe")
    html = ops_client.get(f"/r/{run_id}").content.decode()
    assert html.count('<li class="step') == 2
    assert "guide_start" in html and "guide_answer" in html
    assert "status-unmatched" in html
    assert "rejected &quot;maybe&quot; at n_photos (attempt 1 of 3)" in html
    assert "Answers rejected at the current node" in html
    assert "Ask node.say again" in html  # the next directive given
    assert "&quot;order_number&quot;: &quot;A00118&quot;" in html  # the input
    assert '<td class="mono">order_number</td><td class="">A00118</td>' in html
    assert "TICKET-7" in html


def test_a_stalled_run_page_shows_the_hand_over_note(ops_client: Client) -> None:
    html = ops_client.get(f"/r/{stalled_run()}").content.decode()
    assert "Hand-over note" in html
    assert "Look it up in the carrier tracking" in html
    assert "state-stalled" in node_classes(html, "n_within_window")


def test_a_folded_run_page_names_the_branches(ops_client: Client) -> None:
    result = agent_steps.run_start(
        caller=AGENT, flow_id="payment_failed", values={"n_error_code": "E01"}, ref=None
    )
    run_id = result["run_id"]
    answer(run_id, "__unknown__")
    html = ops_client.get(f"/r/{run_id}").content.decode()
    run = Run.objects.get(public_id=run_id)
    if "folded" not in json.dumps(run.engine_state):
        pytest.fail(f"the bundled payment_failed flow did not fold: {run.engine_state}")
    assert "Folded at" in html
    assert "state-folded" in html and "state-fold_branch" in html


def test_the_run_page_costs_a_fixed_number_of_queries(
    ops_client: Client, django_assert_num_queries: Any
) -> None:
    short = start()
    long = start({"order_number": "A00118"})
    for label in ("damaged",):
        answer(long, label)
    for run_id in (short, long):
        # Each request starts with no lease, so each reads the bucket (a second page within
        # the lease would spend it without a statement, ADR 0072).
        ratelimit.leases_forget()
        # session, user, two permission lookups, the rate limit's bucket, the run with its
        # version, its steps
        with django_assert_num_queries(7):
            assert ops_client.get(f"/r/{run_id}").status_code == 200


# --- live updates ----------------------------------------------------------------------------


def test_live_says_only_the_revision_when_nothing_changed(
    ops_client: Client, django_assert_num_queries: Any
) -> None:
    run_id = start()
    with django_assert_num_queries(6):  # with the rate limit's bucket
        data = ops_client.get(f"/r/{run_id}/live?after=1").json()
    assert data == {"revision": 1, "state": "active", "final": False}


def test_live_sends_new_steps_and_node_states_after_a_revision(ops_client: Client) -> None:
    run_id = start({"order_number": "A00118"})
    answer(run_id, "damaged")
    data = ops_client.get(f"/r/{run_id}/live?after=1").json()
    assert data["revision"] == 2
    assert data["node_states"]["n_photos"] == "current"
    assert data["node_states"]["n_reason"] == "answered"
    assert ["n_reason", "damaged"] in data["taken"]
    assert data["rows_html"].count('<li class="step') == 1  # only step 2
    assert 'data-seq="2"' in data["rows_html"]
    assert "waits at" in data["summary_html"] and "n_photos" in data["summary_html"]
    assert "A00118" in data["values_html"]
    assert data["reset"] is False


def test_live_marks_a_closed_run_final(ops_client: Client) -> None:
    run_id = start()
    agent_steps.run_close(caller=AGENT, run_id=run_id, reason="the person left")
    data = ops_client.get(f"/r/{run_id}/live?after=1").json()
    assert data["state"] == "closed" and data["final"] is True
    assert "the person left" in data["summary_html"]


def test_the_pages_load_no_inline_script_or_handler(ops_client: Client) -> None:
    run_id = stalled_run()
    for path in ("/", f"/r/{run_id}", "/f/", f"/f/{REFUND}"):
        html = ops_client.get(path).content.decode()
        scripts = re.findall(r"<script\b([^>]*)>", html)
        assert all("src=" in attrs for attrs in scripts), path
        assert not re.search(r"\son[a-z]+=", html), path
        assert "style=" not in html, path
        assert "<style" not in html, path
