"""Every page under the Content-Security-Policy, in a real browser: nothing is refused.

Headless Debian chromium (Playwright) against a real server (uvicorn, tests/support/servers.py).
Each tab reports every ``securitypolicyviolation`` event and every console error or
script error to the test, through a binding Playwright installs before any page script
runs (so the page's own policy cannot silence it). The pages must keep working under the
policy: the run page follows a run live, the draft page draws its diagram with its
nonce'd stylesheet and requires its checkbox, the admin's own scripts run, and the API
docs load. A first test proves the collector hears a violation at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.support.browser import Person, add_person, sign_in
from tests.support.browser import mcp_call as mcp
from tests.support.drafting import REFUND, REFUND_CHANGE_WITHOUT_HANDOVER
from tests.support.servers import Server, serving

pytestmark = pytest.mark.slow

ADMIN = Person("root", "csp-browser-pass-31")
UPDATE_WITHIN_MS = 2000

# Installed in every document before its own scripts; reports through the binding.
LISTEN = """
document.addEventListener("securitypolicyviolation", (e) => {
  window.reportViolation(
    `${e.effectiveDirective} blocked ${e.blockedURI || "inline"} at ${e.documentURI}`
  );
});
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A real server with a superuser. Keys stay off (loopback, GUIDEPOST_AUTH=off), so the
    agent key the admin test creates does not lock out this module's MCP client."""
    tmp = tmp_path_factory.mktemp("csp")
    with serving(tmp, env={"GUIDEPOST_AUTH": "off"}) as running:
        database_url = running.database_url
        add_person(database_url, ADMIN, superuser=True)
        yield running


class Reports:
    """What a tab reported: policy violations, and console or script errors."""

    def __init__(self) -> None:
        self.violations: list[str] = []
        self.errors: list[str] = []
        self.policies: dict[str, str] = {}

    def watch(self, context: BrowserContext, tab: Page) -> None:
        context.expose_binding(
            "reportViolation", lambda _source, text: self.violations.append(text)
        )
        context.add_init_script(LISTEN)
        tab.on("pageerror", lambda error: self.errors.append(str(error)))
        tab.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        tab.on("response", self._response)

    def _response(self, response: Any) -> None:
        if response.request.resource_type == "document":
            self.policies[response.url] = response.headers.get("content-security-policy", "")


@pytest.fixture
def reports() -> Reports:
    return Reports()


