"""The admin's change lists in a real browser (Playwright, headless chromium) against a
real server: at 1,280 px, with the navigation open, each list shows its key columns
beside nothing that pushes them out of view (issue 46: the runs list hid its ref and
time behind 270 px of filters). Screenshots: the runs list at 1,280 and 390 px, in the
light and the dark theme (``admin-runs*.png``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
from playwright.sync_api import Browser, Page, expect

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
from tests.support.servers import Server, serving

pytestmark = pytest.mark.slow

ADMIN = Person("root", "admin-browser-pass-46")
DESK = {"width": 1280, "height": 800}

# Each list, and the headers of the columns a person looks for first.
KEY_COLUMNS = {
    "/admin/runs_app/run/": [
        "Public id",
        "Flow id",
        "State",
        "Node",
        "Outcome",
        "Ref",
        "Updated at",
    ],
    "/admin/access_app/auditrecord/": ["At", "Key name", "Tool", "Run id", "Outcome", "Status"],
    "/admin/flows_app/flowversion/": ["Revision", "Flow id", "Version", "Approved by"],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A real server with a superuser, and a run (with its audit records) to list."""
    tmp = tmp_path_factory.mktemp("admin")
    with serving(tmp) as running:
        database_url = running.database_url
        add_person(database_url, ADMIN, superuser=True)
        started = mcp(running, "guide_start", flow_id="refund_request", ref="TICKET-4601")
        mcp(running, "guide_answer", run_id=started["run_id"], choice="__unknown__")
        yield running


def hidden_headers(tab: Page) -> list[str]:
    """The column headers that end past what the list's box shows without scrolling."""
    results = tab.locator("#changelist-form .results")
    expect(results).to_be_visible()
    return list(
        results.evaluate(
            """box => {
              const right = box.getBoundingClientRect().left + box.clientWidth;
              return [...box.querySelectorAll("thead th")]
                .filter(th => th.getBoundingClientRect().right > right + 1)
                .map(th => th.innerText.trim());
            }"""
        )
    )


def test_at_1280_px_with_the_navigation_open_every_list_shows_its_key_columns(
    browser: Browser, server: Server
) -> None:
    with signed_in(browser, server, ADMIN, path="/admin/", viewport=DESK) as tab:
        for path, columns in KEY_COLUMNS.items():
            tab.goto(server.base + path)
            expect(tab.locator("#nav-sidebar")).to_be_visible()
            hidden = [name.lower() for name in hidden_headers(tab)]
            assert [c for c in columns if c.lower() in hidden] == [], path


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [DESK, PHONE], ids=["1280px", "390px"])
def test_the_runs_list_fits_the_screen_in_either_theme(
    browser: Browser,
    server: Server,
    tmp_path: Path,
    viewport: dict[str, int],
    scheme: Literal["light", "dark"],
) -> None:
    path = "/admin/runs_app/run/"
    with signed_in(browser, server, ADMIN, path=path, viewport=viewport, scheme=scheme) as tab:
        expect(tab.locator("#site-name")).to_have_text("guidepost")
        assert overflow(tab) == 0
        screenshot(
            tab, f"admin-runs{screenshot_suffix(viewport, scheme)}.png", tmp_path, full_page=True
        )
