"""The "Ops" group that runs_app's migration 0005 creates, and undoes; and what 0013 adds
to it and to "Support lead" (the permission to resolve stalled runs, spec §5.9)."""

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


def group_permissions(name: str) -> set[str]:
    group = Group.objects.get(name=name)
    return {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()}


def test_the_ops_group_may_view_runs_steps_flow_versions_and_resolve_runs_only() -> None:
    assert ops_permissions() == {
        "runs_app.view_run",
        "runs_app.view_step",
        "flows_app.view_flowversion",
        "runs_app.resolve_run",
    }


def test_support_leads_may_read_resolve_and_erase_runs_besides_reviewing_drafts() -> None:
    assert group_permissions("Support lead") == {
        "flows_app.approve_draft",
        "flows_app.view_draft",
        "flows_app.view_flowversion",
        "runs_app.view_run",
        "runs_app.view_step",
        "runs_app.resolve_run",
        "runs_app.erase_run",
        "runs_app.see_personal_values",
    }


def test_the_resolve_permission_migration_is_reversible_and_can_be_run_again() -> None:
    migration = importlib.import_module(
        "runs_app.migrations.0013_resolve_permission_for_ops_and_support_leads"
    )
    target = ("runs_app", "0013_resolve_permission_for_ops_and_support_leads")
    state = MigrationExecutor(connection).loader.project_state(target)
    migration.take_back(state.apps, None)
    assert "runs_app.resolve_run" not in group_permissions("Ops")
    # Taken back: what 0013 gave; what the erasure's migration gives (runs_app 0015) stays.
    assert group_permissions("Support lead") == {
        "flows_app.approve_draft",
        "flows_app.view_draft",
        "flows_app.view_flowversion",
        "runs_app.erase_run",
        "runs_app.see_personal_values",
    }
    migration.grant(state.apps, None)
    migration.grant(state.apps, None)
    assert "runs_app.resolve_run" in group_permissions("Ops")
    assert "runs_app.resolve_run" in group_permissions("Support lead")


def test_the_migration_is_reversible_and_can_be_run_again() -> None:
    migration = importlib.import_module("runs_app.migrations.0005_ops_group")
    state = MigrationExecutor(connection).loader.project_state(("runs_app", "0005_ops_group"))
    migration.delete_ops_group(state.apps, None)
    assert not Group.objects.filter(name="Ops").exists()
    migration.create_ops_group(state.apps, None)
    migration.create_ops_group(state.apps, None)  # a second run changes nothing
    assert ops_permissions() - {"runs_app.resolve_run"} == {
        "runs_app.view_run",
        "runs_app.view_step",
        "flows_app.view_flowversion",
    }
