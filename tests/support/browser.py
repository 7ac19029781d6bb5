"""A real Chromium for page tests: Debian's package, driven by Playwright.

Nothing is downloaded at run time: ``scripts/dev.py test`` installs the
``chromium`` package (ADR 0013). Under CI (``CI`` set) a missing browser fails
the test; elsewhere it is skipped with the command that installs it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import anyio
import pytest
from mcp import Client
from playwright.sync_api import Browser, sync_playwright

from tests.support.servers import Server

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


def mcp_call(server: Server, tool: str, **arguments: Any) -> dict[str, Any]:
    """One tool call by a real MCP client over HTTP (in a thread: Playwright's sync API
    owns this one's event loop)."""

    async def call() -> dict[str, Any]:
        async with Client(server.url) as client:
            result = await client.call_tool(tool, arguments)
        text = result.content[0].text  # type: ignore[union-attr]
        assert not result.is_error, text
        payload: dict[str, Any] = json.loads(text)
        return payload

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, call).result()
