"""The README's table of settings has one source for its numbers: every GUIDEPOST_*
variable the settings read is in it, with the default the settings give it."""

from __future__ import annotations

import ast
import re

import pytest

from tests.support.paths import REPO

pytestmark = pytest.mark.database_free

SETTINGS = REPO / "guidepost" / "settings.py"
README = REPO / "README.md"


def settings_defaults() -> dict[str, object]:
    """Each variable an ``env_*`` call reads, with its default (None: it has none)."""
    found: dict[str, object] = {}
    for node in ast.walk(ast.parse(SETTINGS.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id.startswith("env_")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).startswith("GUIDEPOST_")
        ):
            default = node.args[1] if len(node.args) > 1 else None
            found[str(node.args[0].value)] = (
                default.value if isinstance(default, ast.Constant) else None
            )
    return found


def readme_defaults() -> dict[str, str]:
    """Each variable of the README's table with its default cell, as written."""
    found: dict[str, str] = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`GUIDEPOST_"):
            continue
        names = re.findall(r"`(GUIDEPOST\w*|_\w+)`", cells[0])
        written = [part.strip().strip("`") for part in cells[1].split(",")]
        if len(written) != len(names):  # one default for several, or one holding commas
            written = [cells[1].strip("`")] * len(names)
        first = names[0]
        for name, default in zip(names, written, strict=True):
            # `GUIDEPOST_WEBHOOK_RETRY_BASE`, `_RETRY_MAX`: the short name takes the place
            # of as many words at the end of the first.
            if name.startswith("_"):
                name = first.rsplit("_", name.count("_"))[0] + name
            found[name] = default
    return found


def test_every_setting_the_server_reads_is_in_the_readme() -> None:
    missing = sorted(set(settings_defaults()) - set(readme_defaults()))
    assert missing == []


def test_every_default_in_the_readme_is_the_servers() -> None:
    table = readme_defaults()
    wrong = []
    for name, default in settings_defaults().items():
        if default is None or name not in table:
            continue  # computed defaults (a directory, HOST:PORT) are said in words
        written = table[name]
        if isinstance(default, bool):
            same = written == str(default).lower()
        elif isinstance(default, int | float):
            same = re.fullmatch(r"-?[\d.]+", written) is not None and float(written) == default
        else:
            same = written == (default or "(none)")
        if not same:
            wrong.append(f"{name}: README says {written!r}, the settings {default!r}")
    assert wrong == []
