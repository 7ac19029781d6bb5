"""The review pages in every light and at every width, in a real browser against a real server.

Every custom part of the review (the facts, what changes, the tests, the line diff, the
diagram, the decision and the YAML with its findings) is measured in chromium: each piece
of text against what is really behind it (tests/support/contrast.py), in the admin's light
and dark themes, whether dark comes from the system (``prefers-color-scheme``) or from the
admin's own toggle, and light chosen with the toggle on a dark system. At 390 px nothing
makes the page wider than the screen; at 1,280 and 1,400 px every column of the drafts list
is in view beside its filters. A draft with lint errors shows Approve disabled, the reason
beside it. Pictures for docs/review.md: GUIDEPOST_SCREENSHOTS_DIR=docs/img.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.browser import Person, overflow, screenshot, signed_in
from tests.support.contrast import contrast_failures
from tests.support.drafting import REFUND_CHANGE_WITHOUT_HANDOVER, new_flow
from tests.support.servers import (
    Server,
    copy_flows,
    django_eval,
    fresh_database,
    start_server,
)

pytestmark = pytest.mark.slow

LEAD = Person("maria", "a-long-review-passphrase")
LIST = "/admin/flows_app/draft/"
# The review's own parts of a draft page and of a revision page.
DRAFT_PARTS = [
    "#facts",
    "#changes",
    "#tests",
    "#diff",
    "#draft-diagram",
    "#decision",
    "#source",
]
REVISION_PARTS = ["#facts", "#diff", "#source"]
# The drafts list's named columns.
COLUMNS = ("flow_link", "title", "kind", "lint", "tests", "submitter", "age", "status")


@dataclass(frozen=True)
class Theme:
    """How a person gets a theme: the system's preference, and the admin toggle's choice
    (None: never touched, so the admin follows the system)."""

    name: str
    system: Literal["light", "dark"]
    toggle: Literal["light", "dark"] | None = None


THEMES = [
    Theme("light", "light"),
    Theme("dark", "dark"),
    Theme("dark-by-toggle", "light", toggle="dark"),
    Theme("light-by-toggle", "dark", toggle="light"),
]

SETUP = f"""
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import Group, User
from flows_app.models import Draft
from flows_app.services import draft_approve, draft_create

settings.GUIDEPOST_FLOWS_DIR = Path(FLOWS)  # the server's, where approval writes
lead = User.objects.create_user({LEAD.name!r}, password={LEAD.password!r}, is_staff=True)
lead.groups.add(Group.objects.get(name="Support lead"))


def submit(text):
    return draft_create(text=text, submitted_via="key", submitted_by="anon:127.0.0.1:claude").draft


