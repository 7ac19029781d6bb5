"""docs/tools.md matches the code: every tool, argument, result key, error and lint code.

The error strings are read from the source itself (the first argument of every
``Refusal``, ``InvalidInput`` and ``StepNotAllowed`` the project raises), so a new
error cannot ship undocumented.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

import pytest

from flowcore.common import errors
from flowcore.flow.findings import ERROR_CODES, WARNING_CODES
from guidepost.mcp.tools import registry
from tests.support.paths import REPO

# Reads the repository's text and code: no database, no server (tests/support/passes.py).
pytestmark = pytest.mark.database_free

TOOLS_MD = (REPO / "docs" / "tools.md").read_text(encoding="utf-8")
# The error family: Refusal and every subclass of it (NotFound, InvalidInput, ...).
REFUSALS = {
    name
    for name, value in vars(errors).items()
    if isinstance(value, type) and issubclass(value, errors.Refusal)
}
# Every word written as code in the page: `guide_back`, `{id, kind, say}` ...
CODE_WORDS = {
    word for span in re.findall(r"`([^`]+)`", TOOLS_MD) for word in re.findall(r"\w+", span)
}
SOURCES = [
    path
    for room in ("flowcore", "flows_app", "access_app", "runs_app", "guidepost")
    for path in sorted((REPO / room).rglob("*.py"))
    if "migrations" not in path.parts
]


def _strings_assigned(tree: ast.AST, name: str) -> list[str]:
    """String constants assigned to ``name`` anywhere in the module."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                if isinstance(node.value.value, str):
                    found.append(node.value.value)
    return found


def raised_errors() -> Iterator[tuple[str, str]]:
    """(error string, where) for every refusal constructed in the project's code."""
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name not in REFUSALS:
                continue
            first = node.args[0]
            where = f"{path.relative_to(REPO)}:{node.lineno}"
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield first.value, where
            elif isinstance(first, ast.Name):
                strings = _strings_assigned(tree, first.id)
                assert strings, f"{where}: cannot read the error strings of {first.id}"
                for text in strings:
                    yield text, where
            else:
                pytest.fail(f"{where}: an error string must be a literal (or a name set to one)")


def test_the_error_list_is_read_from_the_source() -> None:
    errors = {text for text, _ in raised_errors()}
    assert {"run not found", "invalid arguments", "run is stalled", "internal error"} <= errors


@pytest.mark.parametrize(("error", "where"), sorted(set(raised_errors())))
def test_every_error_string_is_documented(error: str, where: str) -> None:
    assert f"| `{error}` |" in TOOLS_MD, f"{error!r} ({where}) is missing from docs/tools.md"


@pytest.mark.parametrize("tool", [t.name for t in registry.all()])
def test_every_tool_and_argument_is_documented(tool: str) -> None:
    assert f"## {tool}\n" in TOOLS_MD
    section = TOOLS_MD.split(f"## {tool}\n", 1)[1].split("\n## ", 1)[0]
    spec = registry.get(tool)
    assert spec is not None
    for argument in spec.input_schema["properties"]:
        assert f"| `{argument}` |" in section, f"{tool}({argument}) is not in its section"


def _keys(schema: Any) -> Iterator[str]:
    if isinstance(schema, dict):
        for key, value in schema.get("properties", {}).items():
            yield key
            yield from _keys(value)
        for value in schema.values():
            if isinstance(value, dict | list):
                yield from _keys(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _keys(item)


@pytest.mark.parametrize("tool", [t.name for t in registry.all()])
def test_every_result_key_is_documented(tool: str) -> None:
    spec = registry.get(tool)
    assert spec is not None
    for key in set(_keys(spec.output_schema)):
        assert key in CODE_WORDS, f"{tool}'s result key {key!r} is not in docs/tools.md"


@pytest.mark.parametrize("code", [*ERROR_CODES, *WARNING_CODES])
def test_every_lint_code_is_documented(code: str) -> None:
    assert f"| `{code}` |" in TOOLS_MD


@pytest.mark.parametrize("status", ["advanced", "completed", "unmatched", "branched", "stalled"])
def test_every_status_is_documented(status: str) -> None:
    assert f"| `{status}` |" in TOOLS_MD
