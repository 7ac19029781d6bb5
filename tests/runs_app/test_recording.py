"""One function stores a step: ``runs_app.recording.step_record`` builds every step and
hands it to ``step_store``, so every step (an agent's, a person's, a move, an adoption,
an erasure) is hashed, chained and stored the same way.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest

from tests.support.paths import REPO

# Reads the repository's code: no database, no server (tests/support/passes.py).
pytestmark = pytest.mark.database_free

PACKAGES = ("flowcore", "access_app", "events_app", "flows_app", "runs_app", "guidepost")
# What builds a step or stores one: the model, and the store's INSERT.
STORING = {"Step", "step_append", "create", "bulk_create", "get_or_create", "update_or_create"}


def called(node: ast.Call) -> str:
    """The dotted name ``node`` calls (``Step.objects.create``), "" for anything else."""
    parts = []
    func: ast.expr = node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def step_writes() -> Iterator[str]:
    """``module.function: call`` for each call that builds or stores a step."""
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            module = ".".join(path.relative_to(REPO).with_suffix("").parts)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for function in ast.walk(tree):
                if not isinstance(function, ast.FunctionDef):
                    continue
                for node in ast.walk(function):
                    if not isinstance(node, ast.Call):
                        continue
                    name = called(node)
                    last = name.rsplit(".", 1)[-1]
                    if last in STORING and (last in ("Step", "step_append") or "Step." in name):
                        yield f"{module}.{function.name}: {name}"


def test_only_step_record_builds_a_step_and_stores_it() -> None:
    assert sorted(set(step_writes())) == [
        "runs_app.recording.step_record: Step",
        "runs_app.recording.step_record: step_store.step_append",
    ]
