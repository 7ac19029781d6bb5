"""The repository's documents stand alone: every link resolves, nothing points outside."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.paths import REPO

# Reads the repository's text and code: no database, no server (tests/support/passes.py).
pytestmark = pytest.mark.database_free

DOCUMENTS = sorted(
    [REPO / "README.md", REPO / "CHANGELOG.md", REPO / "SECURITY.md", *REPO.glob("docs/**/*.md")]
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
# Files people reading the repository cannot open, and a key no result carries.
ABSENT = [
    re.compile(r"(?<![\w-])contract\.md"),
    re.compile(r"\.\./shared"),
    re.compile("folded: true"),
]


def ids(path: Path) -> str:
    return str(path.relative_to(REPO))


@pytest.mark.parametrize("document", DOCUMENTS, ids=ids)
def test_every_relative_link_names_a_file_of_the_repository(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    broken = [
        target
        for target in LINK.findall(text)
        if not target.startswith(("http://", "https://", "mailto:", "#"))
        and not (document.parent / target.split("#", 1)[0]).exists()
    ]
    assert broken == []


# The changelog may name what a fix removed.
@pytest.mark.parametrize("document", [d for d in DOCUMENTS if d.name != "CHANGELOG.md"], ids=ids)
def test_no_document_points_at_what_the_repository_does_not_have(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    assert [found.group() for pattern in ABSENT for found in pattern.finditer(text)] == []


def test_no_bench_output_is_kept_among_the_documents() -> None:
    # The bench writes its JSON under var/bench/; the research pages keep its figures.
    assert [ids(path) for path in REPO.glob("docs/**/*.json")] == []
