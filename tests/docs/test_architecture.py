"""docs/architecture.md is true where a test can tell: its floors are the layering
test's, every file it names exists, and every limit lives where it says limits live."""

from __future__ import annotations

import ast
import re

import pytest

from tests.guidepost.test_layering import MAY_IMPORT, graphs
from tests.support.paths import REPO

pytestmark = pytest.mark.database_free

ARCHITECTURE = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
LIMITS = REPO / "flowcore" / "common" / "limits.py"
# What the page names in backticks that reads as a file or folder of the checkout.
NAMED_PATH = re.compile(r"`((?:[\w.-]+/)+[\w.-]*)`")


def floors_table() -> dict[str, frozenset[str]]:
    """The page's table of floors: each floor and the floors it says it may import."""
    section = ARCHITECTURE.split("## The floors", 1)[1].split("\n## ", 1)[0]
    floors: dict[str, frozenset[str]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        floor = cells[0].strip("`")
        floors[floor] = frozenset(re.findall(r"`([\w.]+)`", cells[2]))
    return floors


def test_the_floors_table_is_the_layering_tests() -> None:
    table = floors_table()
    assert list(table) == list(MAY_IMPORT)
    # guidepost's row says "every floor above" in words: it may import all the others.
    table["guidepost"] = frozenset(MAY_IMPORT) - {"guidepost"}
    assert table == MAY_IMPORT


def test_every_path_the_page_names_exists() -> None:
    named = set(NAMED_PATH.findall(ARCHITECTURE))
    assert len(named) > 40, "the pattern no longer finds the page's paths"
    # var/ is made by the commands that write there (the bench, serve), never committed.
    missing = sorted(
        path for path in named if not path.startswith("var/") and not (REPO / path).exists()
    )
    assert missing == []


def max_constants() -> list[str]:
    """Every module-level ``MAX_*`` constant of the product, as ``module:NAME``."""
    found = []
    for path in graphs.source_files():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            for target in targets:
                if isinstance(target, ast.Name) and target.id.lstrip("_").startswith("MAX_"):
                    found.append(f"{path.relative_to(REPO)}:{target.id}")
    return found


def test_every_limit_is_in_the_limits_module() -> None:
    found = max_constants()
    assert any(entry.startswith("flowcore/common/limits.py:") for entry in found)
    elsewhere = sorted(
        entry for entry in found if not entry.startswith("flowcore/common/limits.py:")
    )
    assert elsewhere == []
