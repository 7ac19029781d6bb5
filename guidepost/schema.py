"""Whether the database's schema is current, told without loading a migration.

Django's ``migrate`` with nothing to do still imports every migration of every app and
runs the project's system checks (which import the URLconf, and so the API and the
admin): most of a second before a command that only reads. The migrations on disk are
known by their file names, and those applied by one query, so a command migrates only
when a name is missing from the database.
"""

from __future__ import annotations

import importlib.util
import pkgutil

from django.apps import apps
from django.conf import settings
from django.db import DatabaseError, connection


def schema_is_current() -> bool:
    """True when every migration file of every installed app is recorded as applied.

    False when one is not, when the record itself is missing, or when the database
    cannot be read: ``migrate`` then runs, and says what is wrong if anything is.
    """
    try:
        with connection.cursor() as cursor:
            if "django_migrations" not in connection.introspection.table_names(cursor):
                return False
            cursor.execute("SELECT app, name FROM django_migrations")
            applied = set(cursor.fetchall())
    except DatabaseError:
        return False
    return all((label, name) in applied for label, name in migration_files())


def migration_files() -> list[tuple[str, str]]:
    """(app label, migration name) of every migration module on disk, as Django's loader
    finds them (a module of the app's migrations package not starting with _ or ~)."""
    found: list[tuple[str, str]] = []
    for app in apps.get_app_configs():
        package = settings.MIGRATION_MODULES.get(app.label, f"{app.name}.migrations")
        spec = importlib.util.find_spec(package) if package else None
        if spec is None or not spec.submodule_search_locations:
            continue
        found += [
            (app.label, name)
            for _, name, is_package in pkgutil.iter_modules(spec.submodule_search_locations)
            if not is_package and name[0] not in "_~"
        ]
    return found
