"""The permission to answer stalled runs (``runs_app.resolve_run``, spec §5.9) for the "Ops"
and "Support lead" groups; a support lead also gets to read runs, without which the inbox
and a run's page stay closed to them (ADR 0080).

Permissions are normally created after migrations run (post_migrate), so on a fresh
database this one does not exist yet here: it is created first, as 0005 does.
"""

from django.apps.registry import Apps
from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

RESOLVE = ("resolve_run", "Can claim a stalled run, answer it or close it")
READ_RUNS = [("run", "view_run", "Can view run"), ("step", "view_step", "Can view step")]
GROUPS = {"Ops": [RESOLVE[0]], "Support lead": [RESOLVE[0], "view_run", "view_step"]}


def grant(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    permissions = {}
    for model, codename, name in [("run", *RESOLVE), *READ_RUNS]:
        content_type, _ = ContentType.objects.get_or_create(app_label="runs_app", model=model)
        permissions[codename], _ = Permission.objects.get_or_create(
            content_type=content_type, codename=codename, defaults={"name": name}
        )
    for group_name, codenames in GROUPS.items():
        group, _ = Group.objects.get_or_create(name=group_name)
        group.permissions.add(*(permissions[c] for c in codenames))


def take_back(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    resolve = Permission.objects.filter(content_type__app_label="runs_app", codename=RESOLVE[0])
    reads = Permission.objects.filter(
        content_type__app_label="runs_app", codename__in=["view_run", "view_step"]
    )
    for group in Group.objects.filter(name__in=GROUPS):
        group.permissions.remove(*resolve)
        if group.name == "Support lead":
            group.permissions.remove(*reads)


class Migration(migrations.Migration):
    dependencies = [
        ("runs_app", "0012_claims_and_resolve_permission"),
        ("flows_app", "0006_support_lead_group"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(grant, take_back)]
