"""docs/spec.md is the reference the project cites, and it says what the product does.

A citation of the spec is any ``§N`` or ``§N.M`` (``spec §3.4``, ``docs/spec.md §7``),
a bare ``spec 3.4``, or a link to ``spec.md#anchor``; each must name a heading of
docs/spec.md. The normative document is never called "the spec" outside the
historical decision records (``docs/adr/``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowcore.flow.building import build_flow
from flowcore.flow.files import load_categories
from flowcore.flow.findings import ERROR_CODES, WARNING_CODES
from guidepost.mcp.tools import registry
from tests.support.paths import REPO

# Reads the repository's text and code: no database, no server (tests/support/passes.py).
pytestmark = pytest.mark.database_free

SPEC = REPO / "docs" / "spec.md"
SPEC_TEXT = SPEC.read_text(encoding="utf-8")

CODE_ROOMS = (
    "flowcore",
    "guidepost",
    "flows_app",
    "runs_app",
    "tests",
    "scripts",
    "bench",
    "templates",
)
TOP_DOCUMENTS = ("README.md", "CHANGELOG.md", "SECURITY.md")
SKIPPED_DIRECTORIES = {"__pycache__", "node_modules", ".venv", "var"}

HEADING = re.compile(r"^(#{2,4}) (\d+(?:\.\d+)*)\.? +(.+)$", re.MULTILINE)
CITATIONS = (
    re.compile(r"§\s*(\d+(?:\.\d+)*)"),
    re.compile(r"\bspec(?:\.md)? +(\d{1,2}(?:\.\d+)?)\b(?![-\d])"),
)
SPEC_LINK = re.compile(r"\]\((?:[./\w-]*/)?spec\.md#([^)\s]+)\)")
# "contract" in a sense other than the normative document: the diagram's classes and ids
# are "a contract for pages", and the changelog and test_docs name the file that was.
OTHER_SENSES = re.compile(
    r"\ba contract\b|\bSVG contract\b|classes and ids contract|contract\\?\.md", re.IGNORECASE
)


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces
    turned into hyphens.

    >>> anchor("3.1 Advancing and prefill"), anchor("5.1 `guide_flows`")
    ('31-advancing-and-prefill', '51-guide_flows')
    """
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


SECTIONS = {number for _, number, _ in HEADING.findall(SPEC_TEXT)}
ANCHORS = {
    anchor(line.lstrip("#").strip()) for line in SPEC_TEXT.splitlines() if line.startswith("#")
}


def files_under(*rooms: str) -> Iterator[Path]:
    for room in rooms:
        top = REPO / room
        paths = [top] if top.is_file() else sorted(top.rglob("*"))
        for path in paths:
            if path.is_file() and not SKIPPED_DIRECTORIES.intersection(path.parts):
                yield path


def text_of(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None  # an image, a compiled file


def citations() -> Iterator[tuple[str, str]]:
    """(cited section, file:line) for every citation of the spec in the repository."""
    for path in files_under(*CODE_ROOMS, "docs", *TOP_DOCUMENTS):
        text = text_of(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            for pattern in CITATIONS:
                for section in pattern.findall(line):
                    yield section, f"{path.relative_to(REPO)}:{number}"


def test_the_spec_numbers_its_sections_as_cited() -> None:
    assert {"0", "1", "1.1", "1.4", "2", "3", "3.1", "3.5", "4", "5", "5.8", "6", "7"} <= SECTIONS
    assert HEADING.search(SPEC_TEXT) is not None


def test_citations_are_found_in_code_tests_and_docs() -> None:
    places = {where.split(":")[0] for _, where in citations()}
    assert {"flowcore/run/engine.py", "docs/tools.md", "docs/spec.md"} <= places


@pytest.mark.parametrize(("section", "where"), sorted(set(citations())))
def test_every_cited_section_exists(section: str, where: str) -> None:
    assert section in SECTIONS, f"{where} cites spec §{section}, which docs/spec.md does not have"


def test_every_link_into_the_spec_names_one_of_its_headings() -> None:
    broken = [
        f"{path.relative_to(REPO)}: #{target}"
        for path in files_under("docs", *TOP_DOCUMENTS)
        if path.suffix == ".md"
        for target in SPEC_LINK.findall(path.read_text(encoding="utf-8"))
        if target not in ANCHORS
    ]
    assert broken == []


def contract_mentions() -> Iterator[str]:
    """file:line of every "contract" meaning the normative document, decision records included."""
    for path in files_under(*CODE_ROOMS, "docs", *TOP_DOCUMENTS):
        text = text_of(path)
        if text is None or path == Path(__file__):
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if re.search("contract", OTHER_SENSES.sub("", line), re.IGNORECASE):
                yield f"{path.relative_to(REPO)}:{number}: {line.strip()}"


def test_nothing_cites_the_contract_instead_of_the_spec() -> None:
    """Cite docs/spec.md ("spec §7") instead; a new sense of the word goes in OTHER_SENSES."""
    assert list(contract_mentions()) == []


# --- the spec says what the product does ------------------------------------------------


def section(number: str) -> str:
    """The text of spec section ``number``, up to the next heading of its level or above."""
    found = re.search(rf"^(#+) {re.escape(number)}\.? .*$", SPEC_TEXT, re.MULTILINE)
    assert found is not None, f"docs/spec.md has no section {number}"
    level = len(found.group(1))
    rest = SPEC_TEXT[found.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.MULTILINE)
    return rest[: end.start()] if end else rest


@pytest.mark.parametrize("tool", [t.name for t in registry.all()])
def test_every_tool_and_argument_has_its_place_in_the_spec(tool: str) -> None:
    heading = re.search(rf"^### (5\.\d) `{tool}`$", SPEC_TEXT, re.MULTILINE)
    assert heading is not None, f"{tool} has no section in spec §5"
    text = section(heading.group(1))
    spec = registry.get(tool)
    assert spec is not None
    for argument in spec.input_schema["properties"]:
        assert f"| `{argument}` |" in text, f"{tool}({argument}) is not in spec §{heading[1]}"


@pytest.mark.parametrize("code", [*ERROR_CODES, *WARNING_CODES])
def test_every_lint_code_is_in_the_spec(code: str) -> None:
    assert f"| `{code}` |" in section("6")


@pytest.mark.parametrize("status", ["advanced", "completed", "unmatched", "branched", "stalled"])
def test_every_status_is_in_the_spec(status: str) -> None:
    assert f"| `{status}` |" in section("5")


def test_the_spec_example_is_a_clean_flow() -> None:
    example = re.search(r"```yaml\n(.*?)```", section("1.4"), re.DOTALL)
    assert example is not None
    categories, problems = load_categories(REPO / "flows" / "categories.yaml")
    assert categories is not None, problems
    flow, findings = build_flow(example.group(1), categories=categories)
    assert findings == []
    assert flow is not None
    assert {node.kind for node in flow.nodes.values()} == {"ask", "tell", "collect", "end"}
