"""Store each step's result packed (runs_app.packing, ADR 0089).

The results already stored are copied as their UTF-8 text, which the packing reads as
its ``{`` scheme: nothing is rewritten through Python, so a large table migrates in one
statement. New steps are deflated against the fixed dictionary. Backwards, each result
is unpacked into its text again.
"""

from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

from runs_app.packing import unpack_json

COPY = {
    "sqlite": "UPDATE runs_app_step SET packed_result = CAST(result_json AS BLOB)",
    "postgresql": "UPDATE runs_app_step SET packed_result = convert_to(result_json, 'UTF8')",
}


def copy_results(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    schema_editor.execute(COPY[schema_editor.connection.vendor])


def unpack_results(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    Step = apps.get_model("runs_app", "Step")
    steps = list(Step.objects.only("pk", "packed_result"))
    for step in steps:
        step.result_json = unpack_json(step.packed_result)
    Step.objects.bulk_update(steps, ["result_json"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [("runs_app", "0016_run_permissions_together")]

    operations = [
        migrations.AddField(
            model_name="step",
            name="packed_result",
            field=models.BinaryField(default=b""),
            preserve_default=False,
        ),
        migrations.RunPython(copy_results, unpack_results),
        # A default for the column it drops, so that backwards it can be added to a table
        # that has rows before unpack_results fills it.
        migrations.AlterField(
            model_name="step", name="result_json", field=models.TextField(default="")
        ),
        migrations.RemoveField(model_name="step", name="result_json"),
    ]
