"""The draft page's diagram shows what changed, in a real browser against a real server.

A change deep in a 60-node flow: the diagram has the run and flow pages' panel (zoom,
fit, 1:1, the keys, the legend), opens on the changed node rather than on the top of the
flow, and marks it so that it stands out in the admin's light and dark themes, at 390 and
1,280 px: its text and its outline measured against what is behind them. Pictures for
docs/review.md: GUIDEPOST_SCREENSHOTS_DIR=docs/img.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.flowcore.generated import generated_flow
from tests.flowcore.run.engine.strategies import flow_to_yaml
from tests.support.browser import Person, add_person, overflow, screenshot, signed_in
from tests.support.contrast import contrast_failures, outline_failures
from tests.support.servers import Server, copy_flows, django_eval, fresh_database, start_server

pytestmark = pytest.mark.slow

LEAD = Person("maria", "a-long-review-passphrase")
SIZE = 60
CHANGED = f"n{SIZE - 1}"  # the last node: at the foot of the diagram
SUBMIT = """
from flows_app.services import draft_create

result = draft_create(text=TEXT, submitted_via="key", submitted_by="anon:127.0.0.1:agent").draft.pk
"""


@dataclass(frozen=True)
class Review:
    server: Server
    page: str


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Review]:
    """A server whose live flows include a 60-node flow (version 1), and a pending draft of
    it that rewords its last node (version 2)."""
    tmp = tmp_path_factory.mktemp("review-diagram")
    flows = copy_flows(tmp / "flows")
    with (flows / "categories.yaml").open("a", encoding="utf-8") as categories:
        categories.write("\ntest:\n  title: Test\n  description: generated flows\n")
    big = generated_flow(SIZE, seed=SIZE)
    live = "version: 1\n" + flow_to_yaml(big)
    (flows / f"{big.id}.yaml").write_text(live, encoding="utf-8")
    said = f"({SIZE - 1})"
    assert live.count(said) == 1
    draft = live.replace("version: 1\n", "version: 2\n").replace(said, f"({SIZE - 1}, reworded)")
    with fresh_database(tmp) as database_url:
        server = start_server(database_url=database_url, flows_dir=flows, log=tmp / "server.log")
        try:
            add_person(database_url, LEAD, "Support lead")
            pk = django_eval(database_url, f"TEXT = {draft!r}\n" + SUBMIT)
            yield Review(server, f"/admin/flows_app/draft/{pk}/change/")
        finally:
            server.stop()


def inside(tab: Page, selector: str, frame: str) -> bool:
    """Whether the element ``selector`` is wholly within the visible box of ``frame``."""
    box, outer = tab.locator(selector).bounding_box(), tab.locator(frame).bounding_box()
    assert box is not None and outer is not None
    return (
        outer["x"] <= box["x"]
        and box["x"] + box["width"] <= outer["x"] + outer["width"]
        and outer["y"] <= box["y"]
        and box["y"] + box["height"] <= outer["y"] + outer["height"]
    )


@pytest.mark.parametrize("width", [390, 1280])
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_draft_diagram_opens_on_what_changed_and_zooms_like_the_flow_pages(
    browser: Browser,
    review: Review,
    scheme: Literal["light", "dark"],
    width: int,
    tmp_path: Path,
) -> None:
    viewport = {"width": width, "height": 900}
    with signed_in(
        browser, review.server, LEAD, path=review.page, viewport=viewport, scheme=scheme
    ) as tab:
        changed = f"#node-{CHANGED}"
        expect(tab.locator(changed)).to_have_class(re.compile(r"\bmark-changed\b"))
        expect(tab.locator(changed)).to_contain_text("changed")
        # It lies far below the top of the flow, where the diagram used to open...
        foot = float(tab.locator(changed + " .shape").evaluate("e => e.getBBox().y"))
        assert foot > tab.locator("#diagram").evaluate("e => e.clientHeight")
        # ...and the diagram opens on it (pages.js is deferred: it ran before the page's
        # load, which signed_in waited for), and only scrolls inside its frame.
        assert inside(tab, changed, "#diagram"), "the diagram did not open on the change"
        assert overflow(tab) == 0, f"the page is wider than {width} px"
        section = tab.locator("#draft-diagram")
        screenshot(section, f"review-diagram-{scheme}-{width}.png", tmp_path)

        # The flow pages' controls: buttons, and keys while the diagram has the focus.
        readout = tab.locator("#draft-diagram #zoom-level")
        start = readout.inner_text()
        tab.click("#draft-diagram button[data-zoom=in]")
        expect(readout).not_to_have_text(start)
        tab.click("#draft-diagram button[data-zoom=reset]")
        expect(readout).to_have_text("100%")
        tab.get_by_role("region", name=re.compile(r"^Diagram of ")).focus()
        tab.keyboard.press("-")
        expect(readout).to_have_text("80%")
        tab.click("#draft-diagram button[data-zoom=fit]")
        fitted = float(tab.get_attribute("#diagram svg.gp-diagram", "width") or 0)
        frame = tab.locator("#diagram").bounding_box()
        assert frame is not None and fitted <= frame["width"]

        # It stands out: its outline against the page and its own fill, and every text.
        failing = outline_failures(tab, f"{changed} .shape") + contrast_failures(
            tab, ["#draft-diagram"]
        )
        assert not failing, f"{scheme}, {width} px:\n" + "\n".join(map(str, failing))
