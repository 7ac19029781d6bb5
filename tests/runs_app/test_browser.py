"""The pages in a real browser (Playwright driving Debian's headless chromium) against a
real server (uvicorn, tests/support/servers.py), with runs moved by a real MCP client over HTTP.

Screenshots are taken on every run; with GUIDEPOST_SCREENSHOTS_DIR set (the README's
docs/img/ is made with ``GUIDEPOST_SCREENSHOTS_DIR=docs/img``) they are kept there: the runs
list, a run and a flow at 1,400 and 390 px wide (``-390``), in the light and the dark theme
(``-dark``), an edge whose labels share it, and the diagram driven by keys.
Without chromium the module is skipped, except under CI, where that is a failure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.flowcore.generated import generated_flow
from tests.flowcore.run.engine.strategies import flow_to_yaml
from tests.support.browser import (
    PHONE,
    WIDE,
    Person,
    add_person,
    overflow,
    screenshot,
    screenshot_suffix,
    signed_in,
    split_words,
)
from tests.support.browser import mcp_call as mcp
from tests.support.contrast import low_contrast
from tests.support.servers import Server, copy_flows, serving

pytestmark = pytest.mark.slow

OPS = Person("ops", "ops-browser-pass-77")
# The run page must show a new step within two seconds (issue: run pages).
UPDATE_WITHIN_MS = 2000

# --- a server with an Ops member, and an MCP agent ----------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A real server on its own database, with the bundled flows and a 150-node flow."""
    tmp = tmp_path_factory.mktemp("browser")
    flows = copy_flows(tmp / "flows")
    with (flows / "categories.yaml").open("a", encoding="utf-8") as categories:
        categories.write("\ntest:\n  title: Test\n  description: generated flows\n")
    big = generated_flow(150, seed=150)
    (flows / f"{big.id}.yaml").write_text(flow_to_yaml(big), encoding="utf-8")
    with serving(tmp, flows_dir=flows) as running:
        database_url = running.database_url
        add_person(database_url, OPS, "Ops")
        yield running


@pytest.fixture
def page(browser: Browser, server: Server) -> Iterator[Page]:
    with signed_in(browser, server, OPS) as tab:
        yield tab


def node_class(tab: Page, node_id: str) -> str:
    return str(tab.get_attribute(f"#node-{node_id}", "class"))


# --- the tests ------------------------------------------------------------------------------------


def test_the_run_page_highlights_the_current_node_and_follows_the_run_by_itself(
    page: Page, server: Server
) -> None:
    started = mcp(
        server,
        "guide_start",
        flow_id="refund_request",
        values={"order_number": "A00118"},
        ref="TICKET-2041",
    )
    run_id = started["run_id"]
    page.goto(f"{server.base}/r/{run_id}")
    assert "state-current" in node_class(page, "n_reason")
    assert "state-prefilled" in node_class(page, "n_order")
    page.wait_for_function("() => window.guidepostLive && window.guidepostLive.polls > 0")
    page.evaluate("() => { window.notReloaded = 'still here'; window.scrollTo(0, 120); }")
    scrolled = page.evaluate("() => [window.scrollY, document.getElementById('diagram').scrollTop]")

    mcp(server, "guide_answer", run_id=run_id, choice="damaged")
    page.wait_for_function(
        "() => document.getElementById('node-n_photos').getAttribute('class')"
        ".includes('state-current')",
        timeout=UPDATE_WITHIN_MS,
    )
    assert page.evaluate("() => window.notReloaded") == "still here"
    after = page.evaluate("() => [window.scrollY, document.getElementById('diagram').scrollTop]")
    assert after == scrolled
    assert "state-answered" in node_class(page, "n_reason")
    taken = page.get_attribute('g.edge[data-from="n_reason"][data-to="n_photos"]', "class")
    assert taken is not None and "state-taken" in taken
    expect(page.locator("#timeline li.step")).to_have_count(2)
    expect(page.locator("#run-summary")).to_contain_text("waits at n_photos")

    mcp(server, "guide_answer", run_id=run_id, choice="yes")  # tells, then asks the method
    page.wait_for_function(
        "() => document.querySelectorAll('#timeline li.step').length === 3",
        timeout=UPDATE_WITHIN_MS,
    )
    assert "state-told" in node_class(page, "n_photo_upload")
    assert page.evaluate("() => window.notReloaded") == "still here"


