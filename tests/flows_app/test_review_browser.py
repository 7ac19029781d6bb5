"""A support lead reviews and approves a change in a real browser, against a real server.

Headless Debian chromium driven by Playwright: log in, open the pending change an
agent submitted over MCP, read its changes, diff and diagram, and what it breaks of
the live tests (a scenario, and a guarantee with its counterexample); approve it,
which takes ticking the confirmation; then ``guide_flows`` (over MCP) serves the new
version, while a run started before finishes on the old one. A draft that raises a
check's threshold is read in words (the condition before and after), seen on the diagram
and approved; a run then takes the check's new branch. The pages are
photographed on the way (set GUIDEPOST_SCREENSHOTS_DIR=docs/img to refresh the
pictures in docs/review.md). Nothing here depends on the admin's styling.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.support.browser import Person, add_person, screenshot, signed_in
from tests.support.browser import mcp_call as mcp
from tests.support.drafting import (
    BROKEN_BY_THRESHOLD,
    BROKEN_GUARANTEE,
    BROKEN_SCENARIO,
    REFUND,
    REFUND_CHANGE_WITHOUT_HANDOVER,
    REFUND_THRESHOLD_RAISED,
)
from tests.support.servers import Server, serving
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

LEAD = Person("maria", "a-long-review-passphrase")
LIST = "/admin/flows_app/draft/"
ORDER = {"order_number": "A00118"}
# Waiting for the new version is bounded: at most WAIT seconds, PAUSE seconds apart.
WAIT, PAUSE = 10.0, 0.1
SCREEN = {"width": 1280, "height": 900}


@pytest.fixture
def server(tmp_path: Path, flows_copy: Path) -> Iterator[Server]:
    with serving(tmp_path, flows_dir=flows_copy) as running:
        database_url = running.database_url
        add_person(database_url, LEAD, "Support lead")
        yield running


def test_a_support_lead_reads_what_a_change_breaks_approves_it_confirmed_and_agents_get_it(
    browser: Browser, server: Server, tmp_path: Path
) -> None:
    before = mcp(server, "guide_start", flow_id=REFUND, values=ORDER)
    drafted = mcp(server, "guide_draft", yaml=REFUND_CHANGE_WITHOUT_HANDOVER)
    assert drafted["ok"] is True

    with signed_in(browser, server, LEAD, path=LIST, viewport=SCREEN) as page:
        # The admin's navigation sidebar folded away (it remembers): the pictures show the pages.
        page.click("#toggle-nav-sidebar")
        row = page.locator("#result_list tbody tr", has_text=REFUND)
        expect(row).to_have_count(1)
        expect(row.locator(".field-kind")).to_have_text("change")
        expect(row.locator(".field-lint")).to_have_text("ok")
        expect(row.locator(".field-tests")).to_have_text("2 broken")
        expect(row.locator(".field-status")).to_have_text("Pending")
        screenshot(page, "review-list.png", tmp_path, full_page=True)

        row.get_by_role("link", name=REFUND).click()
        expect(page.locator("#draft-state")).to_have_text("pending")
        changes = page.locator("#changes")
        expect(changes).to_contain_text("n_reason accepts a new label 'price_dropped'")
        expect(changes).to_contain_text("outcome 'price_matched' is new")
        diff = page.locator("#diff")
        expect(diff.locator("tr.add", has_text="price_dropped: n_price_match")).to_have_count(1)
        expect(diff.locator("tr.del", has_text='version: "2024.3"')).to_have_count(1)
        diagram = page.locator("#diagram svg.gp-diagram").first
        expect(diagram).to_be_visible()
        expect(diagram.locator("#node-n_price_match")).to_contain_text("new")
        expect(page.locator("#source tr#L1 td.src")).to_have_text("id: refund_request")
        # What the draft breaks of the live tests: the scenario's failing call, expected and
        # got; the guarantee and the path that breaks it.
        tests = page.locator("#tests")
        expect(page.locator("#tests-now")).to_contain_text("2 broken")
        scenario = tests.locator(".gp-broken-test", has_text=BROKEN_SCENARIO)
        expect(scenario).to_contain_text("call 1: answer: price_dropped")
        expect(scenario).to_contain_text("node: expected n_agent_review, got n_price_match")
        guarantee = tests.locator(".gp-broken-test", has_text=BROKEN_GUARANTEE)
        expect(guarantee.locator(".gp-counterexample")).to_contain_text(
            "n_order  stalled (escalate)"
        )
        expect(tests).to_contain_text(f"tests/{REFUND}.yaml stays as it is")
        screenshot(page, "review-draft.png", tmp_path, full_page=True)
        screenshot(tests, "review-tests.png", tmp_path)

        # Approving without the confirmation does not go through: the checkbox is required.
        confirm = page.locator("#confirm-broken-tests")
        expect(confirm).not_to_be_checked()
        page.click("#approve")
        assert confirm.evaluate("box => box.validity.valueMissing") is True
        expect(page.locator("#draft-state")).to_have_text("pending")
        expect(page.locator(".messagelist")).to_have_count(0)
        confirm.check()
        screenshot(page.locator("#decision"), "review-confirm.png", tmp_path)
        page.click("#approve")
        expect(page.locator("#draft-state")).to_have_text("approved")
        expect(page.locator(".messagelist")).to_contain_text(f"Approved {drafted['draft_id']}: ")
        expect(page.locator(".messagelist")).to_contain_text("as you confirmed")
        expect(page.locator("#approve")).to_have_count(0)
        expect(page.locator("#tests-recorded")).to_contain_text("2 broken — approved anyway")
        expect(page.locator("#tests")).to_contain_text(f"{LEAD.name} confirmed approving it anyway")

        def served_version() -> str:
            listed = mcp(server, "guide_flows", category="payments")
            return str({f["id"]: f.get("version") for f in listed["flows"]}[REFUND])

        wait_until(
            lambda: served_version() == "2024.4",
            WAIT,
            PAUSE,
            message=lambda: "guide_flows never served the approved version\n" + server.output(),
        )
        new = mcp(server, "guide_start", flow_id=REFUND, values=ORDER)
        assert "price_dropped" in new["node"]["accepts"]
        old = mcp(server, "guide_answer", run_id=before["run_id"], choice="changed_mind")
        old = mcp(server, "guide_answer", run_id=old["run_id"], choice="yes")
        old = mcp(server, "guide_answer", run_id=old["run_id"], choice="yes")
        done = mcp(
            server,
            "guide_answer",
            run_id=old["run_id"],
            choice="original",
            values={"refund_amount": "50"},
        )
        assert (done["status"], done["outcome"]) == ("completed", "refunded")
        status = mcp(server, "guide_status", run_id=before["run_id"])
        assert status["flow"]["version"] == "2024.3"

        # The flow's history now holds both revisions, the new one approved from the draft.
        page.goto(server.base + "/admin/flows_app/liveflow/")
        live = page.locator(f"#flow-{REFUND}")
        expect(live).to_contain_text("2024.4")
        expect(live).to_contain_text(f"by {LEAD.name}")
        live.get_by_role("link", name="revisions").click()
        versions = page.locator("#result_list tbody tr")
        expect(versions).to_have_count(2)
        expect(versions.first.locator(".field-approved_by")).to_have_text(LEAD.name)
        expect(versions.first.locator(".field-from_draft")).to_have_text(drafted["draft_id"])
        versions.first.locator(".field-version_link a").click()
        expect(page.locator("#diff")).to_contain_text(
            "n_reason accepts a new label 'price_dropped'"
        )
        screenshot(page, "review-history.png", tmp_path, full_page=True)


def test_a_lead_approves_a_raised_check_threshold_read_in_words_and_runs_take_the_new_branch(
    browser: Browser, server: Server, tmp_path: Path
) -> None:
    drafted = mcp(server, "guide_draft", yaml=REFUND_THRESHOLD_RAISED)
    assert drafted["ok"] is True

    with signed_in(browser, server, LEAD, path=LIST, viewport=SCREEN) as page:
        page.click("#toggle-nav-sidebar")
        row = page.locator("#result_list tbody tr", has_text=REFUND)
        expect(row.locator(".field-tests")).to_have_text("1 broken")
        row.get_by_role("link", name=REFUND).click()
        expect(page.locator("#draft-state")).to_have_text("pending")
        # The changed condition in words, the new threshold and the old one.
        expect(page.locator("#changes")).to_contain_text(
            "n_amount_check: when refund_amount > 200.0 the run now goes to n_supervisor; "
            "before: when refund_amount > 100.0, to n_supervisor"
        )
        diff = page.locator("#diff")
        expect(diff.locator("tr.add", has_text="if: refund_amount > 200.0")).to_have_count(1)
        expect(diff.locator("tr.del", has_text="if: refund_amount > 100.0")).to_have_count(1)
        diagram = page.locator("#diagram svg.gp-diagram").first
        check = diagram.locator("#node-n_amount_check")
        expect(check).to_be_visible()
        expect(check).to_have_class(re.compile(r"\bkind-check\b.*\bmark-changed\b"))
        expect(check).to_contain_text("changed")
        to_supervisor = diagram.locator('.edge[data-from="n_amount_check"][data-to="n_supervisor"]')
        expect(to_supervisor).to_have_attribute("data-label", "refund_amount > 200.0")
        # 129.90 euros no longer goes to a supervisor: the live scenario that says so breaks.
        expect(page.locator("#tests-now")).to_contain_text("1 broken")
        scenario = page.locator("#tests .gp-broken-test", has_text=BROKEN_BY_THRESHOLD)
        expect(scenario).to_contain_text("node: expected n_supervisor, got n_refunded")
        # What the lead reads (the changes, what breaks, the diff) and the check on the diagram.
        screenshot(page, "review-check-draft.png", tmp_path)
        screenshot(page.locator("#diagram"), "review-check-diagram.png", tmp_path)

        page.locator("#confirm-broken-tests").check()
        page.click("#approve")
        expect(page.locator("#draft-state")).to_have_text("approved")
        expect(page.locator(".messagelist")).to_contain_text(f"Approved {drafted['draft_id']}: ")

    def served_version() -> str:
        listed = mcp(server, "guide_flows", category="payments")
        return str({f["id"]: f.get("version") for f in listed["flows"]}[REFUND])

    wait_until(
        lambda: served_version() == "2024.4",
        WAIT,
        PAUSE,
        message=lambda: "guide_flows never served the approved version\n" + server.output(),
    )
    # 150 euros back to the card: under the new threshold, so no supervisor.
    run = mcp(server, "guide_start", flow_id=REFUND, values=ORDER)
    run = mcp(server, "guide_answer", run_id=run["run_id"], choice="damaged")
    run = mcp(server, "guide_answer", run_id=run["run_id"], choice="yes")
    done = mcp(
        server,
        "guide_answer",
        run_id=run["run_id"],
        choice="original",
        values={"refund_amount": "150.0"},
    )
    assert (done["status"], done["outcome"], done["node"]["id"]) == (
        "completed",
        "refunded",
        "n_refunded",
    )
    assert [(c["id"], c["took"], c["next"]) for c in done["checked"]] == [
        ("n_amount_check", "else", "n_refund_timeline")
    ]
    status = mcp(server, "guide_status", run_id=run["run_id"])
    assert status["flow"]["version"] == "2024.4"
    assert [step["id"] for step in status["path"]][-2:] == ["n_amount_check", "n_refund_timeline"]
