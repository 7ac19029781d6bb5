"""The "Support lead" group: people in it read drafts and flow versions, and approve or discard drafts."""

from django.apps.registry import Apps
from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

GROUP = "Support lead"


def create_group(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    # Permissions are normally created after all migrations (post_migrate): make this one now.
    draft_type, _ = ContentType.objects.get_or_create(app_label="flows_app", model="draft")
    permission, _ = Permission.objects.get_or_create(
        content_type=draft_type,
        codename="approve_draft",
        defaults={"name": "Can approve or discard drafts"},
    )
    view, _ = Permission.objects.get_or_create(
        content_type=draft_type, codename="view_draft", defaults={"name": "Can view draft"}
    )
    version_type, _ = ContentType.objects.get_or_create(app_label="flows_app", model="flowversion")
    versions, _ = Permission.objects.get_or_create(
        content_type=version_type,
        codename="view_flowversion",
        defaults={"name": "Can view flow version"},
    )
    group, _ = Group.objects.get_or_create(name=GROUP)
    group.permissions.add(permission, view, versions)


def remove_group(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    apps.get_model("auth", "Group").objects.filter(name=GROUP).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("flows_app", "0005_one_pending_draft_per_flow"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_group, remove_group)]
