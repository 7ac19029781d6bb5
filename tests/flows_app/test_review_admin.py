"""The review workflow in the admin, through Django's test client against a real database.

Personas: a support lead (staff, in the "Support lead" group the migration creates),
a reader (staff who may view drafts but not decide), and nobody logged in.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from flowcore.flow.building import content_hash
from flows_app.models import Draft, FlowVersion
from flows_app.services import draft_approve, draft_create, draft_discard
from tests.support.drafting import (
    BROKEN_GUARANTEE,
    BROKEN_SCENARIO,
    REFUND,
    REFUND_CHANGE,
    REFUND_CHANGE_WITHOUT_HANDOVER,
    REFUND_LOOKUP,
    REFUND_LOOKUP_MOVED,
    REFUND_REWORDED,
    REFUND_TEXT,
    REFUND_THRESHOLD_RAISED,
    add_broken_scenario_copy,
    edited,
    new_flow,
)
from tests.support.unwritable import blocked_flow_path

pytestmark = pytest.mark.django_db

LIST = "/admin/flows_app/draft/"
BROKEN_CHANGE = edited(REFUND_CHANGE, {"      lost: n_refund_method\n": "      lost: n_nowhere\n"})


def submit(text: str, by: str = "anon:127.0.0.1:agent") -> Draft:
    return draft_create(text=text, submitted_via="key", submitted_by=by).draft


def page(draft: Draft) -> str:
    return reverse("admin:flows_app_draft_change", args=[draft.pk])


def decide(draft: Draft, what: str) -> str:
    return reverse(f"admin:flows_app_draft_{what}", args=[draft.pk])


def messages_of(response: Any) -> list[tuple[str, str]]:
    return [(m.level_tag, str(m)) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def lead(migrated_groups: None) -> User:
    user = User.objects.create_user("maria", is_staff=True)
    user.groups.add(Group.objects.get(name="Support lead"))
    return user


@pytest.fixture
def reader() -> User:
    user = User.objects.create_user("tom", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(codename="view_draft"),
        Permission.objects.get(codename="view_flowversion"),
    )
    return user


def client_for(user: User, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def list_rows(html: str) -> list[dict[str, str]]:
    """The changelist's rows as {column: text}."""
    body = html[html.index("<tbody>") : html.index("</tbody>")]
    return [
        {
            name: re.sub(r"<.*?>", "", cell).strip()
            for name, cell in re.findall(
                r'<t[dh] class="field-([\w_]+)"[^>]*>(.*?)</t[dh]>', row, re.S
            )
        }
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


def status_of(draft: Draft) -> str:
    return Draft.objects.values_list("status", flat=True).get(pk=draft.pk)


def test_the_support_lead_group_from_the_migration_may_approve_drafts(lead: User) -> None:
    assert lead.has_perm("flows_app.approve_draft")
    assert lead.has_perm("flows_app.view_draft")
    assert lead.has_perm("flows_app.view_flowversion")


# --- the list -----------------------------------------------------------------------------


def test_the_list_shows_pending_drafts_first_with_kind_lint_submitter_and_age(
    live_flows: Path, lead: User
) -> None:
    discarded = submit(new_flow("gift_card"))
    draft_discard(draft=discarded, discarded_by="maria", reason="no")
    change = submit(REFUND_CHANGE, by="anon:127.0.0.1:claude")
    broken_new = submit(new_flow("loyalty_points", target="n_nowhere", title="Points"))
    rows = list_rows(client_for(lead).get(LIST).content.decode())
    assert [row["flow_link"] for row in rows] == ["loyalty_points", REFUND, "gift_card"]
    assert [row["status"] for row in rows] == ["Pending", "Pending", "Discarded"]
    assert rows[1] == {
        "flow_link": REFUND,
        "title": "Customer asks for a refund",
        "kind": "change",
        "lint": "ok",
        "tests": "1 broken",
        "submitter": "anonymous (127.0.0.1, claude)",
        "age": "0\xa0minutes",
        "status": "Pending",
    }
    assert (rows[0]["kind"], rows[0]["lint"]) == (
        "new flow",
        "2 errors",
    )  # the bad target and the node it misses
    assert change.pk != broken_new.pk


def test_the_list_filters_by_state_and_by_flow(live_flows: Path, lead: User) -> None:
    submit(REFUND_CHANGE)
    old = submit(new_flow("gift_card"))
    submit(new_flow("gift_card", say="Ask for the card number again"))
    client = client_for(lead)
    superseded = list_rows(client.get(LIST, {"status__exact": "superseded"}).content.decode())
    assert [(r["flow_link"], r["status"]) for r in superseded] == [("gift_card", "Superseded")]
    assert old.status == "pending"  # as it was when submitted; the list reads the database
    by_flow = list_rows(client.get(LIST, {"flow_id__exact": REFUND}).content.decode())
    assert [r["flow_link"] for r in by_flow] == [REFUND]


def test_the_list_costs_the_same_queries_for_1_and_20_drafts(live_flows: Path, lead: User) -> None:
    client = client_for(lead)

    def queries_for_list() -> int:
        client.get(LIST)  # warm the session and the permission cache
        with CaptureQueriesContext(connection) as captured:
            assert client.get(LIST).status_code == 200
        return len(captured.captured_queries)

    submit(new_flow("flow_0"))
    one = queries_for_list()
    for i in range(1, 20):
        submit(new_flow(f"flow_{i}"))
    assert Draft.objects.count() == 20
    assert queries_for_list() == one


def test_decided_drafts_cost_the_list_no_query_of_their_own(live_flows: Path, lead: User) -> None:
    client = client_for(lead)

    def queries_for_list() -> int:
        client.get(LIST)
        with CaptureQueriesContext(connection) as captured:
            assert client.get(LIST).status_code == 200
        return len(captured.captured_queries)

    draft_discard(draft=submit(REFUND_CHANGE), discarded_by="maria", reason="no")
    one = queries_for_list()
    for i in range(10):
        draft_approve(draft=submit(new_flow(f"flow_{i}")), approved_by="maria")
        draft_discard(
            draft=submit(new_flow(f"flow_{i}", say=f"v{i}")), discarded_by="m", reason="x"
        )
    assert queries_for_list() == one


# --- the draft page -----------------------------------------------------------------------


def test_the_draft_page_shows_yaml_with_indentation_line_numbers_and_findings_beside_lines(
    live_flows: Path, reader: User
) -> None:
    draft = submit(BROKEN_CHANGE)
    html = client_for(reader).get(page(draft)).content.decode()
    line = BROKEN_CHANGE.splitlines().index("      lost: n_nowhere") + 1
    row = re.search(rf'<tr id="L{line}".*?</tr>', html, re.S)
    assert row is not None
    assert f'<td class="ln">{line}</td>' in row.group(0)
    assert '<td class="src">      lost: n_nowhere</td>' in row.group(0)
    assert "bad_target" in row.group(0)
    assert 'id="L1"' in html and f'id="L{len(BROKEN_CHANGE.splitlines())}"' in html
    assert "1 error" in html


def test_a_change_shows_what_changes_for_agents_and_a_line_diff_against_live(
    live_flows: Path, reader: User
) -> None:
    draft = submit(REFUND_CHANGE)
    html = client_for(reader).get(page(draft)).content.decode()
    changes = html[html.index('id="changes"') : html.index('id="diagram"')]
    for sentence in (
        "outcome &#x27;price_matched&#x27; is new",
        "node n_price_match (end) is new",
        "n_reason accepts a new label &#x27;price_dropped&#x27;",
        "version: 2024.3 → 2024.4",
    ):
        assert sentence in changes, sentence
    diff = html[html.index('id="diff"') :]
    assert '<tr class="add">' in diff and '<tr class="del">' in diff
    assert "      price_dropped: n_price_match" in diff
    assert "version: &quot;2024.3&quot;" in diff


def test_a_changed_threshold_of_a_check_is_said_in_words_on_the_review_page(
    live_flows: Path, reader: User
) -> None:
    draft = submit(REFUND_THRESHOLD_RAISED)
    html = client_for(reader).get(page(draft)).content.decode()
    changes = html[html.index('id="changes"') : html.index('id="diagram"')]
    assert (
        "n_amount_check: when refund_amount &gt; 200.0 the run now goes to n_supervisor; "
        "before: when refund_amount &gt; 100.0, to n_supervisor"
    ) in changes


def test_a_new_lookup_is_said_with_the_endpoint_runs_now_ask(
    live_flows: Path, reader: User
) -> None:
    html = client_for(reader).get(page(submit(REFUND_LOOKUP))).content.decode()
    changes = text_of(section(html, "changes"))
    assert "node n_delivery (lookup) is new: it asks the endpoint orders" in changes
    assert "n_reason: 'changed_mind' now goes to n_delivery (was n_within_window)" in changes


def test_a_changed_lookup_is_said_as_its_endpoint_and_answers_on_the_review_page(
    live_flows: Path, reader: User
) -> None:
    draft_approve(draft=submit(REFUND_LOOKUP), approved_by="maria", confirm_broken_tests=True)
    html = client_for(reader).get(page(submit(REFUND_LOOKUP_MOVED))).content.decode()
    assert text_of(section(html, "changes")).endswith(
        "n_delivery takes a new answer 'not_found' from its endpoint "
        "n_delivery now asks the endpoint orders_v2; before: orders "
        "version: 2024.4 → 2024.5"
    )


def test_the_draft_page_draws_the_diagram_marking_new_and_changed_nodes(
    live_flows: Path, reader: User
) -> None:
    html = client_for(reader).get(page(submit(REFUND_CHANGE))).content.decode()
    diagram = html[html.index('id="draft-diagram"') : html.index('id="source"')]
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="gp-diagram"' in diagram
    for node in ("n_order", "n_reason", "n_price_match", "n_agent_review"):
        assert f'id="node-{node}"' in diagram, node
    new = re.search(r'<g id="node-n_price_match".*?</g>', diagram, re.S)
    changed = re.search(r'<g id="node-n_reason".*?</g>', diagram, re.S)
    assert new is not None and ">new<" in new.group(0)
    assert changed is not None and ">changed<" in changed.group(0)
    # Marked by class too, for the diagram's style and for pages.js to open on them.
    assert re.search(r'<g id="node-n_price_match" class="[^"]* mark-new"', diagram)
    assert re.search(r'<g id="node-n_reason" class="[^"]* mark-changed"', diagram)
    assert 'class="swatch kind-tell state-plain mark-new"' in diagram  # in the legend
    assert ".gp-diagram" in html[: html.index("</head>")]  # its CSS is on the page


def test_a_draft_with_errors_has_no_diagram_but_says_why(live_flows: Path, reader: User) -> None:
    html = client_for(reader).get(page(submit(BROKEN_CHANGE))).content.decode()
    assert "No diagram: the draft has lint errors." in html
    assert 'class="gp-diagram"' not in html


def test_a_new_flow_is_shown_as_new_without_a_diff(live_flows: Path, reader: User) -> None:
    html = client_for(reader).get(page(submit(new_flow("gift_card")))).content.decode()
    assert "A new flow" in html and 'id="diff"' not in html


def test_agent_supplied_text_is_escaped_on_the_list_and_the_page(
    live_flows: Path, lead: User
) -> None:
    hostile = new_flow(
        "gift_card",
        say="'<script>alert(1)</script>'",
        title="'<script>alert(2)</script><img src=x onerror=alert(3)>'",
    )
    draft = submit(hostile, by="<b>agent</b>")
    client = client_for(lead)
    for html in (client.get(LIST).content.decode(), client.get(page(draft)).content.decode()):
        assert "<script>alert" not in html
        assert "<img src=x" not in html
        assert "<b>agent</b>" not in html
        assert "&lt;script&gt;alert(" in html


def test_buttons_appear_only_for_a_pending_draft_and_a_person_who_may_decide(
    live_flows: Path, lead: User, reader: User
) -> None:
    draft = submit(REFUND_CHANGE)
    assert 'id="approve"' in client_for(lead).get(page(draft)).content.decode()
    read_only = client_for(reader).get(page(draft)).content.decode()
    assert 'id="approve"' not in read_only and 'id="discard"' not in read_only
    assert "waits for a support lead" in read_only
    draft_discard(draft=draft, discarded_by="maria", reason="not now")
    decided = client_for(lead).get(page(draft)).content.decode()
    assert 'id="approve"' not in decided
    assert "not now" in decided and "by maria" in decided


# --- the live tests on the draft page (ADR 0038) -------------------------------------------


def section(html: str, section_id: str) -> str:
    start = html.index(f'<section id="{section_id}"')
    return html[start : html.index("</section>", start)]


def text_of(html: str) -> str:
    """The text a person reads: tags removed, entities of quotes undone, spaces collapsed."""
    text = re.sub(r"<.*?>", " ", html).replace("&#x27;", "'").replace("&quot;", '"')
    return re.sub(r"\s+", " ", text.replace("&gt;", ">").replace("&lt;", "<")).strip()


def test_the_draft_page_shows_the_broken_scenario_with_expected_and_got_and_a_counterexample(
    live_flows: Path, reader: User
) -> None:
    draft = submit(REFUND_CHANGE_WITHOUT_HANDOVER)
    html = client_for(reader).get(page(draft)).content.decode()
    tests = text_of(section(html, "tests"))
    assert (
        f"Against the live tests, tests/{REFUND}.yaml : this draft fails 1 of 17 scenarios "
        f"({BROKEN_SCENARIO!r}) and breaks 1 of 5 guarantees ({BROKEN_GUARANTEE!r})."
    ) in tests
    scenario = re.search(r'<div class="gp-broken-test" id="scenario-1">(.*?)</div>', html, re.S)
    assert scenario is not None
    assert text_of(scenario.group(1)) == (
        f"Scenario “{BROKEN_SCENARIO}” (tests/{REFUND}.yaml:133) "
        "call 1: answer: price_dropped "
        "node: expected n_agent_review, got n_price_match "
        "outcome: expected escalated, got price_matched"
    )
    guarantee = html[html.index('id="guarantee-1"') :]
    assert f"Guarantee “{BROKEN_GUARANTEE}”" in text_of(guarantee)
    counterexample = re.search(r'<pre class="gp-counterexample">(.*?)</pre>', guarantee, re.S)
    assert counterexample is not None
    lines = counterexample.group(1).splitlines()
    assert lines[0].startswith("the stall at n_order hands over with the generic text")
    assert lines[1].startswith("  n_order  stalled (escalate), handoff: ")
    assert f"tests/{REFUND}.yaml stays as it is" in tests
    assert re.search(r'id="tests-now">2 broken', html)


def test_a_draft_that_passes_says_how_many_scenarios_pass_and_asks_no_confirmation(
    live_flows: Path, lead: User
) -> None:
    html = client_for(lead).get(page(submit(REFUND_REWORDED))).content.decode()
    tests = text_of(section(html, "tests"))
    assert f"tests/{REFUND}.yaml : all 17 scenarios pass and all 5 guarantees hold." in tests
    assert f"Approving publishes the flow only: tests/{REFUND}.yaml stays as it is." in tests
    assert 'id="approve"' in html and "confirm_broken_tests" not in html


def test_a_new_flow_without_a_tests_file_says_there_is_nothing_to_check(
    live_flows: Path, reader: User
) -> None:
    html = client_for(reader).get(page(submit(new_flow("gift_card")))).content.decode()
    assert text_of(section(html, "tests")).startswith(
        "Tests No tests: tests/gift_card.yaml does not exist"
    )
    assert re.search(r'id="tests-now">none', html)


def test_a_draft_with_lint_errors_says_its_tests_cannot_run_until_lint_passes(
    live_flows: Path, reader: User
) -> None:
    html = client_for(reader).get(page(submit(BROKEN_CHANGE))).content.decode()
    assert "The tests cannot run until lint passes" in section(html, "tests")
    assert re.search(r'id="tests-now">not run: lint errors', html)


def test_the_draft_page_costs_the_same_queries_with_or_without_tests_and_breakage(
    live_flows: Path, lead: User
) -> None:
    client = client_for(lead)

    def queries_for(draft: Draft) -> int:
        client.get(page(draft))  # warm the session and the permission cache
        with CaptureQueriesContext(connection) as captured:
            assert client.get(page(draft)).status_code == 200
        return len(captured.captured_queries)

    without_tests = queries_for(submit(new_flow("gift_card")))
    breaking = queries_for(submit(REFUND_CHANGE_WITHOUT_HANDOVER))
    assert breaking == without_tests


def test_a_lead_sees_the_confirmation_checkbox_only_when_the_draft_breaks_tests(
    live_flows: Path, lead: User, reader: User
) -> None:
    draft = submit(REFUND_CHANGE)
    html = client_for(lead).get(page(draft)).content.decode()
    checkbox = re.search(r'<input type="checkbox" name="confirm_broken_tests"[^>]*>', html)
    assert checkbox is not None and "required" in checkbox.group(0)
    assert "I have read what this breaks and approve anyway" in section(html, "decision")
    assert "confirm_broken_tests" not in client_for(reader).get(page(draft)).content.decode()


def test_a_forged_approval_without_the_checkbox_is_refused_and_points_at_what_breaks(
    live_flows: Path, lead: User
) -> None:
    draft = submit(REFUND_CHANGE_WITHOUT_HANDOVER)
    for confirmation in ({}, {"confirm_broken_tests": "on"}, {"confirm_broken_tests": ""}):
        client = client_for(lead, csrf=True)
        token = client.get(page(draft)).cookies["csrftoken"].value
        response = client.post(
            decide(draft, "approve"), {"csrfmiddlewaretoken": token, **confirmation}
        )
        assert response.status_code == 302 and response["Location"] == page(draft)
        [(level, text)] = messages_of(response)
        assert level == "error"
        assert text.startswith(
            f"Not approved {draft.public_id} ({REFUND}): against tests/{REFUND}.yaml, the draft "
            "fails 1 of 17 scenarios"
        )
        assert "I have read what this breaks and approve anyway" in text
    assert status_of(draft) == "pending"
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT
    assert not FlowVersion.objects.exists()


def test_approving_with_the_checkbox_publishes_and_the_page_keeps_what_broke(
    live_flows: Path, lead: User
) -> None:
    draft = submit(REFUND_CHANGE_WITHOUT_HANDOVER)
    client = client_for(lead)
    response = client.post(decide(draft, "approve"), {"confirm_broken_tests": "yes"})
    [(level, text)] = messages_of(response)
    assert level == "success" and "It breaks the live tests, as you confirmed" in text
    stored = Draft.objects.get(pk=draft.pk)
    assert (stored.status, stored.broken_tests_confirmed) == ("approved", True)
    assert stored.tests_at_approval["summary"]["broken_guarantees"] == [BROKEN_GUARANTEE]
    html = client.get(page(draft)).content.decode()
    assert re.search(r'id="tests-recorded">2 broken — approved anyway', html)
    tests = text_of(section(html, "tests"))
    assert "maria confirmed approving it anyway" in tests
    assert f"Approval left tests/{REFUND}.yaml as it was" in tests
    assert "node: expected n_agent_review, got n_price_match" in tests  # as it was then
    version = FlowVersion.objects.get(draft=draft)
    version_page = client.get(
        reverse("admin:flows_app_flowversion_change", args=[version.pk])
    ).content.decode()
    assert "approved although it broke the live tests" in version_page


def test_the_approve_action_refuses_a_draft_that_breaks_tests_and_links_its_page(
    live_flows: Path, lead: User
) -> None:
    breaking = submit(REFUND_CHANGE)
    passing = submit(new_flow("gift_card"))
    response = client_for(lead).post(
        LIST, {"action": "approve_selected", "_selected_action": [breaking.pk, passing.pk]}
    )
    assert [status_of(d) for d in (breaking, passing)] == ["pending", "approved"]
    refused = [text for level, text in messages_of(response) if level == "error"]
    assert len(refused) == 1
    assert refused[0].startswith(f"Not approved {breaking.public_id} ({REFUND}): against ")
    assert f'<a href="{page(breaking)}#tests">Read what it breaks on its page</a>' in refused[0]
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT


def test_the_list_shows_each_drafts_tests(live_flows: Path, lead: User) -> None:
    approved = submit(REFUND_CHANGE_WITHOUT_HANDOVER)
    draft_approve(draft=approved, approved_by="maria", confirm_broken_tests=True)
    submit(BROKEN_CHANGE)  # lint errors: no flow to run the tests on
    payment = (live_flows / "payment_failed.yaml").read_text(encoding="utf-8")
    submit(payment)  # the live text again: its tests pass
    submit(new_flow("gift_card", target="n_nowhere"))  # no tests file, whatever its lint
    discarded = submit(new_flow("vouchers"))
    draft_discard(draft=discarded, discarded_by="maria", reason="no")
    rows = list_rows(client_for(lead).get(LIST).content.decode())
    assert {(r["flow_link"], r["status"]): r["tests"] for r in rows} == {
        (REFUND, "Pending"): "not run: lint errors",
        ("payment_failed", "Pending"): "ok",
        ("gift_card", "Pending"): "none",
        ("vouchers", "Discarded"): "—",
        (REFUND, "Approved"): "2 broken, confirmed",
    }


def test_the_lists_tests_column_follows_the_live_tests_file(live_flows: Path, lead: User) -> None:
    submit(REFUND_REWORDED)
    client = client_for(lead)
    assert [r["tests"] for r in list_rows(client.get(LIST).content.decode())] == ["ok"]
    tests_file = live_flows / "tests" / f"{REFUND}.yaml"
    tests_file.write_text(
        tests_file.read_text(encoding="utf-8").replace(
            "guarantees:\n",
            "guarantees:\n  - name: a refund is always declined first\n"
            "    every_path_to: [refunded]\n    passes: n_declined\n",
        ),
        encoding="utf-8",
    )
    assert [r["tests"] for r in list_rows(client.get(LIST).content.decode())] == ["1 broken"]
    tests_file.unlink()
    assert [r["tests"] for r in list_rows(client.get(LIST).content.decode())] == ["none"]


# --- approve and discard buttons ----------------------------------------------------------


def test_the_approve_button_publishes_the_draft_and_says_so(live_flows: Path, lead: User) -> None:
    draft = submit(REFUND_REWORDED)
    client = client_for(lead, csrf=True)
    token = client.get(page(draft)).cookies["csrftoken"].value
    response = client.post(decide(draft, "approve"), {"csrfmiddlewaretoken": token})
    assert response.status_code == 302 and response["Location"] == page(draft)
    assert status_of(draft) == "approved"
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_REWORDED
    assert FlowVersion.objects.get(draft=draft).approved_by == "maria"
    [(level, text)] = messages_of(response)
    assert level == "success"
    assert text == (
        f"Approved {draft.public_id}: {REFUND} is live, version 2024.4, revision "
        f"{FlowVersion.objects.get(draft=draft).revision} (agents see it within seconds)."
    )


def test_the_discard_button_keeps_the_reason(live_flows: Path, lead: User) -> None:
    draft = submit(REFUND_CHANGE)
    response = client_for(lead).post(decide(draft, "discard"), {"reason": "duplicate of d_1"})
    assert response.status_code == 302
    stored = Draft.objects.get(pk=draft.pk)
    assert (stored.status, stored.decision_reason, stored.decided_by) == (
        "discarded",
        "duplicate of d_1",
        "maria",
    )


def test_discard_without_a_reason_is_refused_with_a_message(live_flows: Path, lead: User) -> None:
    draft = submit(REFUND_CHANGE)
    response = client_for(lead).post(decide(draft, "discard"), {"reason": "  "})
    assert status_of(draft) == "pending"
    [(level, text)] = messages_of(response)
    assert level == "error" and text.startswith(f"Not discarded {draft.public_id}")


def test_approving_a_draft_with_errors_from_its_page_names_them(
    live_flows: Path, lead: User
) -> None:
    draft = submit(BROKEN_CHANGE)
    response = client_for(lead).post(decide(draft, "approve"))
    assert status_of(draft) == "pending"
    [(level, text)] = messages_of(response)
    assert level == "error" and "bad_target refund_request/n_tracking/lost" in text
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT


FORGED: dict[str, Callable[[Draft], tuple[str, dict[str, Any]]]] = {
    "approve-button": lambda d: (decide(d, "approve"), {}),
    "discard-button": lambda d: (decide(d, "discard"), {"reason": "x"}),
    "approve-action": lambda d: (LIST, {"action": "approve_selected", "_selected_action": [d.pk]}),
    "discard-action": lambda d: (
        LIST,
        {"action": "discard_selected", "_selected_action": [d.pk], "confirm": "yes", "reason": "x"},
    ),
}


@pytest.mark.parametrize("forge", FORGED.values(), ids=FORGED.keys())
def test_a_forged_post_without_the_permission_changes_nothing(
    live_flows: Path, reader: User, forge: Callable[[Draft], tuple[str, dict[str, Any]]]
) -> None:
    draft = submit(REFUND_CHANGE)
    before = Draft.objects.filter(pk=draft.pk).values().get()
    url, data = forge(draft)
    response = client_for(reader).post(url, data)
    assert response.status_code in (200, 302, 403)
    assert Draft.objects.filter(pk=draft.pk).values().get() == before
    assert not FlowVersion.objects.exists()
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT
    assert not any(level == "success" for level, _ in messages_of(response))


def unchanged(draft: Draft, before: dict[str, Any], live_flows: Path) -> bool:
    return (
        Draft.objects.filter(pk=draft.pk).values().get() == before
        and not FlowVersion.objects.exists()
        and (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT
    )


@pytest.mark.parametrize("forge", FORGED.values(), ids=FORGED.keys())
def test_a_post_without_a_csrf_token_changes_nothing(
    live_flows: Path, lead: User, forge: Callable[[Draft], tuple[str, dict[str, Any]]]
) -> None:
    """A page elsewhere that makes a signed-in lead's browser post a decision (the cookie
    goes along, the token cannot): refused, whichever way of deciding it forges."""
    draft = submit(REFUND_CHANGE)
    before = Draft.objects.filter(pk=draft.pk).values().get()
    url, data = forge(draft)
    response = client_for(lead, csrf=True).post(url, data)
    assert response.status_code == 403
    assert unchanged(draft, before, live_flows)


@pytest.mark.parametrize("forge", FORGED.values(), ids=FORGED.keys())
def test_a_post_from_another_origin_is_refused_even_with_a_token(
    live_flows: Path, lead: User, forge: Callable[[Draft], tuple[str, dict[str, Any]]]
) -> None:
    """A token that leaked does not help another site: the browser's Origin gives it away."""
    draft = submit(REFUND_CHANGE)
    before = Draft.objects.filter(pk=draft.pk).values().get()
    client = client_for(lead, csrf=True)
    token = client.get(page(draft)).cookies["csrftoken"].value
    url, data = forge(draft)
    response = client.post(
        url, {"csrfmiddlewaretoken": token, **data}, headers={"Origin": "https://evil.example"}
    )
    assert response.status_code == 403
    assert unchanged(draft, before, live_flows)


@pytest.mark.parametrize("forge", FORGED.values(), ids=FORGED.keys())
def test_a_reader_with_a_valid_token_still_cannot_decide(
    live_flows: Path, reader: User, forge: Callable[[Draft], tuple[str, dict[str, Any]]]
) -> None:
    """A forged POST that passes CSRF (the reader's own session and token) still needs the
    permission: the decision views and actions check it themselves."""
    draft = submit(REFUND_CHANGE)
    before = Draft.objects.filter(pk=draft.pk).values().get()
    client = client_for(reader, csrf=True)
    token = client.get(page(draft)).cookies["csrftoken"].value
    url, data = forge(draft)
    response = client.post(url, {"csrfmiddlewaretoken": token, **data})
    assert response.status_code in (200, 302, 403)
    assert unchanged(draft, before, live_flows)
    assert not any(level == "success" for level, _ in messages_of(response))


def test_approve_and_discard_refuse_a_get(live_flows: Path, lead: User) -> None:
    draft = submit(REFUND_CHANGE)
    before = Draft.objects.filter(pk=draft.pk).values().get()
    client = client_for(lead)
    assert client.get(decide(draft, "approve"), {"confirm_broken_tests": "yes"}).status_code == 405
    assert client.get(decide(draft, "discard"), {"reason": "x"}).status_code == 405
    assert client.head(decide(draft, "approve")).status_code == 405
    # The list's actions are POST only too: the same fields in a GET only filter the list.
    client.get(LIST, {"action": "approve_selected", "_selected_action": [draft.pk]})
    assert unchanged(draft, before, live_flows)


def test_nobody_logged_in_is_sent_to_the_login_page(live_flows: Path) -> None:
    draft = submit(REFUND_CHANGE)
    response = Client().post(decide(draft, "approve"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert status_of(draft) == "pending"


# --- list actions -------------------------------------------------------------------------


def test_the_approve_action_acts_on_pending_drafts_only_and_reports_each_row(
    live_flows: Path, lead: User
) -> None:
    clean = submit(REFUND_REWORDED)
    broken = submit(new_flow("gift_card", target="n_nowhere"))
    decided = submit(new_flow("loyalty_points"))
    draft_discard(draft=decided, discarded_by="maria", reason="no")
    response = client_for(lead).post(
        LIST,
        {"action": "approve_selected", "_selected_action": [clean.pk, broken.pk, decided.pk]},
    )
    assert response.status_code == 302
    assert [status_of(d) for d in (clean, broken, decided)] == ["approved", "pending", "discarded"]
    reported = messages_of(response)
    assert (
        "warning",
        f"Left {decided.public_id} (loyalty_points) as it is: it is discarded, not pending.",
    ) in reported
    assert any(
        level == "error" and broken.public_id in text and "bad_target" in text
        for level, text in reported
    )
    assert any(level == "success" and clean.public_id in text for level, text in reported)
    assert len(reported) == 3


def test_the_discard_action_asks_for_a_reason_then_discards_each_pending_draft(
    live_flows: Path, lead: User
) -> None:
    first = submit(REFUND_CHANGE)
    second = submit(new_flow("gift_card"))
    client = client_for(lead)
    ids = [first.pk, second.pk]
    asked = client.post(LIST, {"action": "discard_selected", "_selected_action": ids})
    assert asked.status_code == 200
    html = asked.content.decode()
    assert 'name="reason"' in html and first.public_id in html and second.public_id in html
    assert [status_of(d) for d in (first, second)] == ["pending", "pending"]
    done = client.post(
        LIST,
        {
            "action": "discard_selected",
            "_selected_action": ids,
            "confirm": "yes",
            "reason": "stale",
        },
    )
    assert done.status_code == 302
    assert list(Draft.objects.filter(pk__in=ids).values_list("status", "decision_reason")) == [
        ("discarded", "stale"),
        ("discarded", "stale"),
    ]
    assert len([m for m in messages_of(done) if m[0] == "success"]) == 2


# --- live flows and their history ---------------------------------------------------------


def test_the_live_flows_page_lists_every_live_flow_with_its_facts(
    live_flows: Path, reader: User
) -> None:
    from access_app.callers import Caller
    from runs_app import agent_steps

    for _ in range(2):
        agent_steps.run_start(caller=Caller(key="k"), flow_id=REFUND, values=None, ref=None)
    html = client_for(reader).get("/admin/flows_app/liveflow/").content.decode()
    row = re.search(rf'<tr id="flow-{REFUND}">(.*?)</tr>', html, re.S)
    assert row is not None
    cells = [
        re.sub(r"<.*?>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", row.group(1), re.S)
    ]
    assert cells[:7] == [
        REFUND,
        "Customer asks for a refund",
        "決済",
        "2024.3",
        content_hash(REFUND_TEXT)[:12],
        "19",
        "2",
    ]
    assert cells[7] == "no review on record"
    assert len(re.findall(r'<tr id="flow-', html)) == 6


def test_a_flow_history_lists_each_version_with_its_approval_and_diffs_consecutive_ones(
    live_flows: Path, reader: User
) -> None:
    from access_app.callers import Caller
    from runs_app import agent_steps

    agent_steps.run_start(caller=Caller(key="k"), flow_id=REFUND, values=None, ref=None)
    draft = submit(REFUND_CHANGE)
    approved = draft_approve(draft=draft, approved_by="maria", confirm_broken_tests=True)
    client = client_for(reader)
    history = list_rows(
        client.get("/admin/flows_app/flowversion/", {"flow_id__exact": REFUND}).content.decode()
    )
    seen = [(r["version"], r["approved_by"], r["from_draft"], r["runs_served"]) for r in history]
    assert seen == [("2024.4", "maria", draft.public_id, "0"), ("2024.3", "-", "—", "1")]
    version_page = client.get(
        reverse("admin:flows_app_flowversion_change", args=[approved.pk])
    ).content.decode()
    assert "Changes from the revision it replaced" in version_page
    assert "n_reason accepts a new label &#x27;price_dropped&#x27;" in version_page
    assert "      price_dropped: n_price_match" in version_page
    assert "by maria" in version_page


def test_the_flow_versions_list_costs_the_same_queries_for_1_and_20_versions(
    live_flows: Path, reader: User
) -> None:
    client = client_for(reader)

    def queries_for_list() -> int:
        client.get("/admin/flows_app/flowversion/")
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/admin/flows_app/flowversion/").status_code == 200
        return len(captured.captured_queries)

    draft_approve(draft=submit(new_flow("flow_0")), approved_by="maria")
    one = queries_for_list()
    for i in range(1, 20):
        draft_approve(draft=submit(new_flow(f"flow_{i}")), approved_by="maria")
    assert FlowVersion.objects.count() == 20
    assert queries_for_list() == one


# --- submitting a draft as a person ---------------------------------------------------------


def test_a_lead_submits_a_draft_in_the_admin_recorded_as_a_user(
    live_flows: Path, lead: User
) -> None:
    response = client_for(lead).post("/admin/flows_app/draft/add/", {"yaml": REFUND_CHANGE})
    draft = Draft.objects.get()
    assert response.status_code == 302 and response["Location"] == page(draft)
    assert (draft.submitted_via, draft.submitted_by, draft.status) == ("user", "maria", "pending")
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT


def test_text_the_intake_refuses_is_shown_back_with_the_reason_and_stored_nowhere(
    live_flows: Path, lead: User
) -> None:
    response = client_for(lead).post("/admin/flows_app/draft/add/", {"yaml": "title: x\n"})
    assert response.status_code == 200
    assert "Refused: the flow has no &#x27;id&#x27;" in response.content.decode()
    assert not Draft.objects.exists()


def test_a_reader_cannot_submit_a_draft(live_flows: Path, reader: User) -> None:
    client = client_for(reader)
    assert client.get("/admin/flows_app/draft/add/").status_code == 403
    assert client.post("/admin/flows_app/draft/add/", {"yaml": REFUND_CHANGE}).status_code == 403
    assert not Draft.objects.exists()


# --- a decided draft keeps what it changed (ADR 0068) -----------------------------------------


def test_an_approved_change_still_shows_what_it_changed_against_the_revision_it_replaced(
    live_flows: Path, lead: User
) -> None:
    draft = submit(REFUND_CHANGE)
    draft_approve(draft=draft, approved_by="maria", confirm_broken_tests=True)
    replaced = FlowVersion.objects.get(content_hash=content_hash(REFUND_TEXT))
    html = client_for(lead).get(page(draft)).content.decode()
    facts = text_of(section(html, "facts"))
    assert f"{REFUND} — change (it replaced version 2024.3, revision {replaced.revision} )" in facts
    changes = text_of(section(html, "changes"))
    assert changes.startswith(
        f"What changed for agents Compared with the revision it replaced: version 2024.3, "
        f"revision {replaced.revision} ."
    )
    assert "n_reason accepts a new label 'price_dropped'" in changes
    assert "exactly the live" not in html
    diff = section(html, "diff")
    assert "Line diff against the revision it replaced" in diff
    assert '<tr class="add">' in diff and "price_dropped: n_price_match" in diff
    # The list says what it was at approval, not what it is against the live flow now.
    rows = list_rows(client_for(lead).get(LIST).content.decode())
    assert [(r["flow_link"], r["kind"], r["status"]) for r in rows] == [
        (REFUND, "change", "Approved")
    ]


def test_a_draft_approved_before_the_replaced_revision_was_recorded_says_so(
    live_flows: Path, lead: User
) -> None:
    draft = submit(REFUND_CHANGE)
    draft_approve(draft=draft, approved_by="maria", confirm_broken_tests=True)
    # As a draft approved before migration flows_app/0008 reads.
    Draft.objects.filter(pk=draft.pk).update(live_at_decision=None, live_at_decision_recorded=False)
    html = client_for(lead).get(page(draft)).content.decode()
    assert text_of(section(html, "changes")).startswith(
        "What changed for agents The revision it replaced was not recorded: the draft was "
        "approved before guidepost kept it with each decision."
    )
    assert 'id="diff"' not in html and "exactly the live" not in html
    assert [r["kind"] for r in list_rows(client_for(lead).get(LIST).content.decode())] == [
        "not recorded"
    ]


def test_a_discarded_draft_is_compared_with_the_flow_live_when_it_was_discarded(
    live_flows: Path, lead: User
) -> None:
    draft = submit(REFUND_CHANGE)
    draft_discard(draft=draft, discarded_by="maria", reason="not this week")
    # Later the live flow becomes exactly the discarded text (placed by hand).
    (live_flows / f"{REFUND}.yaml").write_text(REFUND_CHANGE, encoding="utf-8")
    html = client_for(lead).get(page(draft)).content.decode()
    changes = text_of(section(html, "changes"))
    assert changes.startswith(
        "What would have changed for agents Compared with the revision live when it was "
        "discarded: version 2024.3"
    )
    assert "n_reason accepts a new label 'price_dropped'" in changes
    assert "Line diff against the revision live when it was discarded" in html


def test_a_revision_page_diffs_against_the_revision_its_draft_replaced(
    live_flows: Path, reader: User
) -> None:
    first = draft_approve(draft=submit(REFUND_REWORDED), approved_by="maria")
    # A revision recorded in between (a run pinned a hand-placed file) is not what it replaced.
    second = draft_approve(draft=submit(REFUND_TEXT), approved_by="maria")
    html = (
        client_for(reader)
        .get(reverse("admin:flows_app_flowversion_change", args=[second.pk]))
        .content.decode()
    )
    assert text_of(section(html, "diff")).startswith(
        f"Changes from the revision it replaced ( version 2024.4, revision {first.revision} )"
    )


# --- words ---------------------------------------------------------------------------------


def test_a_pending_change_names_the_live_flow_by_version_and_revision(
    live_flows: Path, reader: User
) -> None:
    html = client_for(reader).get(page(submit(REFUND_CHANGE))).content.decode()
    assert (
        f"{REFUND} — change (live now: version 2024.3, revision {content_hash(REFUND_TEXT)[:12]})"
        in text_of(section(html, "facts"))
    )


def test_a_guarantee_naming_what_the_draft_lacks_reads_not_checked_and_never_broken(
    live_flows: Path, reader: User
) -> None:
    tests_file = live_flows / "tests" / f"{REFUND}.yaml"
    tests_file.write_text(
        tests_file.read_text(encoding="utf-8")
        + "  - name: a price match needs the order\n"
        + "    every_path_to: [price_matched]\n    passes: n_order\n",
        encoding="utf-8",
    )
    html = client_for(reader).get(page(submit(REFUND_REWORDED))).content.decode()
    guarantee = text_of(html[html.index('id="guarantee-1"') : html.index('id="diff"')])
    assert "Guarantee “a price match needs the order”" in guarantee
    assert "not checked, so it counts as broken: it names what this draft does not have" in (
        guarantee
    )
    assert "broken." not in guarantee and "by this path" not in guarantee


# A scenario name that the old "a, b and c" joining cut in two.
COMMAS = "price dropped, late, store credit"


def test_a_scenario_name_holding_commas_is_quoted_whole_on_the_page(
    live_flows: Path, reader: User
) -> None:
    add_broken_scenario_copy(live_flows / "tests" / f"{REFUND}.yaml", COMMAS)
    html = client_for(reader).get(page(submit(REFUND_CHANGE))).content.decode()
    verdict = text_of(section(html, "tests"))
    assert (f"fails 2 of 18 scenarios ('{BROKEN_SCENARIO}', '{COMMAS}')") in verdict
    assert "late and store credit" not in html


# --- the buttons -----------------------------------------------------------------------------


def test_a_draft_with_lint_errors_shows_approve_disabled_with_the_reason_beside_it(
    live_flows: Path, lead: User
) -> None:
    html = client_for(lead).get(page(submit(BROKEN_CHANGE))).content.decode()
    decision = section(html, "decision")
    button = re.search(r'<button type="submit" id="approve"[^>]*>', decision)
    assert button is not None
    assert " disabled" in button.group(0) and 'aria-describedby="approve-blocked"' in button.group(
        0
    )
    assert text_of(decision).startswith(
        "Decision Approve and publish Cannot be approved: the draft has 1 lint error "
        "( beside their lines )."
    )
    assert 'id="discard"' in decision  # discarding it stays possible
    clean = client_for(lead).get(page(submit(REFUND_REWORDED))).content.decode()
    assert "approve-blocked" not in clean and " disabled" not in section(clean, "decision")


def test_approving_when_the_flow_file_cannot_be_written_shows_a_message_and_changes_nothing(
    live_flows: Path, lead: User
) -> None:
    draft = submit(new_flow("gift_card"))
    with blocked_flow_path(live_flows, "gift_card"):
        response = client_for(lead).post(decide(draft, "approve"))
        assert response.status_code == 302 and response["Location"] == page(draft)
        [(level, text)] = messages_of(response)
    assert level == "error"
    assert text.startswith(
        f"Not approved {draft.public_id} (gift_card): {live_flows}/gift_card.yaml could not be "
        "written (Is a directory)."
    )
    assert status_of(draft) == "pending" and not FlowVersion.objects.exists()
    assert not [p for p in live_flows.iterdir() if p.name.startswith(".gift_card")]
