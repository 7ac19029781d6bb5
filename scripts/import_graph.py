"""The project's import graph, measured: which packages import each other, which modules
import in a circle, and how many lines each room holds.

    python3 scripts/import_graph.py

Every import counts (at the top of a module, inside a function, under TYPE_CHECKING), as
the layering test (tests/guidepost/test_layering.py) counts them. Migrations are left out:
they name models by their app label, not by import. Needs only the standard library.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("guidepost", "flows_app", "access_app", "runs_app")
# The rooms lines are counted for: a package, or a folder of one worth naming apart.
ROOMS = (
    "flows_app/domain",
    "flows_app",
    "access_app",
    "runs_app/mcp",
    "runs_app",
    "guidepost/mcp",
    "guidepost",
    "tests",
)


def source_files() -> Iterator[Path]:
    for package in PACKAGES:
        root = REPO / package
        if root.is_dir():
            yield from (path for path in root.rglob("*.py") if "migrations" not in path.parts)


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, modules: set[str]) -> Iterator[tuple[str, int, bool]]:
    """(module, line, at the top level) for each import in ``path``, relative imports
    resolved; ``from a import b`` names a.b when that is a module, else a."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        top = id(node) in top_level
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, top
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                yield (submodule if submodule in modules else module), node.lineno, top


def import_graph(top_level_only: bool = False) -> dict[str, set[str]]:
    """Project module → the project modules it imports (itself and its own package's
    re-exports left out: a package's __init__ importing its modules is no circle)."""
    files = {module_name(path): path for path in source_files()}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        targets = {
            module
            for module, _line, top in imported_names(path, set(files))
            if module in files and (top or not top_level_only)
        }
        graph[name] = {t for t in targets if t != name and not name.startswith(t + ".")}
    return graph


def package_of(module: str) -> str:
    return module.split(".")[0]


def unit_of(module: str) -> str:
    """The layering unit: flows_app.domain is a unit of its own, below flows_app."""
    return "flows_app.domain" if module.startswith("flows_app.domain") else package_of(module)


def edges_between(graph: dict[str, set[str]], unit: object) -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()
    for source, targets in graph.items():
        for target in targets:
            a, b = unit(source), unit(target)  # type: ignore[operator]
            if a != b:
                counts[(a, b)] += 1
    return counts


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    sys.setrecursionlimit(10_000)

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


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
    for title, unit in (("packages", package_of), ("layering units", unit_of)):
        counts = edges_between(graph, unit)
        out.append(f"imports between {title} (importer -> imported: module edges):")
        out.extend(f"  {a} -> {b}: {n}" for (a, b), n in sorted(counts.items()))
        mutual = sorted({tuple(sorted(pair)) for pair in counts if pair[::-1] in counts})
        out.append(
            f"  {title} importing each other: "
            + (", ".join(f"{a} <-> {b}" for a, b in mutual) if mutual else "none")
        )
    for label, only_top in (("any import", False), ("top-level imports only", True)):
        found = cycles(import_graph(top_level_only=only_top))
        out.append(f"module cycles ({label}): {len(found)}")
        out.extend(f"  {' , '.join(component)}" for component in found)
    out.append("lines per room (Python files, migrations left out):")
    for room, (files, lines) in lines_per_room().items():
        out.append(f"  {room + '/':22} {files:4} files {lines:7} lines")
    return "\n".join(out)


if __name__ == "__main__":
    print(report())
