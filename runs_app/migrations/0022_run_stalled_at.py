"""Each stalled run's ``stalled_at``: since when it has waited for a person.

Its ``updated_at`` said so until an adopt or a move step of the stalled run changed it.
The stalled runs are filled from their steps, as ``verify`` reads them
(``flowcore.run.results.stalled_since``); every other run has none.
"""

import json

from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

from flowcore.run.results import MOVE, stalled_since
from runs_app.packing import unpack_json

BATCH = 500


def fill(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    Run = apps.get_model("runs_app", "Run")
    Step = apps.get_model("runs_app", "Step")
    runs = list(Run.objects.filter(state="stalled").only("pk"))
    for run in runs:
        steps = Step.objects.filter(run_id=run.pk).order_by("seq")
        marks = [
            (
                step.tool,
                step.status,
                json.loads(unpack_json(step.packed_result)).get("state", "")
                if step.tool == MOVE
                else "",
                step.created_at,
            )
            for step in steps.only("tool", "status", "packed_result", "created_at")
        ]
        run.stalled_at = stalled_since(marks)
    Run.objects.bulk_update(runs, ["stalled_at"], batch_size=BATCH)


class Migration(migrations.Migration):
    dependencies = [("runs_app", "0021_digests_stored_as_bytes")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="stalled_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
