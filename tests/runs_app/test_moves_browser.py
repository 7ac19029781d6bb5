"""Versions in flight in a real browser against a real server (issue 23): a support lead
opens a flow's history, runs the dry run of moving its older runs (one moves, one stays
with its reason), moves the one that can, and sees the move on the run's page; the flow
page compares the versions side by side and draws one version's runs. In the light and
the dark theme, at 390 px and 1,280 px. Pictures for docs/review.md:
GUIDEPOST_SCREENSHOTS_DIR=docs/img.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
from playwright.sync_api import Browser, expect

from tests.support.browser import Person, overflow, screenshot, signed_in
from tests.support.contrast import contrast_failures
from tests.support.servers import (
    Server,
    copy_flows,
    django_eval,
    fresh_database,
    start_server,
)

pytestmark = pytest.mark.slow

LEAD = Person("maria", "a-long-review-passphrase")

SETUP = f"""
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import Group, User
from access_app.callers import Caller
from runs_app import agent_steps

settings.GUIDEPOST_FLOWS_DIR = Path(FLOWS)
settings.GUIDEPOST_FLOWS_POLL = 0
lead = User.objects.create_user({LEAD.name!r}, password={LEAD.password!r}, is_staff=True)
lead.groups.add(Group.objects.get(name="Support lead"), Group.objects.get(name="Ops"))
agent = Caller(key="anon:127.0.0.1:support-bot", name="support-bot")
order = {{"order_number": "A00118"}}


def run(*answers):
    started = agent_steps.run_start(caller=agent, flow_id="refund_request", values=order, ref=None)
    run_id = started["run_id"]
    for choice in answers:
        # A refund to the card reads its amount too (50 euros: no supervisor).
        values = {{"refund_amount": "50"}} if choice == "original" else None
        agent_steps.run_answer(caller=agent, run_id=run_id, choice=choice, values=values, at=None)
    return run_id


moves = run("damaged")
stays = run("wrong_item")
run("damaged", "yes", "original")
run("__unknown__")
path = Path(FLOWS) / "refund_request.yaml"
text = path.read_text(encoding="utf-8")
text = text.replace('version: "2024.3"', 'version: "2024.4"')
text = text.replace("      wrong_item: They received", "      wrong_product: They received")
text = text.replace("      wrong_item: n_return_label", "      wrong_product: n_return_label")
path.write_text(text, encoding="utf-8")
run("wrong_product", "credit")
run()
result = {{"moves": moves, "stays": stays}}
"""


@dataclass(frozen=True)
class Site:
    server: Server
    moves: str
    stays: str


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp = tmp_path_factory.mktemp("moves-browser")
    flows = copy_flows(tmp / "flows")
    with fresh_database(tmp) as database_url:
        server = start_server(database_url=database_url, flows_dir=flows, log=tmp / "server.log")
        try:
            made = django_eval(database_url, f"FLOWS = {str(flows)!r}\n" + SETUP)
            yield Site(server, made["moves"], made["stays"])
        finally:
            server.stop()


def screen(width: int) -> dict[str, int]:
    return {"width": width, "height": 900}


@pytest.mark.parametrize("width", [390, 1280])
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_lead_reads_the_dry_run_then_moves_the_run_that_can(
    browser: Browser, site: Site, scheme: Literal["light", "dark"], width: int, tmp_path: Path
) -> None:
    history = "/admin/flows_app/liveflow/refund_request/history/"
    with signed_in(
        browser, site.server, LEAD, path=history, viewport=screen(width), scheme=scheme
    ) as page:
        expect(page.locator("#history tbody tr")).to_have_count(2)
        assert overflow(page) == 0
        failing = contrast_failures(page, ["#history", "#moves"])
        assert not failing, "\n".join(map(str, failing))
        if width == 1280:
            screenshot(page, f"flow-history-{scheme}.png", tmp_path, full_page=True)
        page.get_by_role("link", name="Move them to the live version (dry run first)").click()
        lines = page.locator("#dry-run-lines")
        expect(lines).to_contain_text(f"{site.moves} moves: waits at n_photos (replayed 1 answer)")
        expect(lines).to_contain_text(
            f"{site.stays} stays: answer 'wrong_item' at n_reason is no longer a label"
        )
        expect(lines).to_contain_text("(dry run: nothing changed)")
        assert overflow(page) == 0
        dark = page.evaluate("getComputedStyle(document.body).colorScheme") == "dark"
        assert dark == (scheme == "dark")
        if width == 1280:
            screenshot(page, f"migrate-dry-run-{scheme}.png", tmp_path, full_page=True)
        if scheme == "dark" and width == 1280:  # the move itself, once
            page.locator("#move-runs").click()
            expect(page.locator("#moved-lines")).to_contain_text(
                f"{site.moves} moves: waits at n_photos"
            )
            page.goto(site.server.base + f"/r/{site.moves}")
            expect(page.locator("#timeline")).to_contain_text("moved from revision")
            expect(page.locator("#timeline")).to_contain_text("(by staff:maria)")


@pytest.mark.parametrize("width", [390, 1280])
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_flow_page_compares_versions_and_draws_one_versions_runs(
    browser: Browser, site: Site, scheme: Literal["light", "dark"], width: int, tmp_path: Path
) -> None:
    with signed_in(
        browser, site.server, LEAD, path="/f/refund_request", viewport=screen(width), scheme=scheme
    ) as page:
        rows = page.locator("#compare-versions tbody tr")
        expect(rows).to_have_count(2)
        expect(page.locator("#compare-versions")).to_contain_text("refunded 1")
        expect(page.locator("#compare-versions")).to_contain_text("credited 1")
        assert overflow(page) == 0
        page.locator("#compare-versions").get_by_role("link", name="show its runs").first.click()
        expect(page.locator("#diagram-scope")).to_contain_text("the runs on it only")
        expect(page.locator("#compare-versions tr.current-version")).to_have_count(1)
        assert overflow(page) == 0
        failing = contrast_failures(page, ["#versions-compared", "#diagram-scope"])
        assert not failing, "\n".join(map(str, failing))
        if width == 1280:
            screenshot(
                page.locator("#versions-compared"), f"flow-versions-compared-{scheme}.png", tmp_path
            )
