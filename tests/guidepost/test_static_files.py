"""Static files under ``serve``: the admin is styled, hashed files are cached for good.

Against a real server started from the repository; the page is checked in a real
Chromium. ``GUIDEPOST_RECORD_SCREENSHOTS=1`` also writes the login page's
screenshot to docs/img/admin-login.png (review it before committing).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from tests.support.mcp_http import http_get
from tests.support.servers import REPO, Server, copy_flows, fresh_database, start_server

pytestmark = pytest.mark.slow

SCREENSHOT = REPO / "docs" / "img" / "admin-login.png"
TRANSPARENT = "rgba(0, 0, 0, 0)"


@pytest.fixture(scope="module", params=[1, 2], ids=["1-worker", "2-workers"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("static")
    with fresh_database(tmp) as database_url:
        server = start_server(
            database_url=database_url,
            flows_dir=copy_flows(tmp / "flows"),
            log=tmp / "server.log",
            workers=request.param,
        )
        try:
            yield server
        finally:
            server.stop()


def test_the_admin_login_page_is_styled_in_a_real_browser(
    browser: Browser, served: Server, tmp_path: Path
) -> None:
    stylesheets: dict[str, int] = {}
    page = browser.new_page(viewport={"width": 1000, "height": 640})
    page.on(
        "response",
        lambda r: stylesheets.__setitem__(r.url, r.status) if r.url.endswith(".css") else None,
    )
    page.goto(served.base + "/admin/login/", wait_until="load")
    header = page.evaluate("getComputedStyle(document.querySelector('#header')).backgroundColor")
    rules = page.evaluate(
        """[...document.styleSheets]
             .filter(s => s.href && s.href.includes('/admin/css/base.'))
             .map(s => s.cssRules.length)"""
    )
    screenshot = tmp_path / "admin-login.png"
    page.screenshot(path=str(screenshot))
    page.close()
    base = [url for url in stylesheets if "/static/admin/css/base." in url]
    assert base and all(stylesheets[url] == 200 for url in base), stylesheets
    assert rules and rules[0] > 50, rules  # the stylesheet's rules were parsed
    assert header != TRANSPARENT, "the header has no background: the stylesheet did not apply"
    if os.environ.get("GUIDEPOST_RECORD_SCREENSHOTS") == "1":
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(screenshot, SCREENSHOT)


def test_hashed_static_files_are_cached_for_good_and_plain_names_briefly(served: Server) -> None:
    page = http_get(served.base + "/admin/login/", timeout=10).text
    hashed = page.split('href="/static/admin/css/base.', 1)[1].split('"', 1)[0]
    for _ in range(6):  # fresh connections, so that with two workers both answer
        response = http_get(f"{served.base}/static/admin/css/base.{hashed}", timeout=10)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/css")
        assert "immutable" in response.headers["cache-control"]
    plain = http_get(served.base + "/static/admin/css/base.css", timeout=10)
    assert plain.status_code == 200
    assert "immutable" not in plain.headers["cache-control"]
    assert http_get(served.base + "/static/admin/css/nope.css", timeout=10).status_code == 404
