"""Which tests run in one pass only (ADR 0085): those whose subject cannot depend on the
pass's database. `scripts/dev.py test` runs pytest on SQLite and on PostgreSQL; these run
in the SQLite pass only, and the PostgreSQL pass deselects them and says how many. They
are the database-free tests (below), and the tests of what a client adds to a server
that stands on either database (``browser_or_client``): a browser's pages, a client
library's protocol.

A test is database-free when it is under one of DATABASE_FREE_DIRS, its file is marked
``database_free``, or it is a doctest of the source packages whose examples name none of
USES (the others run in both passes). ``tests/conftest.py`` checks
every such test at collection, in every pass: it fails the run, naming the test and what
it uses, when one asks for the database (the ``django_db`` marker, a database fixture)
or when its module or one of its fixtures names a way to reach a server, a process of
ours or the pass's database (USES)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable
from pathlib import Path

from tests.support.paths import REPO

# The tests of a client of the server, not of its storage: what a browser makes of the pages
# (layout, scripts, themes, keys, contrast) and what each client library makes of the
# protocol. What the pages show and the tools answer is proven in both passes without them
# (Django's test client, the SDK's client), so that a database shows only there.
BROWSER_FIXTURES = frozenset({"browser"})
CLIENT_DIRS = ("tests/clients",)


def browser_or_client(path: Path, fixtures: Iterable[str]) -> bool:
    """
    >>> browser_or_client(REPO / "tests/runs_app/test_x_browser.py", ["page", "browser"])
    True
    >>> browser_or_client(REPO / "tests/clients/test_clients.py", ["client_report"])
    True
    >>> browser_or_client(REPO / "tests/runs_app/test_pages.py", ["client", "db"])
    False
    """
    return under(path, CLIENT_DIRS) or not BROWSER_FIXTURES.isdisjoint(fixtures)


# Whole directories of database-free tests: the domain (pure Python, never Django:
# tests/guidepost/test_layering.py holds the package to it).
DATABASE_FREE_DIRS = ("tests/flowcore",)

# Fixtures that reach a database or a server; a test's fixture names are the closure of
# what it asks for, so a fixture that needs one of these is caught through it.
# (django_db_blocker is in every test's closure: pytest-django's autouse fixtures hold
# the database blocked for any test without the marker or one of these.)
DATABASE_OR_SERVER_FIXTURES = frozenset(
    {
        "db",
        "transactional_db",
        "django_db_setup",
        "django_db_reset_sequences",
        "django_db_serialized_rollback",
        "django_assert_num_queries",
        "django_assert_max_num_queries",
        "client",
        "admin_client",
        "admin_user",
        "django_user_model",
        "live_server",
        "server",
    }
)

# What a module or a fixture's source names when it reaches a server, a process of ours
# (which opens the database it is given) or the pass's database.
USES = (
    "start_server",
    "serving(",
    "fresh_database",
    "guidepost_command",
    "django_eval",
    "guidepost.cli",
    '"guidepost-mcp"',  # the console script, as a command's first word
    '"manage.py"',
    "DATABASE_URL",
    "uses_postgres",
    "tests.support.browser",
    "django.db",
)


@functools.cache  # asked for every test's module and fixtures, at every collection
def relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(REPO).as_posix()
    except ValueError:
        return path.as_posix()


def in_database_free_dir(path: Path) -> bool:
    """
    >>> in_database_free_dir(REPO / "tests/flowcore/run/engine/test_resolve.py")
    True
    >>> in_database_free_dir(REPO / "tests/flows_app/test_drafts.py")
    False
    """
    return under(path, DATABASE_FREE_DIRS)


def under(path: Path, directories: Iterable[str]) -> bool:
    where = relative(path)
    return any(where == d or where.startswith(d + "/") for d in directories)


def violations(
    *, markers: Iterable[str], fixtures: Iterable[str], sources: dict[str, str]
) -> list[str]:
    """What makes a test that should be database-free reach a database or a server:
    its markers, the names of its fixtures (their closure), and the source texts that
    run for it (its module's, its fixtures'), each under a name for the message.

    >>> violations(markers=["parametrize"], fixtures=["tmp_path"], sources={"m.py": "x = 1"})
    []
    >>> violations(markers=["django_db"], fixtures=["db"], sources={})
    ['the django_db marker', 'the fixture db']
    >>> violations(markers=[], fixtures=[], sources={"m.py": "start_server(...)"})
    ["m.py names 'start_server'"]
    """
    found = ["the django_db marker"] if "django_db" in markers else []
    found += [f"the fixture {name}" for name in sorted(set(fixtures) & DATABASE_OR_SERVER_FIXTURES)]
    for where, text in sources.items():
        found += [f"{where} names {word!r}" for word in USES if word in text]
    return found


def fixture_sources(fixturedefs: Iterable[object]) -> dict[str, str]:
    """The source of each fixture function defined in the repository's tests (pytest's
    and plugins' own fixtures are judged by their names)."""
    sources = {}
    for fixturedef in fixturedefs:
        found = _fixture_source(getattr(fixturedef, "func", None))
        if found is not None:
            where, source = found
            sources[f"the fixture {getattr(fixturedef, 'argname', '?')} ({where})"] = source
    return sources


@functools.cache
def _fixture_source(func: object) -> tuple[str, str] | None:
    """(its file, its source) of a fixture function of the repository's tests, else None."""
    try:
        path = Path(inspect.getfile(func))  # type: ignore[arg-type]
    except TypeError:
        return None
    where = relative(path)
    return (where, inspect.getsource(func)) if where.startswith("tests/") else None  # type: ignore[arg-type]