breaking = submit({REFUND_CHANGE_WITHOUT_HANDOVER!r})
with_errors = submit({new_flow("gift_card", target="n_nowhere")!r})
approved = submit({new_flow("loyalty_points", title="Loyalty points")!r})
draft_approve(draft=approved, approved_by={LEAD.name!r})
vpn = (Path(FLOWS) / "vpn_cannot_connect.yaml").read_text(encoding="utf-8")
changed = submit(vpn.replace("version: 5", "version: 6").replace("VPN cannot", "VPN does not", 1))
revision = draft_approve(draft=changed, approved_by={LEAD.name!r})
result = {{
    "breaking": breaking.pk,
    "with_errors": with_errors.pk,
    "approved_change": changed.pk,
    "revision": revision.pk,
}}
"""


@dataclass(frozen=True)
class Review:
    server: Server
    pages: dict[str, str]


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Review]:
    """A server whose drafts list holds a change that breaks the live tests, a new flow
    with lint errors, and two approved drafts (a new flow, a change)."""
    tmp = tmp_path_factory.mktemp("review-themes")
    flows = copy_flows(tmp / "flows")
    with fresh_database(tmp) as database_url:
        server = start_server(database_url=database_url, flows_dir=flows, log=tmp / "server.log")
        try:
            made = django_eval(database_url, f"FLOWS = {str(flows)!r}\n" + SETUP)
            pages = {
                "breaking": f"/admin/flows_app/draft/{made['breaking']}/change/",
                "with_errors": f"/admin/flows_app/draft/{made['with_errors']}/change/",
                "approved_change": f"/admin/flows_app/draft/{made['approved_change']}/change/",
                "revision": f"/admin/flows_app/flowversion/{made['revision']}/change/",
            }
            yield Review(server, pages)
        finally:
            server.stop()


@contextmanager
def lead_in(browser: Browser, review: Review, theme: Theme, width: int) -> Iterator[Page]:
    """A lead's tab on the drafts list in ``theme`` at ``width``: signed in, the admin's
    toggle set as the theme says (by clicking it, as a person would), the navigation
    sidebar as it comes."""
    viewport = {"width": width, "height": 900}
    with signed_in(
        browser, review.server, LEAD, path=LIST, viewport=viewport, scheme=theme.system
    ) as tab:
        if theme.toggle is not None:
            # From "auto" one click gives the theme opposite to the system's.
            tab.locator(".theme-toggle").first.click()
            expect(tab.locator("html")).to_have_attribute("data-theme", theme.toggle)
        yield tab


def open_page(tab: Page, review: Review, path: str) -> Page:
    """Another tab of the same person, at ``path``."""
    page = tab.context.new_page()
    page.goto(review.server.base + path)
    return page


@pytest.mark.parametrize("width", [390, 1280])
@pytest.mark.parametrize("theme", THEMES, ids=[t.name for t in THEMES])
def test_every_part_of_the_review_reads_in_both_themes_and_fits_the_screen(
    browser: Browser, review: Review, theme: Theme, width: int, tmp_path: Path
) -> None:
    with lead_in(browser, review, theme, width) as tab:
        for name, path in review.pages.items():
            page = open_page(tab, review, path)
            dark = page.evaluate("getComputedStyle(document.body).colorScheme") == "dark"
            assert dark == ("dark" in theme.name), (name, "the admin is not in the theme")
            parts = REVISION_PARTS if name == "revision" else DRAFT_PARTS
            for part in parts:
                if part != "#diff" or name != "with_errors":  # a new flow has no line diff
                    expect(page.locator(part)).to_have_count(1)
            assert overflow(page) == 0, f"{name} is wider than {width} px"
            # The light page at 1,280 px is test_review_browser's review-draft.png.
            if name == "breaking" and theme.toggle is None and (dark or width == 390):
                suffix = f"{theme.name}" + ("-390" if width == 390 else "")
                # A phone shows its first screen; the whole page is 6,000 px and more.
                whole = width != 390
                screenshot(page, f"review-draft-{suffix}.png", tmp_path, full_page=whole)
                if width == 1280:
                    screenshot(page.locator("#tests"), "review-tests-dark.png", tmp_path)
            # Measured last: it opens every <details> and scrolls each text into view.
            failing = contrast_failures(page, parts)
            assert not failing, f"{name} ({theme.name}, {width} px):\n" + "\n".join(
                map(str, failing)
            )
            assert overflow(page) == 0, f"{name} is wider than {width} px, details open"
            page.close()


@pytest.mark.parametrize("width", [1280, 1400])
def test_every_column_of_the_drafts_list_is_in_view_beside_the_filters(
    browser: Browser, review: Review, width: int, tmp_path: Path
) -> None:
    for theme in THEMES[:2]:
        with lead_in(browser, review, theme, width) as page:
            # The navigation sidebar is open, as a lead first sees the admin.
            expect(page.locator("#nav-sidebar")).to_be_visible()
            results = page.locator("#changelist-form .results")
            fits = results.evaluate("r => r.scrollWidth <= r.clientWidth")
            shown = results.bounding_box()
            filters = page.locator("#changelist-filter").bounding_box()
            assert shown is not None and filters is not None
            headers = page.locator("#result_list thead th")
            expect(headers).to_have_count(9)
            for column in COLUMNS:
                box = page.locator(f"#result_list thead th.column-{column}").bounding_box()
                assert box is not None, column
                assert box["x"] + box["width"] <= shown["x"] + shown["width"] + 0.5, column
                assert box["x"] + box["width"] <= width, column
                overlaps = (
                    box["x"] < filters["x"] + filters["width"]
                    and filters["x"] < box["x"] + box["width"]
                    and box["y"] < filters["y"] + filters["height"]
                    and filters["y"] < box["y"] + box["height"]
                )
                assert not overlaps, f"{column} lies under the filters at {width} px"
            assert fits, f"the drafts table scrolls sideways at {width} px"
            failing = contrast_failures(page, ["#changelist"])
            assert not failing, "\n".join(map(str, failing))
            if width == 1280:
                screenshot(page, f"review-list-{theme.name}.png", tmp_path, full_page=True)


@pytest.mark.parametrize("theme", THEMES[:2], ids=[t.name for t in THEMES[:2]])
def test_a_draft_with_lint_errors_shows_approve_disabled_with_the_reason_beside_it(
    browser: Browser, review: Review, theme: Theme, tmp_path: Path
) -> None:
    with lead_in(browser, review, theme, 1280) as tab:
        page = open_page(tab, review, review.pages["with_errors"])
        approve = page.locator("#approve")
        expect(approve).to_be_disabled()
        reason = page.locator("#approve-blocked")
        expect(reason).to_be_visible()
        expect(reason).to_have_text(
            "Cannot be approved: the draft has 2 lint errors (beside their lines). Ask its author "
            "for a corrected draft, or discard this one with a reason."
        )
        assert approve.get_attribute("aria-describedby") == "approve-blocked"
        # Beside the button: below it and aligned with it, not somewhere else on the page.
        button, said = approve.bounding_box(), reason.bounding_box()
        assert button is not None and said is not None
        assert 0 <= said["y"] - (button["y"] + button["height"]) < 40
        expect(page.locator("#discard")).to_be_enabled()
        screenshot(page.locator("#decision"), f"review-blocked-{theme.name}.png", tmp_path)