@pytest.fixture
def tab(browser: Browser, server: Server, reports: Reports) -> Iterator[Page]:
    """A signed-in superuser's tab; after the test, no page may have reported anything."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    reports.watch(context, page)
    sign_in(page, server, ADMIN, "/admin/")
    yield page
    context.close()
    assert reports.violations == []
    assert reports.errors == []
    # Every document the tab opened came with the policy (else nothing was proven).
    assert reports.policies and all(
        "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
        for policy in reports.policies.values()
    ), reports.policies


def settle(page: Page) -> None:
    """Let late work (deferred scripts, images, fonts) run before the next page."""
    page.wait_for_load_state("networkidle")


# --- the tests ------------------------------------------------------------------------------


def test_an_inline_script_is_refused_and_the_refusal_is_heard(
    browser: Browser, server: Server, reports: Reports
) -> None:
    """The collector works and the policy bites: a script an attacker got into the page
    (here added by the DOM) does not run, and a violation is reported."""
    context = browser.new_context()
    page = context.new_page()
    reports.watch(context, page)
    page.goto(server.base + "/admin/login/")
    page.evaluate(
        "() => { const s = document.createElement('script');"
        " s.textContent = 'window.injected = true'; document.body.appendChild(s); }"
    )
    settle(page)
    assert page.evaluate("() => window.injected === undefined")
    context.close()
    assert any(v.startswith("script-src") for v in reports.violations), reports.violations


def test_the_run_pages_follow_a_run_live_under_the_policy(tab: Page, server: Server) -> None:
    started = mcp(
        server,
        "guide_start",
        flow_id="refund_request",
        values={"order_number": "A00118"},
        ref="TICKET-7001",
    )
    run_id = started["run_id"]
    tab.goto(server.base + "/")
    expect(tab.locator(f'tr[data-run="{run_id}"]')).to_have_count(1)
    # The admin's theme.js runs on the pages too, and its toggle works.
    theme = tab.evaluate("() => document.documentElement.dataset.theme")
    tab.click("header button.theme-toggle")
    assert tab.evaluate("() => document.documentElement.dataset.theme") not in (theme, None)
    settle(tab)
    tab.goto(f"{server.base}/r/{run_id}")
    tab.wait_for_function("() => window.guidepostLive && window.guidepostLive.polls > 0")
    mcp(server, "guide_answer", run_id=run_id, choice="damaged")
    tab.wait_for_function(
        "() => document.getElementById('node-n_photos').getAttribute('class')"
        ".includes('state-current')",
        timeout=UPDATE_WITHIN_MS,
    )
    expect(tab.locator("#timeline li.step")).to_have_count(2)
    tab.click("button[data-zoom=fit]")  # the diagram's controls are pages.js's
    settle(tab)
    tab.goto(server.base + "/f/")
    settle(tab)
    tab.goto(server.base + "/f/refund_request")
    expect(tab.locator("#node-n_order text.note")).to_contain_text("1 run")
    tab.focus("#diagram")  # the diagram's keys are pages.js's
    tab.keyboard.press("+")
    expect(tab.locator("#zoom-level")).to_have_text("125%")
    settle(tab)
    tab.goto(server.base + "/api/docs")
    expect(tab.locator(".opblock-summary-path").first).to_be_visible()
    settle(tab)


def test_the_draft_page_draws_its_diagram_and_requires_its_checkbox_under_the_policy(
    tab: Page, server: Server
) -> None:
    drafted = mcp(server, "guide_draft", yaml=REFUND_CHANGE_WITHOUT_HANDOVER)
    tab.goto(server.base + "/admin/flows_app/draft/")
    row = tab.locator("#result_list tbody tr", has_text=REFUND)
    row.get_by_role("link", name=REFUND).click()
    diagram = tab.locator("#diagram svg.gp-diagram").first
    expect(diagram).to_be_visible()
    # Both inline stylesheets applied, by their nonce: the review page's and the diagram's.
    facts = tab.locator(".gp-facts th").first.evaluate("e => getComputedStyle(e).whiteSpace")
    assert facts == "nowrap"
    node_id = diagram.locator("text.nid").first.evaluate("e => getComputedStyle(e).fontWeight")
    assert node_id == "700"
    confirm = tab.locator("#confirm-broken-tests")
    tab.click("#approve")
    assert confirm.evaluate("box => box.validity.valueMissing") is True
    expect(tab.locator("#draft-state")).to_have_text("pending")
    confirm.check()
    tab.click("#approve")
    expect(tab.locator("#draft-state")).to_have_text("approved")
    expect(tab.locator(".messagelist")).to_contain_text(f"Approved {drafted['draft_id']}")
    settle(tab)
    tab.goto(server.base + "/admin/flows_app/liveflow/")
    tab.locator(f"#flow-{REFUND}").get_by_role("link", name="revisions").click()
    tab.locator("#result_list tbody tr").first.locator(".field-version_link a").click()
    expect(tab.locator("#diff")).to_be_visible()
    settle(tab)


def test_the_admin_and_its_scripts_work_under_the_policy(tab: Page, server: Server) -> None:
    run = mcp(server, "guide_start", flow_id="refund_request", ref="TICKET-7002")
    mcp(server, "guide_close", run_id=run["run_id"], reason="a colleague took over")
    # The admin's own scripts run: theme.js switches the theme, nav_sidebar.js folds the
    # sidebar away, actions.js counts the rows ticked.
    theme = tab.evaluate("() => document.documentElement.dataset.theme")
    tab.click("button.theme-toggle")
    assert tab.evaluate("() => document.documentElement.dataset.theme") != theme
    tab.goto(server.base + "/admin/runs_app/run/")
    sidebar = tab.locator("#nav-sidebar")
    expect(sidebar).to_be_visible()
    tab.click("#toggle-nav-sidebar")
    expect(sidebar).to_be_hidden()
    tab.click("#toggle-nav-sidebar")
    expect(sidebar).to_be_visible()
    tab.click("#action-toggle")
    expect(tab.locator(".action-counter")).to_contain_text("selected")
    settle(tab)
    tab.goto(server.base + "/admin/runs_app/run/")
    tab.get_by_role("link", name=run["run_id"]).click()
    expect(tab.locator("body")).to_contain_text("a colleague took over")
    settle(tab)
    tab.goto(server.base + "/admin/access_app/auditrecord/")
    expect(tab.locator("#result_list tbody tr").first).to_be_visible()
    settle(tab)
    tab.goto(server.base + "/admin/auth/user/add/")
    settle(tab)
    tab.goto(server.base + "/admin/access_app/agentkey/add/")
    tab.fill("#id_name", "csp-bot")
    tab.click("input[name=_save]")
    expect(tab.locator("#agent-key")).to_contain_text("gpk_")
    settle(tab)
