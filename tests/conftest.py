from __future__ import annotations

import functools
import hashlib
import importlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _pytest.doctest import DoctestItem

from tests.support import passes
from tests.support.paths import BUNDLED_FLOWS, REPO
from tests.support.servers import Server, copy_flows, serving, uses_postgres


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """On PostgreSQL, the test databases carry a mark of this checkout: two checkouts
    testing against one server at once (two clones, CI jobs on one host) would otherwise
    drop each other's `test_NAME_gw0` in the middle of a run.

    Under `scripts/dev.py mutate`, mutmut forks a pytest run per mutant, two at once:
    each process gets an SQLite test database file of its own (its pid appended)."""
    from django.conf import settings

    if uses_postgres():
        checkout = hashlib.sha256(str(REPO).encode()).hexdigest()[:8]
        for db_settings in settings.DATABASES.values():
            test = db_settings.setdefault("TEST", {})
            test["NAME"] = f"{test.get('NAME') or 'test_' + db_settings['NAME']}_{checkout}"
    if "MUTANT_UNDER_TEST" not in os.environ:
        return
    for db_settings in settings.DATABASES.values():
        name = db_settings.get("TEST", {}).get("NAME")
        if name and name != ":memory:":
            base = str(name).split("_mutant")[0]
            db_settings["TEST"]["NAME"] = f"{base}_mutant{os.getpid()}"


FAST_HASHER = "django.contrib.auth.hashers.MD5PasswordHasher"

# Fixtures that reach the database: a test using one needs the test database made.
DATABASE_FIXTURES = {"db", "transactional_db", "django_db_setup", "client", "admin_client"}


def pytest_configure(config: pytest.Config) -> None:
    """The test process's flows directory is a copy of the checkout's ``flows/``, made for
    this process: a test, or a command it runs without ``--flows``, that approves or
    restores a flow writes there, never the checkout's, which the other pass and the
    other worker copy for their servers (``copy_flows``) at the same time."""
    from django.conf import settings

    made = Path(tempfile.mkdtemp(prefix="guidepost-test-flows-"))
    config.stash[FLOWS_COPY] = made
    flows = copy_flows(made / "flows").resolve()
    settings.GUIDEPOST_FLOWS_DIR = flows
    os.environ["GUIDEPOST_FLOWS_DIR"] = str(flows)


def pytest_unconfigure(config: pytest.Config) -> None:
    made = config.stash.get(FLOWS_COPY, None)
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)


FLOWS_COPY = pytest.StashKey[Path]()
DESELECTED = "database_free_deselected"


def flows_snapshot() -> list[tuple[str, int, int]]:
    """Each file under the checkout's flows/: its path, size and time of last change."""
    found = []
    for root, _, files in os.walk(BUNDLED_FLOWS):
        for name in files:
            stat = os.stat(os.path.join(root, name))
            found.append((os.path.join(root, name), stat.st_size, stat.st_mtime_ns))
    return sorted(found)


@pytest.fixture(autouse=True)
def checkout_flows_untouched(request: pytest.FixtureRequest) -> Iterator[None]:
    """No test writes the checkout's flows/ (not even to put it back): both passes and
    their workers copy it for their servers at any moment. A change during a test fails
    that test, naming the files."""
    before = flows_snapshot()
    yield
    after = flows_snapshot()
    if after != before:
        changed = sorted({f[0] for f in set(before) ^ set(after)})
        pytest.fail(
            f"the checkout's flows/ changed during {request.node.nodeid}: {changed}. Tests "
            "write a copy (copy_flows, the flows_copy fixture; a command run without "
            "--flows writes the process's GUIDEPOST_FLOWS_DIR, a copy). If this test did "
            "not write it, a process running at the same time in this checkout did.",
            pytrace=False,
        )


def database_free(item: pytest.Item) -> bool:
    """A test that touches no database and starts no server (tests/support/passes.py)."""
    if isinstance(item, DoctestItem):
        in_tests = passes.relative(item.path).startswith("tests/")
        return not in_tests and not database_free_violations(item)
    return (
        passes.in_database_free_dir(item.path)
        or item.get_closest_marker("database_free") is not None
    )


