"""The calls every Python client probe makes, in order, and the report it prints.

Each ``probe_<client>.py`` beside this file wraps one client library in a small
adapter (:class:`Adapter`) and hands it to :func:`main`; this module only uses the
standard library, so it runs in every probe's environment. A probe is started as

    uv run --isolated --no-project --with <pinned packages> python probe_<client>.py URL

with the agent key in ``GUIDEPOST_KEY``, and prints one JSON object as its last line:
what each step saw, or why it failed. One step failing never stops the others.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any, Protocol

FLOW = "refund_request"
RESOURCE = "guidepost://flows/refund_request"
# A well-formed run id that was never issued: guide_status answers `run not found`.
UNKNOWN_RUN = "r_AAAAAAAAAAAAAAAAAAAAAA"
# A key the server never issued: it answers 401 `invalid key` before any MCP message.
WRONG_KEY = "gpk_not_a_key_this_server_issued"
REFUSED_WAIT = 30.0
START_ARGS = {"flow_id": FLOW, "values": {"order_number": "A20931"}, "ref": "client-probe"}


@dataclass
class Called:
    """A tool call as the library hands it to its user.

    ``payload`` is our JSON object (parsed from what the library gave back),
    ``is_error`` whether the library flagged the call as failed, ``surfaced`` how it
    did (``isError`` on a result, or the exception it raised), ``structured`` whether
    the library handed over the structured content and it equals the text block."""

    payload: Any
    is_error: bool
    surfaced: str
    structured: bool | None = None


def from_result(
    texts: list[str], is_error: bool, structured: Any, surfaced: str = "isError"
) -> Called:
    """A result as the MCP SDKs hand it over: its text blocks, its error flag, and its
    structured content (None when it has none)."""
    text = "".join(texts)
    same = None if structured is None else structured == parsed(text)
    return Called(payload=parsed(text), is_error=is_error, surfaced=surfaced, structured=same)


class Adapter(Protocol):
    async def tools(self) -> list[str]: ...

    async def call(self, name: str, args: dict[str, Any]) -> Called: ...

    async def resources(self) -> list[str]: ...

    async def templates(self) -> list[str]: ...

    async def read(self, uri: str) -> str: ...


def key_headers() -> dict[str, str]:
    key = os.environ.get("GUIDEPOST_KEY", "")
    return {"Authorization": f"Bearer {key}"} if key else {}


def parsed(text: str) -> Any:
    """The JSON object in a text block, or the text itself when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return text


async def step(name: str, report: dict[str, Any], action: Callable[[], Awaitable[Any]]) -> Any:
    """Run one step; its result (or why it failed) goes into ``report[name]``."""
    try:
        result = await action()
    except Exception as exc:  # noqa: BLE001 - the report says what broke, the test judges
        inner = innermost(exc)
        report[name] = {"failed": f"{type(inner).__name__}: {inner}"[:2000]}
        return None
    report[name] = result
    return result


def innermost(exc: BaseException) -> BaseException:
    """The error inside an anyio task group's wrapping (the first, group in group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def shown(called: Called) -> dict[str, Any]:
    return {
        "payload": called.payload,
        "is_error": called.is_error,
        "surfaced": called.surfaced,
        "structured": called.structured,
    }


async def walk(adapter: Adapter) -> dict[str, Any]:
    """List tools, start a run, answer, read an error, list and read resources (then
    ``main`` connects again with a key the server refuses: ``refused_key``)."""
    report: dict[str, Any] = {}
    await step("tools", report, adapter.tools)
    started = await step("start", report, lambda: call(adapter, "guide_start", START_ARGS))
    run_id = (started or {}).get("payload", {}).get("run_id", "r_missing")
    answer = {"run_id": run_id, "choice": "damaged", "at": "n_reason"}
    await step("answer", report, lambda: call(adapter, "guide_answer", answer))
    unknown = {"run_id": UNKNOWN_RUN}
    await step("error", report, lambda: call(adapter, "guide_status", unknown))
    await step("resources", report, adapter.resources)
    await step("templates", report, adapter.templates)
    await step("read", report, lambda: adapter.read(RESOURCE))
    return report


async def refused_key(connect: Callable[[str], Any], url: str) -> dict[str, Any]:
    """What the library hands its user when the server refuses the key: connect and list
    the tools with a key it never issued (``raised``: the exception's type, ``says``: its
    words), or how it went on (``listed``)."""
    key = os.environ.get("GUIDEPOST_KEY", "")
    os.environ["GUIDEPOST_KEY"] = WRONG_KEY

    async def listing() -> list[str]:
        async with connect(url) as adapter:
            return await adapter.tools()

    try:
        listed = await asyncio.wait_for(listing(), REFUSED_WAIT)
    except Exception as exc:  # noqa: BLE001 - what the library raised is the finding
        inner = innermost(exc)
        return {"raised": type(inner).__name__, "says": str(inner)[:500]}
    finally:
        os.environ["GUIDEPOST_KEY"] = key
    return {"listed": listed}


async def call(adapter: Adapter, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return shown(await adapter.call(name, args))


def main(
    packages: list[str],
    connect: Callable[[str], Any],
    extra: Callable[[Any, dict[str, Any]], Awaitable[None]] | None = None,
) -> int:
    """Run the steps with the adapter ``connect(url)`` opens (an async context manager),
    then ``extra`` (a client's own checks), and print the report."""
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} MCP_URL", file=sys.stderr)
        return 2

    async def run() -> dict[str, Any]:
        async with connect(sys.argv[1]) as adapter:
            report = await walk(adapter)
            if extra is not None:
                await extra(adapter, report)
        report["refused_key"] = await refused_key(connect, sys.argv[1])
        return report

    try:
        report = asyncio.run(run())
    except Exception:  # noqa: BLE001 - connecting failed: say how, for the test's message
        traceback.print_exc()
        return 1
    report["versions"] = {package: version(package) for package in packages}
    print(json.dumps(report, ensure_ascii=False, default=str))
    return 0
