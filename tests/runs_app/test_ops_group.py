"""The "Ops" group that runs_app's migration 0004 creates, and undoes."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def ops_permissions() -> set[str]:
    group = Group.objects.get(name="Ops")
    return {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()}


def test_the_ops_group_may_view_runs_steps_and_flow_versions_and_nothing_else() -> None:
    assert ops_permissions() == {
        "runs_app.view_run",
        "runs_app.view_step",
        "flows_app.view_flowversion",
    }


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_the_migration_is_reversible() -> None:
    call_command("migrate", "runs_app", "0003", verbosity=0)
    assert not Group.objects.filter(name="Ops").exists()
    call_command("migrate", "runs_app", verbosity=0)
    assert "runs_app.view_run" in ops_permissions()