@functools.cache
def module_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def database_free_violations(item: pytest.Item) -> list[str]:
    if isinstance(item, DoctestItem):
        assert item.dtest is not None
        source = "".join(example.source for example in item.dtest.examples)
        return passes.violations(markers=[], fixtures=[], sources={item.name: source})
    definitions = item._fixtureinfo.name2fixturedefs.values()
    module = module_text(item.path)
    return passes.violations(
        markers=[marker.name for marker in item.iter_markers()],
        fixtures=getattr(item, "fixturenames", ()),
        sources={
            passes.relative(item.path): module,
            **passes.fixture_sources(f for defs in definitions for f in defs),
        },
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files marked slow first, so that the pytest-xdist workers (which take one file
    at a time, in this order) do not end on one long file while the others wait (ADR 0085).

    The database-free tests are checked (none may reach a database or a server). They,
    and the tests of a browser or a client library, run in the SQLite pass only: on
    PostgreSQL they are deselected, and the summary says how many (ADR 0085).

    Under `scripts/dev.py mutate` for a group of the Django-free domain, a mutant is
    judged by the tests that need no database (ADR 0017): the domain's own tests, not
    the services and pages that happen to pass through it."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    free = [item for item in items if database_free(item)]
    wrong = {item.nodeid: found for item in free if (found := database_free_violations(item))}
    if wrong:
        raise pytest.UsageError(
            "database-free tests (tests/support/passes.py) that reach a database or a server: "
            + "; ".join(f"{nodeid} uses {', '.join(found)}" for nodeid, found in wrong.items())
            + ". Move the test out of its database-free file, or what it uses out of it."
        )
    if uses_postgres():
        free_ids = set(map(id, free))
        clients = [
            item
            for item in items
            if id(item) not in free_ids
            and passes.browser_or_client(item.path, getattr(item, "fixturenames", ()))
        ]
        once = set(map(id, free + clients))
        config.hook.pytest_deselected(items=free + clients)
        items[:] = [item for item in items if id(item) not in once]
        counts = (len(free), len(clients))
        config.stash[DESELECTED_KEY] = counts
        if hasattr(config, "workeroutput"):
            config.workeroutput[DESELECTED] = counts
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    if os.environ.get("GUIDEPOST_MUTATION_SCOPE") != "no-database" or "__mutmut_" not in mutant:
        return
    keep, drop = [], []
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        needs_database = item.get_closest_marker("django_db") or fixtures & DATABASE_FIXTURES
        (drop if needs_database else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


DESELECTED_KEY = pytest.StashKey[tuple[int, int]]()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """Under pytest-xdist, each worker says how many tests it deselected (all collect the
    same tests)."""
    counts = getattr(node, "workeroutput", {}).get(DESELECTED)
    if counts is not None:
        node.config.stash[DESELECTED_KEY] = tuple(counts)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    free, clients = config.stash.get(DESELECTED_KEY, (0, 0))
    if free or clients:
        terminalreporter.write_line(
            f"deselected on PostgreSQL, run by the SQLite pass: {free} database-free tests "
            f"(no database, no server) and {clients} tests of a browser or a client library "
            "(what the client makes of a server, whatever its database; "
            "tests/support/passes.py, ADR 0085)"
        )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real server per test module, on its own database and flows copy."""
    tmp = tmp_path_factory.mktemp("server")
    with serving(tmp) as running:
        yield running


@pytest.fixture(scope="session", autouse=True)
def static_files_listed_once() -> Iterator[None]:
    """Django's test client builds the middleware chain anew for each client, and
    ServeStatic's middleware lists every file of the static manifest at each build, a
    stat and its headers each: about 40 ms, a third of the CPU of a test of the admin's
    pages. A server builds it once; here the listing is made once per manifest (its
    place, its time of change) and each later build gets the same files."""
    from servestatic.middleware import ServeStaticMiddleware

    original = ServeStaticMiddleware.add_files_from_manifest
    listed: dict[tuple[object, ...], tuple[dict[str, Any], list[tuple[str, str]]]] = {}

    def add_files_from_manifest(self: ServeStaticMiddleware) -> None:
        from django.contrib.staticfiles.storage import staticfiles_storage

        location = staticfiles_storage.location
        manifest = Path(location or "") / getattr(staticfiles_storage, "manifest_name", "")
        try:
            changed: int | None = manifest.stat().st_mtime_ns
        except OSError:
            changed = None
        key = (self.static_prefix, location, changed, self.keep_only_hashed_files)
        if key not in listed:
            files_before, directories_before = dict(self.files), list(self.directories)
            original(self)
            added = {url: f for url, f in self.files.items() if files_before.get(url) is not f}
            listed[key] = (added, [d for d in self.directories if d not in directories_before])
        files, directories = listed[key]
        self.files.update(files)
        for root, prefix in reversed(directories):
            self.insert_directory(root, prefix)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ServeStaticMiddleware, "add_files_from_manifest", add_files_from_manifest)
        yield


@pytest.fixture(autouse=True)
def generous_rate_limit(settings: Any) -> None:
    """Tests call as one caller, hundreds of times a second; the limits' own tests set the
    small budgets they need (the rate, drafts an hour, refusals per address).

    Passwords made in the test process are hashed with a fast hasher: PBKDF2's 1,500,000
    rounds cost a third of a CPU second per user made or signed in, and no test here pins
    the hasher (real servers keep Django's, ADR 0085)."""
    settings.GUIDEPOST_RATE_BURST = 1_000_000
    settings.GUIDEPOST_DRAFTS_PER_HOUR = 0
    settings.GUIDEPOST_REFUSED_BURST = 0
    settings.PASSWORD_HASHERS = [FAST_HASHER, *settings.PASSWORD_HASHERS]


@pytest.fixture(autouse=True)
def subscriptions_forgotten_after_each_test() -> Iterator[None]:
    """What a process knows of webhook subscriptions (``events_app.services``, up to
    GUIDEPOST_EVENTS_CACHE seconds) does not outlive the test's database: otherwise a
    test right after one that subscribed would record events, and count their INSERT."""
    yield
    from events_app.services import forget_subscriptions

    forget_subscriptions()


@pytest.fixture(autouse=True)
def rate_leases_forgotten_after_each_test() -> Iterator[None]:
    """The tokens this process took ahead for a caller (``access_app.ratelimit``'s leases,
    up to a second) do not outlive the test: otherwise whether a test's first call pays the
    bucket's statement would depend on the test before it."""
    yield
    from access_app.ratelimit import leases_forget

    leases_forget()


@pytest.fixture(autouse=True)
def refusal_summaries_forgotten_after_each_test() -> Iterator[None]:
    """Refusals summed in this process (``access_app.audit.refusal_summaries``: no timer
    writes them in a test's process) do not outlive the test: otherwise a later test that
    writes them (``write_due``) would write an earlier test's 401s too."""
    yield
    from access_app.audit import refusal_summaries

    refusal_summaries.due(everything=True)


@pytest.fixture
def flows_copy(tmp_path: Path) -> Path:
    return copy_flows(tmp_path / "flows")


# --- people and runs for the pages and the JSON API ----------------------------------------------

OPS_PASSWORD = "ops-pass-4821"


# What the migrations give the groups, in the migrations' order: (migration module, its
# function). The first two make the groups; the others grant them later permissions.
MIGRATED_GROUPS = [
    ("runs_app.migrations.0005_ops_group", "create_ops_group"),
    ("flows_app.migrations.0006_support_lead_group", "create_group"),
    ("runs_app.migrations.0013_resolve_permission_for_ops_and_support_leads", "grant"),
    ("runs_app.migrations.0015_erasure", "grant_support_lead"),
]
# Each group with a permission the last of those migrations grants it: both there, the
# groups are as migrated.
LAST_GRANTS = {"Ops": "resolve_run", "Support lead": "erase_run"}


@pytest.fixture(autouse=True)
def groups_as_migrated(request: pytest.FixtureRequest) -> None:
    """Every test with the database finds the groups as the migrations left them."""
    if request.node.get_closest_marker("django_db") is not None:
        request.getfixturevalue("migrated_groups")


@pytest.fixture
def migrated_groups(db: None) -> None:
    """The groups the migrations make ("Ops", "Support lead") and what they grant them,
    made again by the migrations' own functions when a group or a grant is missing: a
    transactional test that ran before in the same worker flushed every table, the
    migrations' rows included, or left a group made by an older fixture (and under
    pytest-xdist, which tests ran before is not fixed). One query when all is there."""
    from django.contrib.auth.models import Group
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor
    from django.db.models import Q

    granted = Q()
    for name, codename in LAST_GRANTS.items():
        granted |= Q(name=name, permissions__codename=codename)
    if Group.objects.filter(granted).count() == len(LAST_GRANTS):
        return
    # The migrations' models, as a migration gets them (never the project's own registry,
    # whose app configs a migration may change).
    state = MigrationExecutor(connection).loader.project_state()
    for module, make in MIGRATED_GROUPS:
        getattr(importlib.import_module(module), make)(state.apps, None)


@pytest.fixture
def ops_user(migrated_groups: None) -> Any:
    """A staff member in the "Ops" group (created by runs_app's migration 0005)."""
    from django.contrib.auth.models import Group, User

    group = Group.objects.get(name=importlib.import_module(MIGRATED_GROUPS[0][0]).GROUP)
    user = User.objects.create_user("ops", password=OPS_PASSWORD, is_staff=True)
    user.groups.add(group)
    return user


@pytest.fixture
def ops_client(client: Any, ops_user: Any) -> Any:
    client.force_login(ops_user)
    return client
