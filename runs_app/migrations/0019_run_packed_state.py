"""Store each run's engine state packed (runs_app.packing, ADR 0090).

The states already stored are copied as their JSON text in UTF-8, which the packing reads
as its ``{`` scheme, in one statement; a run's next step stores its state deflated.
Backwards, each state is unpacked into JSON again.
"""

import json

from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

from runs_app.packing import unpack_json

COPY = {
    "sqlite": "UPDATE runs_app_run SET packed_state = CAST(engine_state AS BLOB)",
    "postgresql": "UPDATE runs_app_run SET packed_state = convert_to(engine_state::text, 'UTF8')",
}


def copy_states(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    schema_editor.execute(COPY[schema_editor.connection.vendor])


def unpack_states(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    Run = apps.get_model("runs_app", "Run")
    runs = list(Run.objects.only("pk", "packed_state"))
    for run in runs:
        run.engine_state = json.loads(unpack_json(run.packed_state))
    Run.objects.bulk_update(runs, ["engine_state"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [("runs_app", "0018_step_run_index_dropped")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="packed_state",
            field=models.BinaryField(default=b""),
            preserve_default=False,
        ),
        migrations.RunPython(copy_states, unpack_states),
        # A default for the column it drops, so that backwards it can be added to a table
        # that has rows before unpack_states fills it.
        migrations.AlterField(
            model_name="run", name="engine_state", field=models.JSONField(default=dict)
        ),
        migrations.RemoveField(model_name="run", name="engine_state"),
    ]
