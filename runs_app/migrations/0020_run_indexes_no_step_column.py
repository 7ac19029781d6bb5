"""The runs' indexes hold no column every step changes, so a step's UPDATE of its run can be
heap-only on PostgreSQL; plain indexes without the LIKE copies nothing uses (ADR 0091)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("flows_app", "0010_catalog_in_the_database"),
        ("runs_app", "0019_run_packed_state"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="run",
            name="runs_app_ru_state_12bdb9_idx",
        ),
        migrations.AlterField(
            model_name="run",
            name="flow_id",
            field=models.CharField(max_length=64),
        ),
        migrations.AlterField(
            model_name="run",
            name="ref",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.AlterField(
            model_name="run",
            name="state",
            field=models.CharField(
                choices=[
                    ("active", "Active"),
                    ("completed", "Completed"),
                    ("stalled", "Stalled"),
                    ("closed", "Closed"),
                ],
                max_length=16,
            ),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["flow_id"], name="run_flow_id"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["state"], name="run_state"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["ref"], name="run_ref"),
        ),
    ]
