"""Commands that read answer without needless start-up work (issue 46: ``drafts`` and
``webhook list`` took 4–6 s, mostly Django's ``migrate`` run on every call and its
system checks). No wall-clock threshold: what pins it is what a read never loads —
Django's migration loader, the URLconf (the API and the admin behind it), and the MCP
server stack — checked in a real process on a migrated database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from guidepost.schema import migration_files, schema_is_current
from tests.support.servers import REPO, fresh_database

# Run guidepost-mcp's main in this repository's code and report what it imported.
PROBE = """
import json, sys
from guidepost import cli
try:
    cli.main(sys.argv[1:])
finally:
    print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""
# Django's migration loader imports every migration, the URLconf the API and the admin;
# the MCP server stack is the transport only serve needs.
NEEDLESS = ("django.db.migrations.loader", "guidepost.urls", "guidepost.mcp", "mcp", "uvicorn")

# The reads that did more than start Django (drafts and migrate --dry-run never did).
READS = [["webhook", "list"], ["verify"]]


def imported_by(database_url: str, *argv: str) -> tuple[str, set[str]]:
    env = {**os.environ, "DATABASE_URL": database_url, "PYTHONPATH": str(REPO)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=REPO,
        timeout=60,
    )
    *_, modules = done.stderr.strip().splitlines()
    assert done.returncode == 0, done.stderr
    return done.stdout, set(json.loads(modules))


@pytest.mark.slow
@pytest.mark.parametrize("argv", READS, ids=lambda argv: " ".join(argv[:2]))
def test_a_read_on_a_migrated_database_loads_no_migration_urlconf_or_mcp_stack(
    tmp_path: Path, argv: list[str]
) -> None:
    with fresh_database(tmp_path) as database_url:
        _, modules = imported_by(database_url, *argv)
    assert [name for name in NEEDLESS if name in modules] == []


@pytest.mark.slow
def test_a_command_that_migrates_first_still_migrates_a_database_behind(tmp_path: Path) -> None:
    with fresh_database(tmp_path, empty=True) as database_url:
        out, modules = imported_by(database_url, "webhook", "list")
        assert out.startswith("no subscriptions")
        assert "django.db.migrations.loader" in modules  # it did migrate
        _, modules = imported_by(database_url, "webhook", "list")
        assert "django.db.migrations.loader" not in modules  # and now needs not


@pytest.mark.django_db
def test_the_schema_is_current_once_migrated_and_behind_while_a_migration_is_unrecorded() -> None:
    assert ("runs_app", "0001_initial") in migration_files()
    assert schema_is_current()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_migrations WHERE app = 'events_app'")
    assert not schema_is_current()
