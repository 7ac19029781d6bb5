"""A real Chromium for page tests: Debian's package, driven by Playwright.

Nothing is downloaded at run time: ``scripts/dev.py test`` installs the
``chromium`` package (ADR 0013). Under CI (``CI`` set) a missing browser fails
the test; elsewhere it is skipped with the command that installs it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from playwright.sync_api import Browser, sync_playwright

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str:
    found = shutil.which("chromium")
    if found:
        return found
    message = "no chromium on PATH: apt-get install -y chromium (python3 scripts/dev.py test does)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def chromium() -> Iterator[Browser]:
    executable = chromium_path()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
