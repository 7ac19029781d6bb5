"""The "Ops" group: staff in it may read the run and flow pages and the JSON API.

Permissions are normally created after migrations run (post_migrate), so on a fresh
database they do not exist yet here: create those of both apps first.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP = "Ops"
PERMISSIONS = [
    ("runs_app", "view_run"),
    ("runs_app", "view_step"),
    ("flows_app", "view_flowversion"),
]


def create_ops_group(apps, schema_editor):
    for label in ("runs_app", "flows_app"):
        config = apps.get_app_config(label)
        config.models_module = True  # create_permissions skips apps without models loaded
        create_permissions(config, apps=apps, verbosity=0)
        config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name=GROUP)
    for app_label, codename in PERMISSIONS:
        group.permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )


def delete_ops_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name=GROUP).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("runs_app", "0004_failure_streaks_per_caller"),
        ("flows_app", "0002_flowversion"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_ops_group, delete_ops_group)]
