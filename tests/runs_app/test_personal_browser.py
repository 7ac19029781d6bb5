"""Values marked personal (spec §1.2, ADR 0087) in a real browser (Playwright driving
Debian's headless chromium, env CI=1) against a real server: an Ops member sees them
masked (``••••2345``) on the run page, nowhere in clear, not in the steps either; a
support lead (who may see personal values) sees them as they were given.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.browser import Person, add_person, signed_in
from tests.support.browser import mcp_call as mcp
from tests.support.servers import Server, serving

pytestmark = pytest.mark.slow

OPS = Person("ops", "personal-browser-pass-19")
LEAD = Person("lead", "personal-browser-pass-19")
# identity_check's personal slots, and a slot that is not personal.
GIVEN = {"member_id": "M00012345", "birth_date": "1985-04-01", "postal_code": "150-0041"}
MASKED = {"member_id": "••••2345", "birth_date": "••••4-01", "postal_code": "••••0041"}
SCREEN = {"width": 1200, "height": 900}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("personal")
    with serving(tmp, env={"GUIDEPOST_AUTH": "off"}) as running:
        database_url = running.database_url
        add_person(database_url, OPS, "Ops")
        add_person(database_url, LEAD, "Support lead")
        yield running


@pytest.fixture(scope="module")
def run_id(server: Server) -> str:
    started = mcp(
        server, "guide_start", flow_id="identity_check", values={**GIVEN, "kana_name": "ヤマダ"}
    )
    return str(started["run_id"])


def value_cell(tab: Page, key: str) -> str:
    row = tab.locator("table.values tr", has=tab.locator("td.mono", has_text=key)).first
    return row.locator("td").nth(1).inner_text()


def test_ops_sees_personal_values_masked_everywhere_on_the_run_page(
    browser: Browser, server: Server, run_id: str
) -> None:
    with signed_in(browser, server, OPS, path=f"/r/{run_id}", viewport=SCREEN) as tab:
        expect(tab.locator("table.values")).to_be_visible()
        for key, masked in MASKED.items():
            assert value_cell(tab, key) == masked
        assert value_cell(tab, "kana_name") == "ヤマダ"  # not personal: shown
        text = tab.content()
        for key, given in GIVEN.items():
            assert given not in text, key  # not in the values, not in the steps' inputs


def test_a_support_lead_sees_personal_values_as_given(
    browser: Browser, server: Server, run_id: str
) -> None:
    with signed_in(browser, server, LEAD, path=f"/r/{run_id}", viewport=SCREEN) as tab:
        for key, given in GIVEN.items():
            assert value_cell(tab, key) == given