def test_the_run_pages_last_check_is_a_utc_24_hour_time_like_every_other(
    page: Page, server: Server
) -> None:
    started = mcp(server, "guide_start", flow_id="refund_request", ref="TICKET-2043")
    page.goto(f"{server.base}/r/{started['run_id']}")
    expect(page.locator("#live-status")).to_have_text(
        re.compile(r"^live · checked [0-2][0-9]:[0-5][0-9]:[0-5][0-9] UTC$"),
        timeout=UPDATE_WITHIN_MS,
    )


def test_a_stalled_run_shows_its_hand_over_note_and_a_closed_run_stops_polling(
    page: Page, server: Server
) -> None:
    started = mcp(
        server,
        "guide_start",
        flow_id="refund_request",
        values={"order_number": "A00119", "n_reason": "changed_mind"},
        ref="TICKET-2042",
    )
    run_id = started["run_id"]
    page.goto(f"{server.base}/r/{run_id}")
    mcp(server, "guide_answer", run_id=run_id, choice="__unknown__")
    page.wait_for_function(
        "() => document.getElementById('node-n_within_window').getAttribute('class')"
        ".includes('state-stalled')",
        timeout=UPDATE_WITHIN_MS,
    )
    expect(page.locator(".handoff")).to_contain_text("carrier tracking")
    mcp(server, "guide_close", run_id=run_id, reason="a colleague took over")
    expect(page.locator("#live-status")).to_have_text(
        "closed: live updates stopped", timeout=UPDATE_WITHIN_MS
    )
    polls = page.evaluate("() => window.guidepostLive.polls")
    page.wait_for_timeout(2500)
    assert page.evaluate("() => window.guidepostLive.polls") == polls


def test_the_runs_list_makes_stalled_runs_stand_out(page: Page, server: Server) -> None:
    done = {"n_within_window": "yes", "n_unused": "yes", "n_refund_method": "credit"}
    walks: list[tuple[str, dict[str, Any], list[str]]] = [
        ("TICKET-2040", {"order_number": "A00117", "n_reason": "changed_mind", **done}, []),
        ("TICKET-2043", {"order_number": "A00120"}, ["not_arrived"]),
        ("TICKET-2044", {"order_number": "A00121", "n_reason": "changed_mind"}, ["__unknown__"]),
        ("chat-8812", {}, []),
        ("TICKET-2045", {"order_number": "A00122", "n_reason": "damaged"}, ["maybe"]),
    ]
    stalled = ""
    for ref, values, choices in walks:
        run = mcp(server, "guide_start", flow_id="refund_request", values=values, ref=ref)
        for choice in choices:
            result = mcp(server, "guide_answer", run_id=run["run_id"], choice=choice)
            if result["status"] == "stalled":
                stalled = run["run_id"]
    mcp(server, "guide_start", flow_id="payment_failed", values={"n_error_code": "E01"}, ref="c-1")
    page.goto(server.base + "/")
    row = page.locator(f'tr[data-run="{stalled}"]')
    expect(row).to_have_class("run-row state-stalled")
    expect(row).to_contain_text("needs a human")
    expect(page.locator(".callout.stalled")).to_contain_text("waiting for a human")
    background = row.locator("td").nth(1).evaluate("td => getComputedStyle(td).backgroundColor")
    plain = (
        page.locator("tr.state-active td")
        .nth(1)
        .evaluate("td => getComputedStyle(td).backgroundColor")
    )
    assert background != plain  # the stalled row is tinted (the stylesheet loaded)

    page.select_option("select[name=state]", "stalled")
    page.click(".filters button[type=submit]")
    assert all(
        "state-stalled" in (c or "")
        for c in page.locator("tr.run-row").evaluate_all("rows => rows.map(r => r.className)")
    )


def test_the_flow_page_counts_runs_on_its_diagram(page: Page, server: Server) -> None:
    mcp(server, "guide_start", flow_id="refund_request", values={"order_number": "A00130"})
    page.goto(server.base + "/f/refund_request")
    note = page.locator("#node-n_order text.note")
    expect(note).to_contain_text("runs")
    expect(page.locator("text=Where runs stalled")).to_be_visible()


