"""The house keeps its floors: each floor imports only the floors below it, the core is
Django-free, and no module or package imports in a circle.

Every import counts: at the top of a module, inside a function, under TYPE_CHECKING
(``scripts/import_graph.py`` reads them, and prints the whole graph).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from types import ModuleType

import pytest

from tests.support.paths import REPO

# Reads the repository's text and code: no database, no server (tests/support/passes.py).
pytestmark = pytest.mark.database_free

# The floors, as data: which floor may import which. Each imports only floors below it;
# nothing imports guidepost (settings name modules by dotted path, which is no import).
CORE = frozenset({"flowcore.common", "flowcore.flow", "flowcore.run"})
MAY_IMPORT: dict[str, frozenset[str]] = {
    "flowcore.common": frozenset(),
    "flowcore.flow": frozenset({"flowcore.common"}),
    "flowcore.run": frozenset({"flowcore.common", "flowcore.flow"}),
    "flowcore.checks": CORE,
    "flowcore.drawing": CORE,
    "access_app": CORE | {"flowcore.checks", "flowcore.drawing"},
    # Events and webhooks: below flows and runs, which record events in their transactions
    # (spec §8); it knows neither (the data of an event is theirs to shape).
    "events_app": CORE | {"flowcore.checks", "flowcore.drawing", "access_app"},
    "flows_app": CORE | {"flowcore.checks", "flowcore.drawing", "access_app", "events_app"},
    "runs_app": CORE
    | {"flowcore.checks", "flowcore.drawing", "access_app", "events_app", "flows_app"},
    "guidepost": CORE
    | {"flowcore.checks", "flowcore.drawing", "access_app", "events_app", "flows_app", "runs_app"},
}
CORE_DIR = REPO / "flowcore"


def load_import_graph() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "import_graph", REPO / "scripts" / "import_graph.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


graphs = load_import_graph()


def unit_of(module: str) -> str | None:
    """The unit ``module`` belongs to; None for a module not of the project."""
    if module.split(".")[0] not in graphs.PACKAGES:
        return None
    unit = graphs.unit_of(module)
    assert unit in MAY_IMPORT, f"{module} is in no unit of the table"
    return str(unit)


def test_the_table_names_every_floor_and_only_them() -> None:
    assert list(MAY_IMPORT) == list(graphs.FLOORS)
    assert {floor.split(".")[0] for floor in MAY_IMPORT} == set(graphs.PACKAGES)


def test_every_unit_imports_only_the_units_below_it() -> None:
    against = sorted(
        f"{found.importer}:{found.line} imports {found.imported} ({source} may not import {target})"
        for found in graphs.project_imports(migrations=True)
        if (target := unit_of(found.imported)) is not None
        and (source := unit_of(found.importer)) != target
        and target not in MAY_IMPORT[str(source)]
    )
    assert against == []


def test_the_table_is_a_layering_each_unit_below_the_ones_that_may_import_it() -> None:
    order = list(MAY_IMPORT)
    for position, unit in enumerate(order):
        assert MAY_IMPORT[unit] <= set(order[:position]), unit


def test_no_module_imports_another_that_imports_it_back() -> None:
    assert graphs.cycles(graphs.import_graph()) == []


def test_no_package_imports_another_that_imports_it_back() -> None:
    """Packages and the core's packages alike: no two of them import each other, even
    through modules that do not form a circle themselves."""
    packages = {
        (package(found.importer), package(found.imported))
        for found in graphs.project_imports(migrations=True)
        if found.imported.split(".")[0] in graphs.PACKAGES
    }
    mutual = sorted((a, b) for a, b in packages if a < b and (b, a) in packages)
    assert mutual == []


def package(module: str) -> str:
    """The package holding ``module``: its top-level one, or a package of the core's."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "flowcore" and len(parts) > 2 else parts[0]


# --- the core: pure Python ----------------------------------------------------------------------


def core_modules() -> list[str]:
    return sorted(graphs.module_name(path) for path in CORE_DIR.rglob("*.py"))


def test_the_core_imports_no_django() -> None:
    django = sorted(
        f"{found.importer}:{found.line} imports {found.imported}"
        for found in graphs.project_imports()
        if found.importer.split(".")[0] == "flowcore" and found.imported.split(".")[0] == "django"
    )
    assert django == []


def test_importing_every_core_module_loads_no_django() -> None:
    """What the imports above cannot see: a library of the core's that loads Django."""
    imports = "; ".join(f"import {name}" for name in core_modules())
    code = (
        f"import sys; {imports}; "
        "bad = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_core_source_names_django() -> None:
    mentions = [
        f"{path.relative_to(REPO)}:{number}"
        for path in CORE_DIR.rglob("*.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "django" in line
    ]
    assert mentions == []


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("flows_app.views", "runs_app.selectors"),
        ("access_app.failures", "runs_app.selectors"),
        ("flowcore.run.engine", "access_app.callers"),
        ("flowcore.flow.files", "flowcore.checks.flow_tests"),
        ("flowcore.run.migration", "flowcore.checks.guarantees"),
        ("flowcore.checks.scenarios", "flowcore.drawing.diagram"),
        ("runs_app.views", "guidepost.views"),
    ],
)
def test_the_table_refuses_the_imports_the_layering_forbids(importer: str, imported: str) -> None:
    source, target = unit_of(importer), unit_of(imported)
    assert target not in MAY_IMPORT[str(source)]
