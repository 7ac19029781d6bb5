"""Resolving a stalled run end to end: an agent stalls a run over MCP (a real client, a real
server), a support lead finds it in the inbox, takes it on and answers it on the run's
page by keyboard; the page follows the run by itself; the agent's guide_status shows the
person's node on its path and the agent completes the run.

Screenshots of the inbox and of the resolve form, at 1,400 and 390 px wide, in the light
and the dark theme (``inbox``, ``resolve-form``; ``-390``, ``-dark``), kept in docs/img/
with ``GUIDEPOST_SCREENSHOTS_DIR=docs/img``. Needs chromium (``CI=1`` makes its absence a
failure).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
from playwright.sync_api import Browser, expect

from tests.support.browser import (
    PHONE,
    WIDE,
    Person,
    add_person,
    overflow,
    screenshot,
    screenshot_suffix,
    signed_in,
)
from tests.support.browser import mcp_call as mcp
from tests.support.contrast import low_contrast
from tests.support.servers import Server, serving

pytestmark = pytest.mark.slow

LEAD = Person("lead", "lead-browser-pass-31")
UPDATE_WITHIN_MS = 3000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("resolve")
    with serving(tmp) as running:
        database_url = running.database_url
        add_person(database_url, LEAD, "Support lead")
        yield running


def stalled_at_reason(server: Server, ref: str) -> str:
    started = mcp(
        server, "guide_start", flow_id="refund_request", values={"order_number": "A00118"}, ref=ref
    )
    stalled = mcp(server, "guide_answer", run_id=started["run_id"], choice="__unknown__")
    assert stalled["status"] == "stalled"
    return str(started["run_id"])


def test_a_support_lead_resolves_a_stalled_run_and_the_agent_completes_it(
    browser: Browser, server: Server
) -> None:
    run_id = stalled_at_reason(server, "TICKET-7001")

    with signed_in(browser, server, LEAD) as tab:
        # The inbox: the run waits for a person, with its hand-over note.
        row = tab.locator(f'tr.run-row[data-run="{run_id}"]')
        expect(row).to_contain_text("needs a human")
        expect(row).to_contain_text("The refund could not be decided by the procedure")
        row.get_by_role("button", name=f"Take {run_id} on").click()
        expect(tab.locator(".message.success")).to_contain_text(f"You took {run_id} on")
        expect(row).to_contain_text("taken by lead (you)")
        tab.click("text=Taken by me")
        expect(tab.locator("tr.run-row")).to_have_count(1)

        # The run's page: answer n_reason by keyboard.
        row.get_by_role("link", name=run_id).click()
        tab.wait_for_url(f"{server.base}/r/{run_id}")
        tab.wait_for_function("() => window.guidepostLive && window.guidepostLive.polls > 0")
        expect(tab.locator("#run-resolve")).to_contain_text("Taken by lead (you)")
        tab.focus('input[name="choice"][value="damaged"]')
        tab.keyboard.press("Space")
        tab.keyboard.press("Tab")  # out of the radio group, to the note
        tab.keyboard.type("Customer sent a photo of the cracked case by email.")
        tab.keyboard.press("Tab")
        tab.keyboard.press("Enter")  # the answer button
        tab.wait_for_url(f"{server.base}/r/{run_id}")
        expect(tab.locator(".message.success")).to_contain_text("The run is active at n_photos")
        expect(tab.locator("#run-summary")).to_contain_text("waits at n_photos")
        expect(tab.locator("#run-resolve")).to_be_empty()
        expect(tab.locator("#timeline li.step").last).to_contain_text("resolve")

        # The agent sees the run resolved and goes on; the page follows by itself.
        status = mcp(server, "guide_status", run_id=run_id)
        assert status["state"] == "active"
        assert {"id": "n_reason", "kind": "ask", "via": "person", "value": "damaged"} in status[
            "path"
        ]
        assert status["next"].startswith("A person answered n_reason (damaged)")
        tab.wait_for_function("() => window.guidepostLive && window.guidepostLive.polls > 1")
        mcp(server, "guide_answer", run_id=run_id, choice="yes", at="n_photos")
        expect(tab.locator("#run-summary")).to_contain_text(
            "waits at n_refund_method", timeout=UPDATE_WITHIN_MS
        )
        done = mcp(server, "guide_answer", run_id=run_id, choice="credit", at="n_refund_method")
        assert (done["status"], done["outcome"]) == ("completed", "credited")
        expect(tab.locator("#run-summary")).to_contain_text("completed", timeout=UPDATE_WITHIN_MS)
        expect(tab.locator("#timeline li.step")).to_have_count(5)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["1400px", "390px"])
def test_the_inbox_and_the_form_fit_the_screen_and_read_well_in_either_theme(
    browser: Browser,
    server: Server,
    tmp_path: Path,
    viewport: dict[str, int],
    scheme: Literal["light", "dark"],
) -> None:
    suffix = screenshot_suffix(viewport, scheme)
    number = 7100 + 10 * (viewport["width"] < 760) + 20 * (scheme == "dark")
    claimed = stalled_at_reason(server, f"TICKET-{number + 1}")
    waiting = stalled_at_reason(server, f"TICKET-{number + 2}")
    with signed_in(browser, server, LEAD, viewport=viewport, scheme=scheme) as tab:
        tab.locator(f'tr.run-row[data-run="{claimed}"]').get_by_role(
            "button", name=f"Take {claimed} on"
        ).click()
        for path, name in [("/?view=waiting", "inbox"), (f"/r/{waiting}", "resolve-form")]:
            tab.goto(server.base + path)
            tab.wait_for_load_state("networkidle")
            assert overflow(tab) == 0, path
            assert low_contrast(tab) == [], path
            if name == "resolve-form":
                tab.locator("#run-resolve").scroll_into_view_if_needed()
                tab.focus('input[name="choice"][value="damaged"]')
                tab.keyboard.press("Space")
                screenshot(tab, f"{name}{suffix}.png", tmp_path)
            else:
                screenshot(tab, f"{name}{suffix}.png", tmp_path, full_page=True)
