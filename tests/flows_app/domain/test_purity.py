"""The rooms keep their rules: the domain is Django-free, and no module imports in a loop."""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

DOMAIN = REPO / "flows_app" / "domain"
PACKAGES = ("guidepost", "flows_app", "access_app", "runs_app")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def domain_modules() -> list[str]:
    return sorted(module_name(path) for path in DOMAIN.rglob("*.py"))


def test_the_domain_folder_has_the_modules_the_architecture_names() -> None:
    expected = {
        "flows_app.domain.building",
        "flows_app.domain.capture",
        "flows_app.domain.coverage",
        "flows_app.domain.diagram",
        "flows_app.domain.engine",
        "flows_app.domain.errors",
        "flows_app.domain.files",
        "flows_app.domain.findings",
        "flows_app.domain.flow_tests",
        "flows_app.domain.folding",
        "flows_app.domain.graph",
        "flows_app.domain.graph_layout",
        "flows_app.domain.guarantees",
        "flows_app.domain.limits",
        "flows_app.domain.lint",
        "flows_app.domain.model",
        "flows_app.domain.names",
        "flows_app.domain.paths",
        "flows_app.domain.scenarios",
        "flows_app.domain.state",
        "flows_app.domain.text_tree",
        "flows_app.domain.yaml_safe",
    }
    assert expected <= set(domain_modules())


def test_importing_every_domain_module_loads_no_django() -> None:
    imports = "; ".join(f"import {name}" for name in domain_modules())
    code = (
        f"import sys; {imports}; "
        "bad = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_domain_source_names_django() -> None:
    mentions = [
        f"{path.relative_to(REPO)}:{number}"
        for path in DOMAIN.rglob("*.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "django" in line
    ]
    assert mentions == []


def project_imports(path: Path) -> set[str]:
    """The project modules ``path`` imports (``from a.b import c`` counts a.b.c when it is one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] in PACKAGES}


def import_graph() -> dict[str, set[str]]:
    modules = {
        module_name(path): path
        for package in PACKAGES
        for path in (REPO / package).rglob("*.py")
        if "migrations" not in path.parts
    }
    return {name: project_imports(path) & modules.keys() - {name} for name, path in modules.items()}


def test_no_module_imports_another_that_imports_it_back() -> None:
    graph = import_graph()
    # A package's __init__ re-exporting its own modules is not a loop between rooms.
    for name, imported in graph.items():
        graph[name] = {m for m in imported if not name.startswith(m + ".")}
    try:
        graphlib.TopologicalSorter(graph).static_order()
        cycle: list[str] = []
    except graphlib.CycleError as exc:
        cycle = exc.args[1]
    assert cycle == []


def test_apps_never_import_from_the_project_package_upward() -> None:
    graph = import_graph()
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        if not name.startswith("guidepost")
        for target in targets
        if target.startswith("guidepost")
    )
    assert upward == []
