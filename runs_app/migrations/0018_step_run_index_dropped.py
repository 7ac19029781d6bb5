"""Drop the steps' index on run alone: the unique (run, seq) index leads with it."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs_app", "0017_step_packed_result"),
    ]

    operations = [
        migrations.AlterField(
            model_name="step",
            name="run",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="steps",
                to="runs_app.run",
            ),
        ),
    ]
