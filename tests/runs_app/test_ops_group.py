"""The "Ops" group that runs_app's migration 0004 creates, and undoes."""

from __future__ import annotations

import importlib

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("migrated_groups")]


def ops_permissions() -> set[str]:
    group = Group.objects.get(name="Ops")
    return {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()}


def test_the_ops_group_may_view_runs_steps_and_flow_versions_and_nothing_else() -> None:
    assert ops_permissions() == {
        "runs_app.view_run",
        "runs_app.view_step",
        "flows_app.view_flowversion",
    }


def test_the_migration_is_reversible_and_can_be_run_again() -> None:
    migration = importlib.import_module("runs_app.migrations.0005_ops_group")
    state = MigrationExecutor(connection).loader.project_state(("runs_app", "0005_ops_group"))
    migration.delete_ops_group(state.apps, None)
    assert not Group.objects.filter(name="Ops").exists()
    migration.create_ops_group(state.apps, None)
    migration.create_ops_group(state.apps, None)  # a second run changes nothing
    assert ops_permissions() == {
        "runs_app.view_run",
        "runs_app.view_step",
        "flows_app.view_flowversion",
    }
