"""Docs that state a setting's default state the server's (issue 46: docs/tools.md gave
the rate limit as 30 calls, refilled at 10 a second, while the server's default was 120
and 40). The README's table is checked by test_settings_table.py; here, the other docs:
deploy.md's table of limits whole, and each sentence elsewhere that gives a default, by
the pattern below that reads its numbers. A doc that states a new default adds its line
here."""

from __future__ import annotations

import re

import pytest

from tests.docs.test_settings_table import settings_defaults
from tests.support.paths import REPO

pytestmark = pytest.mark.database_free

DOCS = REPO / "docs"

# (doc, the sentence with a named group per setting for the number it states).
STATED: list[tuple[str, str]] = [
    (
        "tools.md",
        r"each caller may make (?P<GUIDEPOST_RATE_BURST>[\d.]+) calls at once, refilled at "
        r"(?P<GUIDEPOST_RATE_PER_SECOND>[\d.]+) a second \(the server's "
        r"`GUIDEPOST_RATE_BURST` and `GUIDEPOST_RATE_PER_SECOND`\)",
    ),
    (
        "deploy.md",
        r"\(`GUIDEPOST_WEBHOOK_CONCURRENCY` at once, (?P<GUIDEPOST_WEBHOOK_CONCURRENCY>[\d.]+)\), "
        r"and a try has `GUIDEPOST_WEBHOOK_TIMEOUT` seconds in all "
        r"\((?P<GUIDEPOST_WEBHOOK_TIMEOUT>[\d.]+)\)",
    ),
    ("deploy.md", r"`GUIDEPOST_DB_POOL_TIMEOUT` seconds \((?P<GUIDEPOST_DB_POOL_TIMEOUT>[\d.]+)\)"),
    ("deploy.md", r"`GUIDEPOST_FLOWS_POLL_MS` \((?P<GUIDEPOST_FLOWS_POLL_MS>[\d.]+) ms\)"),
    ("deploy.md", r"`GUIDEPOST_DB_POOL_SIZE` connections \((?P<GUIDEPOST_DB_POOL_SIZE>[\d.]+)\)"),
    (
        "deploy.md",
        r"every `GUIDEPOST_SEAL_INTERVAL` seconds \((?P<GUIDEPOST_SEAL_INTERVAL>[\d.]+)\), up to "
        r"`GUIDEPOST_SEAL_MARGIN` seconds ago \((?P<GUIDEPOST_SEAL_MARGIN>[\d.]+)\)",
    ),
    (
        "spec.md",
        r"`GUIDEPOST_WEBHOOK_SECRET_GRACE` seconds \(default "
        r"(?P<GUIDEPOST_WEBHOOK_SECRET_GRACE>[\d.]+),",
    ),
    (
        "spec.md",
        r"`GUIDEPOST_WEBHOOK_CONCURRENCY`, (?P<GUIDEPOST_WEBHOOK_CONCURRENCY>[\d.]+), are stuck",
    ),
    (
        "privacy.md",
        r"\| `GUIDEPOST_RETENTION_INTERVAL` \| (?P<GUIDEPOST_RETENTION_INTERVAL>[\d.]+) \|",
    ),
]


def text_of(doc: str) -> str:
    """The doc with every run of white space one space, so a sentence may wrap anywhere."""
    return " ".join((DOCS / doc).read_text(encoding="utf-8").split())


def differences(stated: dict[str, str]) -> list[str]:
    defaults = settings_defaults()
    return [
        f"{name}: the doc says {number}, the settings {defaults[name]!r}"
        for name, number in stated.items()
        if float(number) != defaults[name]
    ]


@pytest.mark.parametrize(("doc", "pattern"), STATED, ids=[f"{d}:{p[:40]}" for d, p in STATED])
def test_a_default_stated_in_a_doc_is_the_servers(doc: str, pattern: str) -> None:
    found = re.search(pattern, text_of(doc))
    assert found is not None, f"{doc} no longer says this; update the pattern: {pattern}"
    assert differences(found.groupdict()) == []


def limits_table() -> dict[str, str]:
    """deploy.md's Limits: each setting of the table, with the default it gives for it
    (the settings of a row and its defaults are listed in the same order)."""
    stated: dict[str, str] = {}
    section = (DOCS / "deploy.md").read_text(encoding="utf-8").split("## Limits", 1)[1]
    for line in section.split("\n## ", 1)[0].splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3:
            continue
        names = re.findall(r"`(GUIDEPOST_\w+)`", cells[1])
        numbers = re.findall(r"\d[\d.]*", cells[2])
        if names and len(numbers) == len(names):
            stated.update(zip(names, numbers, strict=True))
    return stated


def test_every_default_in_the_deploy_guides_limits_is_the_servers() -> None:
    stated = limits_table()
    assert {"GUIDEPOST_RATE_BURST", "GUIDEPOST_BACKLOG", "GUIDEPOST_SQLITE_TIMEOUT"} <= set(stated)
    assert differences(stated) == []
