"""access_app's models came from runs_app (ADR 0063): a database migrated before the move
keeps its keys, its audit trail, and the permissions and admin log entries that name them.

The test database is taken back to the migrations before the move (access_app unapplied),
filled there through the historical models as a server of that time would have, then
migrated forward again.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.management import create_permissions
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from access_app import guards, keyring
from access_app.agent_keys import key_digest, key_display
from access_app.models import AgentKey, AuditRecord

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE_THE_MOVE = ("runs_app", "0009_audit_caller_at")
MOVED = ["agentkey", "auditrecord", "failurestreak", "ratebucket"]
SECRET = "gpk_before-the-move-0123456789abcdefghij"


def migrate(*, before_the_move: bool = False) -> Any:
    """Migrate the test database to before the move (access_app unapplied, runs_app at
    0009), or to every app's latest migration; the historical apps of the state reached."""
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    if before_the_move:
        executor.migrate([("access_app", None)])
        reached = [node for node in latest if node[0] not in ("access_app", "runs_app")]
        reached.append(BEFORE_THE_MOVE)
    else:
        executor.migrate(latest)
        reached = latest
    ContentType.objects.clear_cache()
    executor.loader.build_graph()
    return executor.loader.project_state(reached).apps


def labels_of_moved_models() -> set[str]:
    types = ContentType.objects.filter(model__in=MOVED)
    return {f"{t.app_label}.{t.model}" for t in types}


def fill_as_before_the_move(apps: Any) -> None:
    """What a server before the move left: a key, its audit record, a group allowed to
    manage keys (and a member), and the admin's record of adding the key."""
    config = apps.get_app_config("runs_app")
    config.models_module = True  # as Django's post_migrate makes them, for the old models
    create_permissions(config, apps=apps, verbosity=0)
    config.models_module = None
    key = apps.get_model("runs_app", "AgentKey").objects.create(
        name="support-bot",
        display=key_display(SECRET),
        digest=key_digest(SECRET),
        created_at=timezone.now(),
    )
    apps.get_model("runs_app", "AuditRecord").objects.create(
        at=timezone.now(), key_name="support-bot", tool="guide_flows", outcome="ok",
        status=200, duration_ms=1.0,
    )  # fmt: skip
    permission = apps.get_model("auth", "Permission").objects.filter(
        content_type__app_label="runs_app", codename__in=["view_agentkey", "change_agentkey"]
    )
    group = apps.get_model("auth", "Group").objects.create(name="Key keepers")
    group.permissions.set(permission)
    user = apps.get_model("auth", "User").objects.create(username="keeper", is_staff=True)
    user.groups.add(group)
    content_type = apps.get_model("contenttypes", "ContentType").objects.get(
        app_label="runs_app", model="agentkey"
    )
    apps.get_model("admin", "LogEntry").objects.create(
        user=user, content_type=content_type, object_id=str(key.pk),
        object_repr="support-bot", action_flag=1, action_time=timezone.now(),
    )  # fmt: skip


def test_a_database_from_before_the_move_keeps_its_keys_records_and_permissions() -> None:
    old = migrate(before_the_move=True)
    assert labels_of_moved_models() <= {f"runs_app.{model}" for model in MOVED}
    fill_as_before_the_move(old)

    migrate()

    assert labels_of_moved_models() == {f"access_app.{model}" for model in MOVED}
    keyring.forget()
    key = guards.authenticate_key(
        f"Bearer {SECRET}", exposed=True, find=keyring.lookup, any_key=keyring.any_key
    )
    assert key is not None and key.name == "support-bot"
    assert AuditRecord.objects.get().key_name == "support-bot"
    keeper = User.objects.get(username="keeper")
    assert keeper.has_perm("access_app.view_agentkey")
    assert keeper.has_perm("access_app.change_agentkey")
    assert not keeper.has_perm("access_app.delete_agentkey")
    entry = keeper.logentry_set.get()
    assert entry.content_type.model_class() is AgentKey
    assert entry.get_edited_object() == AgentKey.objects.get(name="support-bot")


def test_moving_back_gives_runs_app_its_content_types_again() -> None:
    migrate(before_the_move=True)
    assert labels_of_moved_models() == {f"runs_app.{model}" for model in MOVED}
    migrate()
    assert labels_of_moved_models() == {f"access_app.{model}" for model in MOVED}
