"""A permission for saving a run as a scenario (the run admin's action)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("runs_app", "0005_ops_group"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="run",
            options={
                "ordering": ["-updated_at"],
                "permissions": [
                    ("capture_run", "Can save a run as a scenario in the flows' tests")
                ],
            },
        ),
    ]
