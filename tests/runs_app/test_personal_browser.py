"""Values marked personal (spec §1.2, ADR 0087) in a real browser (Playwright driving
Debian's headless chromium, env CI=1) against a real server: an Ops member sees them
masked (``••••2345``) on the run page, nowhere in clear, not in the steps either; a
support lead (who may see personal values) sees them as they were given.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.browser import chromium
from tests.support.browser import mcp_call as mcp
from tests.support.servers import REPO, Server, copy_flows, fresh_database, start_server

pytestmark = pytest.mark.slow

PASSWORD = "personal-browser-pass-19"
# identity_check's personal slots, and a slot that is not personal.
GIVEN = {"member_id": "M00012345", "birth_date": "1985-04-01", "postal_code": "150-0041"}
MASKED = {"member_id": "••••2345", "birth_date": "••••4-01", "postal_code": "••••0041"}
PEOPLE = """
from django.contrib.auth.models import Group, User
for name, group in (("ops", "Ops"), ("lead", "Support lead")):
    User.objects.create_user(name, password={password!r}, is_staff=True).groups.add(
        Group.objects.get(name=group)
    )
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("personal")
    with fresh_database(tmp) as database_url:
        running = start_server(
            database_url=database_url,
            flows_dir=copy_flows(tmp / "flows"),
            log=tmp / "server.log",
            env={"GUIDEPOST_AUTH": "off"},
        )
        try:
            subprocess.run(
                [sys.executable, "manage.py", "shell", "-c", PEOPLE.format(password=PASSWORD)],
                cwd=REPO,
                env={**os.environ, "DATABASE_URL": database_url},
                check=True,
                capture_output=True,
                timeout=120,
            )
            yield running
        finally:
            running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def run_id(server: Server) -> str:
    started = mcp(
        server, "guide_start", flow_id="identity_check", values={**GIVEN, "kana_name": "ヤマダ"}
    )
    return str(started["run_id"])


def run_page(browser: Browser, server: Server, user: str, run_id: str) -> Page:
    tab = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
    tab.goto(server.base + f"/r/{run_id}")
    tab.fill("#id_username", user)
    tab.fill("#id_password", PASSWORD)
    tab.click("input[type=submit]")
    tab.wait_for_url(server.base + f"/r/{run_id}")
    return tab


def value_cell(tab: Page, key: str) -> str:
    row = tab.locator("table.values tr", has=tab.locator("td.mono", has_text=key)).first
    return row.locator("td").nth(1).inner_text()


def test_ops_sees_personal_values_masked_everywhere_on_the_run_page(
    browser: Browser, server: Server, run_id: str
) -> None:
    tab = run_page(browser, server, "ops", run_id)
    expect(tab.locator("table.values")).to_be_visible()
    for key, masked in MASKED.items():
        assert value_cell(tab, key) == masked
    assert value_cell(tab, "kana_name") == "ヤマダ"  # not personal: shown
    text = tab.content()
    for key, given in GIVEN.items():
        assert given not in text, key  # not in the values, not in the steps' inputs
    tab.context.close()


def test_a_support_lead_sees_personal_values_as_given(
    browser: Browser, server: Server, run_id: str
) -> None:
    tab = run_page(browser, server, "lead", run_id)
    for key, given in GIVEN.items():
        assert value_cell(tab, key) == given
    tab.context.close()
