"""A real Chromium for page tests: Debian's package, driven by Playwright.

Nothing is downloaded at run time: ``scripts/dev.py test`` installs the
``chromium-headless-shell`` package (ADR 0085): Chromium without its window system, what
Playwright itself runs for headless pages, at about half the full browser's CPU. Under CI
(``CI`` set) a missing browser fails the test; elsewhere it is skipped with the command
that installs it.

What every page test does with it is here once: the module's ``browser`` (a fixture,
brought into each test folder by its conftest), a person made on the server's database
(``add_person``) and signed in through the admin's login form (``signed_in``, which also
fails the test on a script error or a resource that failed to load), whether a page
scrolls sideways (``overflow``), and where screenshots go (``screenshot``:
``GUIDEPOST_SCREENSHOTS_DIR``, relative to the repository, e.g. ``docs/img``).
Contrast is measured by tests/support/contrast.py.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import pytest

from tests.support.servers import REPO, Server, django_eval

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str:
    # The full browser where the headless one could not be installed (scripts/dev.py).
    found = shutil.which("chromium-headless-shell") or shutil.which("chromium")
    if found:
        return found
    message = (
        "no chromium-headless-shell on PATH: apt-get install -y chromium-headless-shell "
        "(python3 scripts/dev.py test does)"
    )
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def chromium() -> Iterator[Browser]:
    # Imported here, and the MCP client in mcp_call: the test folders' conftests import
    # this module, and a test that opens no browser should not pay for either.
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One browser for a test module (each test opens its own context)."""
    with chromium() as launched:
        try:
            yield launched
        finally:
            for key in [key for key in _sessions if key[0] == id(launched)]:
                del _sessions[key]


WIDE = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}

ADD_PERSON = """
from django.contrib.auth.models import Group, User
make = User.objects.create_superuser if SUPERUSER else User.objects.create_user
person = make(NAME, password=PASSWORD, is_staff=True)
person.groups.add(*(Group.objects.get(name=group) for group in GROUPS))
result = None
"""


class Person(NamedTuple):
    """Someone who signs in to the pages and the admin."""

    name: str
    password: str


def add_person(database_url: str, person: Person, *groups: str, superuser: bool = False) -> None:
    """``person`` as a staff member in ``groups`` (as the migrations made them), on a
    server's database."""
    name, password = person
    given = f"NAME, PASSWORD, GROUPS, SUPERUSER = {name!r}, {password!r}, {groups!r}, {superuser}"
    django_eval(database_url, given + ADD_PERSON)


def sign_in(tab: Page, server: Server, person: Person, path: str = "/") -> None:
    """Open ``path``, which sends a stranger to the admin's login form, sign in there and
    come back to ``path``."""
    tab.goto(server.base + path)
    assert "/admin/login/" in tab.url  # anonymous: sent to the login
    tab.fill("#id_username", person.name)
    tab.fill("#id_password", person.password)
    tab.click("input[type=submit]")
    tab.wait_for_url(server.base + path)


# What a browser keeps of a person signed in to a server, as the login form left it (its
# cookies; nothing a test did after): that person's later tabs on that server start signed
# in. Each sign-in costs the server a third of a CPU second of password hashing, and the
# form two page loads.
_sessions: dict[tuple[int, str, str], Any] = {}


