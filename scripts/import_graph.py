"""The project's import graph, measured: which packages import each other, which modules
import in a circle, and how many lines each room holds.

    python3 scripts/import_graph.py

Every import counts (at the top of a module, inside a function, under TYPE_CHECKING), as
the layering test (tests/guidepost/test_layering.py, which reads its imports here) counts
them. Migrations are left out of the graph: they name models by app label, not by import.
Needs the standard library and the domain's pure graph algorithms.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from flowcore.common.graph import strongly_connected  # noqa: E402

PACKAGES = ("flowcore", "guidepost", "flows_app", "access_app", "events_app", "runs_app")
# The floors, bottom first: the core's concerns, then the apps, then the project. A
# module's floor is the longest name here its own name starts with. Each floor may
# import only the floors below it (tests/guidepost/test_layering.py says which).
FLOORS = (
    "flowcore.common",
    "flowcore.flow",
    "flowcore.run",
    "flowcore.checks",
    "flowcore.drawing",
    "access_app",
    "events_app",
    "flows_app",
    "runs_app",
    "guidepost",
)
# The rooms lines are counted for: a package, or a folder of one worth naming apart.
ROOMS = (
    "flowcore",
    "flows_app",
    "access_app",
    "events_app",
    "runs_app/mcp",
    "runs_app",
    "guidepost/mcp",
    "guidepost",
    "tests",
)


@dataclass(frozen=True)
class Import:
    importer: str  # the project module that imports
    imported: str  # the module imported (ours or not)
    line: int
    # Runs when the importer is imported: not inside a function, not under TYPE_CHECKING.
    at_import: bool


def source_files(*, migrations: bool = False) -> Iterator[Path]:
    for package in PACKAGES:
        root = REPO / package
        if root.is_dir():
            for path in root.rglob("*.py"):
                if migrations or "migrations" not in path.parts:
                    yield path


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class _Imports(ast.NodeVisitor):
    """Every import statement of one module, with whether it runs at import time."""

    def __init__(self, importer: str, package: str, modules: set[str]) -> None:
        self.importer, self.package, self.modules = importer, package, modules
        self.found: list[Import] = []
        self.deferred = 0  # inside a function, or under `if TYPE_CHECKING:`

    def _deferred(self, node: ast.AST) -> None:
        self.deferred += 1
        self.generic_visit(node)
        self.deferred -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _deferred

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", "")
        if name == "TYPE_CHECKING":
            self._deferred(node)
        else:
            self.generic_visit(node)

    def _add(self, module: str, node: ast.stmt) -> None:
        self.found.append(Import(self.importer, module, node.lineno, self.deferred == 0))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")
            base = base[: len(base) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        for alias in node.names:  # `from a import b` names a.b when that is a module
            submodule = f"{module}.{alias.name}"
            self._add(submodule if submodule in self.modules else module, node)


def project_imports(*, migrations: bool = False) -> list[Import]:
    """Every import of every module of the project's packages."""
    files = {module_name(path): path for path in source_files(migrations=migrations)}
    found: list[Import] = []
    for name, path in sorted(files.items()):
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        visitor = _Imports(name, package, set(files))
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        found.extend(visitor.found)
    return found


def import_graph(*, at_import_only: bool = False) -> dict[str, set[str]]:
    """Project module → the project modules it imports (itself and its own package's
    re-exports left out: a package's __init__ importing its modules is no circle)."""
    graph: dict[str, set[str]] = {module_name(path): set() for path in source_files()}
    for found in project_imports():
        source, target = found.importer, found.imported
        if target not in graph or target == source or source.startswith(target + "."):
            continue
        if found.at_import or not at_import_only:
            graph[source].add(target)
    return graph


def package_of(module: str) -> str:
    return module.split(".")[0]


def unit_of(module: str) -> str:
    """The floor ``module`` stands on (``flowcore`` itself, its package's docstring, on
    the lowest).

    >>> unit_of("flowcore.run.engine"), unit_of("runs_app.models"), unit_of("flowcore")
    ('flowcore.run', 'runs_app', 'flowcore.common')
    """
    if module == "flowcore":
        return FLOORS[0]
    return max(
        (floor for floor in FLOORS if module == floor or module.startswith(floor + ".")),
        key=len,
        default=package_of(module),
    )


def edges_between(
    graph: dict[str, set[str]], unit: Callable[[str], str]
) -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()
    for source, targets in graph.items():
        for target in targets:
            if unit(source) != unit(target):
                counts[(unit(source), unit(target))] += 1
    return counts


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module."""
    succ = {node: sorted(targets) for node, targets in graph.items()}
    components = strongly_connected(succ, sorted(graph))
    return [sorted(component) for component in components if len(component) > 1]


def lines_per_room() -> dict[str, tuple[int, int]]:
    """Room → (files, lines) of Python, each file counted in the first room that holds it."""
    counted: dict[str, tuple[int, int]] = {room: (0, 0) for room in ROOMS}
    for path in sorted(REPO.rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        if "migrations" in relative.split("/"):
            continue
        room = next((r for r in ROOMS if relative.startswith(r + "/")), None)
        if room is None:
            continue
        files, lines = counted[room]
        counted[room] = (files + 1, lines + len(path.read_text(encoding="utf-8").splitlines()))
    return {room: value for room, value in counted.items() if value[0]}


def report() -> str:
    graph = import_graph()
    out: list[str] = []
    for title, unit in (("packages", package_of), ("floors", unit_of)):
        counts = edges_between(graph, unit)
        out.append(f"imports between {title} (importer -> imported: module edges):")
        out.extend(f"  {a} -> {b}: {n}" for (a, b), n in sorted(counts.items()))
        mutual = sorted({tuple(sorted(pair)) for pair in counts if pair[::-1] in counts})
        out.append(
            f"  {title} importing each other: "
            + (", ".join(f"{a} <-> {b}" for a, b in mutual) if mutual else "none")
        )
    for label, at_import_only in (("any import", False), ("imports run at import time", True)):
        found = cycles(import_graph(at_import_only=at_import_only))
        out.append(f"module cycles ({label}): {len(found)}")
        out.extend(f"  {' , '.join(component)}" for component in found)
    out.append("lines per room (Python files, migrations left out):")
    for room, (files, lines) in lines_per_room().items():
        out.append(f"  {room + '/':22} {files:4} files {lines:7} lines")
    return "\n".join(out)


if __name__ == "__main__":
    print(report())