def test_a_150_node_flow_scrolls_inside_its_panel_and_zooms(page: Page, server: Server) -> None:
    started = mcp(server, "guide_start", flow_id="generated_150")
    page.goto(f"{server.base}/r/{started['run_id']}")
    expect(page.locator("g.node")).to_have_count(150)
    sizes = page.evaluate(
        "() => { const d = document.getElementById('diagram'); return [d.scrollWidth,"
        " d.clientWidth, document.documentElement.scrollWidth, window.innerWidth]; }"
    )
    panel_scroll, panel_width, page_width, window_width = sizes
    assert panel_scroll > panel_width  # the diagram scrolls inside its panel
    assert page_width <= window_width  # the page itself does not
    current = page.locator("g.node.state-current").bounding_box()
    panel = page.locator("#diagram").bounding_box()
    assert current is not None and panel is not None
    assert panel["x"] <= current["x"] <= panel["x"] + panel["width"]  # shown on load
    width = float(page.get_attribute("svg.gp-diagram:not(.gp-legend)", "width") or 0)
    page.click("button[data-zoom=fit]")
    fitted = float(page.get_attribute("svg.gp-diagram:not(.gp-legend)", "width") or 0)
    assert fitted < width and fitted <= panel["width"]


def test_the_api_docs_load_in_the_browser_from_this_server_alone(
    page: Page, server: Server
) -> None:
    hosts: set[str] = set()
    page.on("request", lambda request: hosts.add(request.url.split("/")[2]))
    page.goto(server.base + "/api/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("guidepost")
    expect(page.locator(".opblock-summary-path").first).to_be_visible()
    assert hosts == {server.base.split("/")[2]}


def test_labels_sharing_an_edge_each_show_their_own_count_on_the_flow_page(
    browser: Browser, server: Server, tmp_path: Path
) -> None:
    # vpn_cannot_connect: "timeout" and "__unknown__" both lead to n_internet.
    for choice in ("timeout", "timeout", "__unknown__"):
        run = mcp(server, "guide_start", flow_id="vpn_cannot_connect", ref=f"vpn-{choice}")
        mcp(server, "guide_answer", run_id=run["run_id"], choice=choice)
    for scheme in ("light", "dark"):
        with signed_in(browser, server, OPS, scheme=scheme) as tab:
            tab.goto(server.base + "/f/vpn_cannot_connect")
            edge = tab.locator('g.edge[data-from="n_error_message"][data-to="n_internet"]')
            rows = edge.locator("text.label").evaluate_all(
                "texts => texts.map(t => [t.dataset.label, t.firstChild.textContent,"
                " t.querySelector('.note').textContent])"
            )
            assert rows == [["timeout", "timeout", "2"], ["__unknown__", "__unknown__", "1"]]
            expect(edge.locator("title")).to_have_text(
                "n_error_message → n_internet: timeout 2 · __unknown__ 1"
            )
            other = tab.locator('g.edge[data-from="n_error_message"][data-to="n_mfa_prompt"]')
            expect(other.locator("text.label")).to_have_text("auth_failed0")  # taken by none
            # As drawn: one label a line, each count right of its own label, all in the box.
            drawn = edge.evaluate(LABEL_BOX_GEOMETRY)
            box = drawn["box"]
            for label, note in zip(drawn["labels"], drawn["notes"], strict=True):
                assert box["left"] <= label["left"] and note["right"] <= box["right"] + 0.5
                assert label["right"] < note["left"]
                assert box["top"] <= label["top"] and label["bottom"] <= box["bottom"] + 0.5
            first, second = drawn["labels"]
            assert first["bottom"] <= second["top"] + 1
            assert drawn["notes"][0]["right"] == pytest.approx(drawn["notes"][1]["right"], abs=1)
            area = tab.evaluate(
                "() => { const r = ['node-n_error_message', 'node-n_internet'].map("
                "id => document.getElementById(id).getBoundingClientRect());"
                " return [r[0].left, r[0].top, r[1].right, r[1].bottom]; }"
            )
            left, top, right, bottom = area
            clip = {
                "x": min(left, right - 340) - 30,
                "y": top - 10,
                "width": max(right - left, 340) + 60,
                "height": bottom - top + 20,
            }
            suffix = "" if scheme == "light" else "-dark"
            screenshot(tab, f"flow-shared-edge{suffix}.png", tmp_path, clip=clip)


# Where an edge's label box, its labels and their counts are drawn, in page pixels.
LABEL_BOX_GEOMETRY = """
edge => {
  const rect = (r) => ({ left: r.left, right: r.right, top: r.top, bottom: r.bottom });
  const texts = [...edge.querySelectorAll("text.label")];
  const words = texts.map((t) => {
    const range = document.createRange();
    range.selectNodeContents(t.firstChild);
    return rect(range.getBoundingClientRect());
  });
  return {
    box: rect(edge.querySelector(".label-bg").getBoundingClientRect()),
    labels: words,
    notes: texts.map((t) => rect(t.querySelector(".note").getBoundingClientRect())),
  };
}
"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_diagram_is_reached_by_tab_and_zooms_fits_and_pans_by_keys(
    browser: Browser, server: Server, tmp_path: Path, scheme: Literal["light", "dark"]
) -> None:
    with signed_in(browser, server, OPS, scheme=scheme) as tab:
        tab.goto(server.base + "/f/refund_request")
        diagram = tab.get_by_role("region", name=re.compile(r"^Diagram of Customer asks"))
        readout = tab.locator("#zoom-level")
        expect(readout).to_have_attribute("aria-live", "polite")
        expect(readout).to_have_text("100%")
        for _ in range(60):
            tab.keyboard.press("Tab")
            if tab.evaluate("() => document.activeElement.id") == "diagram":
                break
        else:
            pytest.fail("Tab never reached the diagram")
        expect(diagram).to_be_focused()
        # A visible focus ring, 3:1 against the panel at least (WCAG's non-text contrast).
        ring = diagram.evaluate(
            "e => { const s = getComputedStyle(e); return [s.outlineStyle, s.outlineWidth,"
            " s.outlineColor, getComputedStyle(e.parentElement).backgroundColor]; }"
        )
        assert ring[:2] == ["solid", "3px"]
        assert contrast(ring[2], ring[3]) >= 3, ring
        svg = tab.locator("#diagram svg.gp-diagram")
        width = float(svg.get_attribute("width") or 0)

        def drawn_width() -> float:
            return float(svg.get_attribute("width") or 0)

        tab.keyboard.press("+")
        expect(readout).to_have_text("125%")
        assert drawn_width() == round(width * 1.25)
        tab.keyboard.press("-")
        expect(readout).to_have_text("100%")
        assert drawn_width() == round(width)
        tab.keyboard.press("-")
        expect(readout).to_have_text("80%")
        assert drawn_width() == round(width / 1.25)
        tab.keyboard.press("0")  # fit the width
        inner = diagram.evaluate("e => e.clientWidth")
        fitted = min(1.0, (inner - 16) / width)
        expect(readout).to_have_text(f"{round(fitted * 100)}%")
        assert drawn_width() == round(width * fitted) <= inner
        for _ in range(3):
            tab.keyboard.press("+")
        expect(readout).to_have_text(f"{round(fitted * 1.25**3 * 100)}%")

        def where() -> list[int]:
            return list(
                diagram.evaluate("e => [e.scrollLeft, e.scrollTop, window.scrollX, window.scrollY]")
            )

        x, y, page_x, page_y = where()
        tab.keyboard.press("ArrowRight")
        tab.keyboard.press("ArrowDown")
        assert where() == [x + 60, y + 60, page_x, page_y]  # the diagram moved, not the page
        tab.keyboard.press("ArrowLeft")
        tab.keyboard.press("ArrowUp")
        assert where() == [x, y, page_x, page_y]
        tab.keyboard.press("Shift+ArrowRight")
        assert where()[0] == x + 240
        suffix = "" if scheme == "light" else "-dark"
        screenshot(tab.locator(".diagram-panel"), f"diagram-keyboard{suffix}.png", tmp_path)


@pytest.fixture(scope="module")
def shown_run(server: Server) -> str:
    """A run part-way through refund_request (a value given in advance, an answer, a
    tell), waiting at n_refund_method: the run the screenshots show."""
    run = mcp(
        server,
        "guide_start",
        flow_id="refund_request",
        values={"order_number": "A00140"},
        ref="TICKET-2050",
    )
    mcp(server, "guide_answer", run_id=run["run_id"], choice="damaged")
    mcp(server, "guide_answer", run_id=run["run_id"], choice="yes")
    return str(run["run_id"])


@pytest.fixture(scope="module")
def looked_up_run(server: Server) -> str:
    """A run of returns_inspection past its lookup, whose call failed (this server has no
    endpoint orders), waiting at n_seal: the page lists the lookup and why it failed."""
    values = {"rma_no": "R20240117", "sku": "KTC-0412"}
    run = mcp(server, "guide_start", flow_id="returns_inspection", values=values)
    assert run["looked_up"][0]["took"] == "__error__", run
    return str(run["run_id"])


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["1400px", "390px"])
def test_the_pages_fit_the_screen_and_read_well_in_either_theme(
    browser: Browser,
    server: Server,
    shown_run: str,
    looked_up_run: str,
    tmp_path: Path,
    viewport: dict[str, int],
    scheme: Literal["light", "dark"],
) -> None:
    """From 390 px wide: nothing makes the page scroll sideways (tables become cards or
    scroll in their own box, the header wraps, the diagram scrolls in its frame), and
    every text reads at 4.5:1 at least, in the theme the system prefers."""
    phone = viewport["width"] < 760
    suffix = screenshot_suffix(viewport, scheme)
    with signed_in(browser, server, OPS, viewport=viewport, scheme=scheme) as tab:
        assert tab.evaluate("() => document.documentElement.dataset.theme") == "auto"
        assert (page_ground(tab) < 0.05) == (scheme == "dark")
        pages = [
            ("/", "runs-list"),
            (f"/r/{shown_run}", "run-page"),
            (f"/r/{looked_up_run}", "run-page-lookup"),
            ("/f/refund_request", "flow-page"),
            ("/f/", ""),
        ]
        for path, name in pages:
            tab.goto(server.base + path)
            tab.wait_for_load_state("networkidle")
            assert overflow(tab) == 0, path
            assert low_contrast(tab) == [], path
            sign_out = tab.get_by_role("button", name="Sign out").bounding_box()
            assert sign_out is not None and sign_out["x"] + sign_out["width"] <= viewport["width"]
            if path == "/":
                rows = tab.locator("tr.run-row").first.evaluate("r => getComputedStyle(r).display")
                assert rows == ("block" if phone else "table-row")  # cards on a phone
            if path.startswith("/r/"):
                tab.click("button[data-find=current]")
                tab.evaluate("() => window.scrollTo(0, 0)")
                tab.wait_for_timeout(800)  # the smooth scroll to the current node
            if name:
                screenshot(tab, f"{name}{suffix}.png", tmp_path)


def test_at_390_px_no_page_breaks_an_id_or_a_label_in_two(
    browser: Browser, server: Server, shown_run: str, looked_up_run: str
) -> None:
    """Ids wrap between words or stay whole: the run's input in its timeline was cut
    anywhere ("value|s", "TICK|ET-2050")."""
    with signed_in(browser, server, OPS, viewport=PHONE) as tab:
        for path in ("/", f"/r/{shown_run}", f"/r/{looked_up_run}", "/f/", "/f/refund_request"):
            tab.goto(server.base + path)
            tab.wait_for_load_state("networkidle")
            assert split_words(tab) == [], path


def test_the_theme_toggle_is_the_admins_and_one_choice_holds_on_both(
    browser: Browser, server: Server
) -> None:
    def theme(tab: Page) -> str:
        return str(tab.evaluate("() => document.documentElement.dataset.theme"))

    with signed_in(browser, server, OPS, scheme="light") as tab:
        assert theme(tab) == "auto" and page_ground(tab) > 0.9
        toggle = tab.get_by_role("button", name="Toggle theme (current theme: auto)")
        toggle.click()  # auto, on a light system, then dark
        assert theme(tab) == "dark" and page_ground(tab) < 0.05
        assert tab.evaluate("() => localStorage.getItem('theme')") == "dark"
        expect(tab.get_by_role("button", name="Toggle theme (current theme: dark)")).to_be_visible()
        tab.goto(server.base + "/admin/")
        assert theme(tab) == "dark"  # the admin reads the same choice
        tab.click("button.theme-toggle")  # the admin's own toggle: dark, then light
        tab.goto(server.base + "/f/")
        assert theme(tab) == "light" and page_ground(tab) > 0.9


def page_ground(tab: Page) -> float:
    """The luminance of the page's background: about 0 in the dark theme, 1 in the light."""
    return luminance(
        tab.evaluate("() => getComputedStyle(document.documentElement).backgroundColor")
    )


def luminance(colour: str) -> float:
    """WCAG relative luminance of a computed ``rgb(…)`` colour."""
    red, green, blue = (int(v) for v in re.findall(r"[0-9.]+", colour)[:3])

    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(red) + 0.7152 * channel(green) + 0.0722 * channel(blue)


def contrast(first: str, second: str) -> float:
    high, low = sorted((luminance(first), luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)
