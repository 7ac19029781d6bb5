"""The database-free tests run in the SQLite pass only (tests/support/passes.py, ADR
0085): the rule finds what reaches a database or a server, and every module of the
database-free directories reaches neither."""

from __future__ import annotations

import inspect

from tests import conftest
from tests.support import passes
from tests.support.paths import REPO


def test_a_module_that_starts_a_server_is_not_database_free() -> None:
    module = REPO / "tests" / "flows_app" / "test_flow_reload.py"
    found = passes.violations(
        markers=["slow"], fixtures=["live"], sources={"m": module.read_text(encoding="utf-8")}
    )
    assert "m names 'start_server'" in found and "m names 'fresh_database'" in found


def test_the_server_fixture_and_the_database_fixtures_are_not_database_free() -> None:
    source = {"server": inspect.getsource(conftest.server)}
    assert passes.violations(markers=[], fixtures=[], sources=source) == ["server names 'serving('"]
    assert passes.violations(markers=["django_db"], fixtures=["ops_client", "client"], sources={})
    assert passes.violations(markers=[], fixtures=["server"], sources={}) == ["the fixture server"]


def test_no_module_of_a_database_free_directory_names_a_database_or_a_server() -> None:
    modules = [
        path
        for directory in passes.DATABASE_FREE_DIRS
        for path in sorted((REPO / directory).rglob("*.py"))
    ]
    assert len(modules) > 20
    for path in modules:
        text = path.read_text(encoding="utf-8")
        assert passes.violations(markers=[], fixtures=[], sources={str(path): text}) == []
        assert "django_db" not in text, path
