"""FlowVersion now belongs to flows_app (same table); runs point at it there."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs_app", "0002_step_result_json"),
        ("flows_app", "0002_flowversion"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="run",
                    name="flow_version",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="runs",
                        to="flows_app.flowversion",
                    ),
                ),
                migrations.DeleteModel(name="FlowVersion"),
            ],
            database_operations=[],
        )
    ]
