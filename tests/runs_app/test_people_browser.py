"""What people meet on the run pages, in a real browser against a real server: who answered
a run and their note on its page; a run someone else has taken on, shown taken before
any form; an unknown run's 404 page with the site's navigation and the closest runs,
followed by keyboard; and signing in, which lands ops on the inbox.

Screenshots, at 1,280 and 390 px wide, in the light and the dark theme
(``run-person-step``, ``claim-taken``, ``not-found``; ``-390``, ``-dark``), kept in
docs/img/ with ``GUIDEPOST_SCREENSHOTS_DIR=docs/img``. Needs chromium (``CI=1`` makes its
absence a failure).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
from playwright.sync_api import Browser, expect

from tests.support.browser import (
    PHONE,
    Person,
    add_person,
    overflow,
    screenshot,
    screenshot_suffix,
    signed_in,
)
from tests.support.browser import mcp_call as mcp
from tests.support.contrast import contrast_failures, low_contrast
from tests.support.servers import Server, serving

pytestmark = pytest.mark.slow

LEAD = Person("lead", "lead-people-pass-46")
OMAR = Person("omar", "omar-people-pass-46")
DESKTOP = {"width": 1280, "height": 900}
NOTE = "Customer sent a photo of the cracked case by email."
SCREENS = pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280px", "390px"])
THEMES = pytest.mark.parametrize("scheme", ["light", "dark"])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("people")
    with serving(tmp) as running:
        database_url = running.database_url
        add_person(database_url, LEAD, "Support lead")
        add_person(database_url, OMAR, "Ops")
        yield running


def stalled_at_reason(server: Server) -> str:
    started = mcp(
        server, "guide_start", flow_id="refund_request", values={"order_number": "A00118"}
    )
    stalled = mcp(server, "guide_answer", run_id=started["run_id"], choice="__unknown__")
    assert stalled["status"] == "stalled"
    return str(started["run_id"])


@THEMES
@SCREENS
def test_the_run_page_names_who_answered_and_what_they_said(
    browser: Browser,
    server: Server,
    tmp_path: Path,
    viewport: dict[str, int],
    scheme: Literal["light", "dark"],
) -> None:
    run_id = stalled_at_reason(server)

    with signed_in(
        browser, server, LEAD, path=f"/r/{run_id}", viewport=viewport, scheme=scheme
    ) as tab:
        tab.focus('input[name="choice"][value="damaged"]')
        tab.keyboard.press("Space")
        tab.keyboard.press("Tab")
        tab.keyboard.type(NOTE)
        tab.keyboard.press("Tab")
        tab.keyboard.press("Enter")
        tab.wait_for_url(f"{server.base}/r/{run_id}")

        step = tab.locator("#timeline li.step").last
        expect(step).to_contain_text("waits at n_photos (by staff:lead)")
        expect(step.locator(".note")).to_have_text(f"note {NOTE}")
        assert overflow(tab) == 0
        assert low_contrast(tab) == []
        step.scroll_into_view_if_needed()
        screenshot(tab, f"run-person-step{screenshot_suffix(viewport, scheme)}.png", tmp_path)

    status = mcp(server, "guide_status", run_id=run_id)
    assert f'Their note: "{NOTE}"' in status["next"]


@THEMES
@SCREENS
def test_a_run_taken_by_another_shows_who_since_when_before_any_form(
    browser: Browser,
    server: Server,
    tmp_path: Path,
    viewport: dict[str, int],
    scheme: Literal["light", "dark"],
) -> None:
    run_id = stalled_at_reason(server)
    with signed_in(browser, server, LEAD, path=f"/r/{run_id}") as tab:
        tab.get_by_role("button", name="Take it on").click()
        expect(tab.locator("#run-resolve")).to_contain_text("Taken by lead (you) since")

    with signed_in(
        browser, server, OMAR, path=f"/r/{run_id}", viewport=viewport, scheme=scheme
    ) as tab:
        panel = tab.locator("#run-resolve")
        expect(panel.locator(".taken")).to_have_text(
            re.compile(r"^Taken by lead since \d\d:\d\d UTC$")
        )
        expect(panel).to_contain_text("Only lead can answer or close the run while it is taken")
        expect(panel.locator("textarea, input[name=reason]")).to_have_count(0)
        # The one thing left to do, by keyboard: free the run.
        release = panel.get_by_role("button", name="Release lead's claim")
        release.focus()
        expect(release).to_be_focused()
        assert overflow(tab) == 0
        assert low_contrast(tab) == []
        panel.scroll_into_view_if_needed()
        screenshot(tab, f"claim-taken{screenshot_suffix(viewport, scheme)}.png", tmp_path)


@THEMES
@SCREENS
def test_an_unknown_run_is_a_page_with_the_navigation_and_the_closest_runs(
    browser: Browser,
    server: Server,
    tmp_path: Path,
    viewport: dict[str, int],
    scheme: Literal["light", "dark"],
) -> None:
    run_id = stalled_at_reason(server)
    typo = run_id[:-1] + ("A" if run_id[-1] != "A" else "B")

    with signed_in(
        browser, server, OMAR, path=f"/r/{typo}", viewport=viewport, scheme=scheme, not_found=True
    ) as tab:
        expect(tab.locator("h1")).to_have_text("Run not found")
        expect(tab.get_by_role("navigation", name="pages")).to_contain_text("Runs")
        link = tab.get_by_role("link", name=run_id)
        assert overflow(tab) == 0
        assert (
            contrast_failures(tab, ["header.top nav", "main"]) == []
        )  # too little for low_contrast
        screenshot(tab, f"not-found{screenshot_suffix(viewport, scheme)}.png", tmp_path)
        link.focus()
        tab.keyboard.press("Enter")
        tab.wait_for_url(f"{server.base}/r/{run_id}")


def test_ops_sign_in_on_the_admins_form_and_land_on_the_inbox(
    browser: Browser, server: Server
) -> None:
    context = browser.new_context(viewport=PHONE)  # type: ignore[arg-type]
    try:
        tab = context.new_page()
        tab.goto(server.base + "/admin/login/")
        tab.focus("#id_username")
        tab.keyboard.type(OMAR.name)
        tab.keyboard.press("Tab")
        tab.keyboard.type(OMAR.password)
        tab.keyboard.press("Enter")
        tab.wait_for_url(server.base + "/")
        expect(tab.get_by_role("link", name="Runs", exact=True)).to_have_attribute(
            "aria-current", "page"
        )
    finally:
        context.close()
