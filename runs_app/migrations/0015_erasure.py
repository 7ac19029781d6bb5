"""Erasure (ADR 0086): a run's ``erased_at``, a step's ``payload`` digest kept when its
values are erased, and two permissions, "erase runs" and "see personal values", granted
to the "Support lead" group (flows_app 0006) with the run pages' own (view runs and steps).

Permissions are normally created after migrations run (post_migrate): create them here.
"""

from django.apps.registry import Apps
from django.contrib.auth.management import create_permissions
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

GROUP = "Support lead"
PERMISSIONS = ("erase_run", "see_personal_values", "view_run", "view_step")


def grant_support_lead(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    config = apps.get_app_config("runs_app")
    config.models_module = True  # create_permissions skips apps without models loaded
    create_permissions(config, apps=apps, verbosity=0)
    config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name=GROUP)
    group.permissions.add(
        *Permission.objects.filter(content_type__app_label="runs_app", codename__in=PERMISSIONS)
    )


def revoke_support_lead(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    group = apps.get_model("auth", "Group").objects.filter(name=GROUP).first()
    if group is not None:
        group.permissions.remove(
            *group.permissions.filter(
                content_type__app_label="runs_app", codename__in=PERMISSIONS
            )
        )


class Migration(migrations.Migration):
    dependencies = [
        ("runs_app", "0014_run_moved_from"),
        ("flows_app", "0006_support_lead_group"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="run",
            options={
                "ordering": ["-updated_at"],
                "permissions": [
                    ("capture_run", "Can save a run as a scenario in the flows' tests"),
                    ("erase_run", "Can erase runs"),
                    ("see_personal_values", "Can see personal values"),
                ],
            },
        ),
        migrations.AddField(
            model_name="run",
            name="erased_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="step",
            name="payload",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.RunPython(grant_support_lead, revoke_support_lead),
    ]