@contextmanager
def signed_in(
    browser: Browser,
    server: Server,
    person: Person,
    *,
    path: str = "/",
    viewport: Mapping[str, int] = WIDE,
    scheme: Literal["light", "dark"] = "light",
    not_found: bool = False,
) -> Iterator[Page]:
    """A tab signed in as ``person`` (``sign_in`` the first time in this browser, on this
    server; then with the session it made), at ``path``, on a screen of ``viewport``
    whose system prefers the ``scheme`` colours. More tabs of the same person:
    ``tab.context.new_page()``. At the end no tab of its context may have had a script
    error, a console error or a response of 400 or more, but for the pages a test that
    opens pages ``not_found`` gets: their 404 and the console error chromium logs for it."""
    session = _sessions.get((id(browser), server.base, person.name))
    context = browser.new_context(
        viewport=viewport,  # type: ignore[arg-type]
        color_scheme=scheme,
        storage_state=session,  # type: ignore[arg-type]
    )
    errors: list[str] = []
    logged: list[tuple[str, str]] = []  # console errors, with the address they are about
    pages_not_found: set[str] = set()
    context.on("weberror", lambda error: errors.append(str(error.error)))
    context.on(
        "console",
        lambda m: logged.append((m.text, m.location.get("url", ""))) if m.type == "error" else None,
    )

    def refused(response: Any) -> bool:
        if not_found and response.status == 404 and response.request.resource_type == "document":
            pages_not_found.add(response.url)
            return False
        return bool(response.status >= 400)

    context.on("response", lambda r: errors.append(f"{r.status} {r.url}") if refused(r) else None)
    tab = context.new_page()
    if session is None:
        sign_in(tab, server, person, path)
        _sessions[(id(browser), server.base, person.name)] = context.storage_state()
    else:
        tab.goto(server.base + path)
        assert tab.url == server.base + path, tab.url  # still signed in, not sent to the login
    try:
        yield tab
    finally:
        context.close()
    errors += [text for text, url in logged if url not in pages_not_found or "404" not in text]
    assert errors == []  # no script error, no resource that failed to load


def overflow(tab: Page) -> int:
    """How many pixels the page is wider than its window (0: it does not scroll sideways)."""
    return int(
        tab.evaluate(
            "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
    )


# Each word (an id, a label, a key: letters, digits and _, four or more) that the page
# shows across two lines, with the class of the element holding it.
_SPLIT_WORDS = """() => {
  const found = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const m of node.textContent.matchAll(/[A-Za-z0-9_]{4,}/g)) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const lines = new Set([...range.getClientRects()].filter(r => r.width > 0)
        .map(r => Math.round(r.top)));
      if (lines.size > 1) {
        const holder = node.parentElement;
        found.push(`${m[0]} (${holder.tagName.toLowerCase()}.${holder.className})`);
      }
    }
  }
  return found;
}"""


def split_words(tab: Page) -> list[str]:
    """The words the page breaks across lines (an id cut in two reads as two ids)."""
    return list(tab.evaluate(_SPLIT_WORDS))


def screenshot_path(name: str, tmp_path: Path) -> Path:
    """Where the screenshot ``name`` goes: GUIDEPOST_SCREENSHOTS_DIR (relative to the
    repository) when it is set, else the test's own ``tmp_path``."""
    directory = Path(os.environ.get("GUIDEPOST_SCREENSHOTS_DIR") or tmp_path)
    if not directory.is_absolute():
        directory = REPO / directory
    directory.mkdir(parents=True, exist_ok=True)
    return directory / name


def screenshot_suffix(viewport: Mapping[str, int], scheme: str) -> str:
    """What a screenshot's name adds for its screen and theme: ``-390`` on a phone's
    width, ``-dark`` in the dark theme (``run-page-390-dark.png``).

    >>> screenshot_suffix(PHONE, "dark"), screenshot_suffix(WIDE, "light")
    ('-390-dark', '')
    """
    return ("-390" if viewport["width"] < 760 else "") + ("-dark" if scheme == "dark" else "")


def screenshot(what: Page | Locator, name: str, tmp_path: Path, **options: Any) -> Path:
    """A screenshot of a page or of one element (a locator) at ``screenshot_path``."""
    path = screenshot_path(name, tmp_path)
    what.screenshot(path=str(path), **options)
    return path


def mcp_call(server: Server, tool: str, **arguments: Any) -> dict[str, Any]:
    """One tool call by a real MCP client over HTTP (in a thread: Playwright's sync API
    owns this one's event loop)."""
    import anyio
    from mcp import Client

    async def call() -> dict[str, Any]:
        async with Client(server.url) as client:
            result = await client.call_tool(tool, arguments)
        text = result.content[0].text  # type: ignore[union-attr]
        assert not result.is_error, text
        payload: dict[str, Any] = json.loads(text)
        return payload

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, call).result()
