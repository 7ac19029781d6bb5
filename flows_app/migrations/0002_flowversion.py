"""FlowVersion moves from runs_app to flows_app; its table keeps its name and rows."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("flows_app", "0001_initial"), ("runs_app", "0001_initial")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="FlowVersion",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("content_hash", models.CharField(max_length=64, unique=True)),
                        ("flow_id", models.CharField(db_index=True, max_length=64)),
                        ("title", models.CharField(max_length=500)),
                        ("version", models.CharField(blank=True, default="", max_length=100)),
                        ("source", models.TextField()),
                        ("created_at", models.DateTimeField()),
                    ],
                    options={"ordering": ["-created_at"], "db_table": "runs_app_flowversion"},
                )
            ],
            # The table exists already: runs_app created it (runs_app 0001).
            database_operations=[],
        )
    ]
