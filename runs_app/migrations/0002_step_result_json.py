"""Keep each step's result as the exact JSON text the agent received.

PostgreSQL's jsonb reorders object keys, so a retry with ``at`` returned the
stored result with its keys (and a node's labels) in another order.
"""

import json

from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor


def copy_results(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    Step = apps.get_model("runs_app", "Step")
    for step in Step.objects.only("pk", "result").iterator():
        text = json.dumps(step.result, ensure_ascii=False, separators=(",", ":"))
        Step.objects.filter(pk=step.pk).update(result_json=text)


class Migration(migrations.Migration):
    dependencies = [("runs_app", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="step", name="result_json", field=models.TextField(default="")
        ),
        migrations.RunPython(copy_results, migrations.RunPython.noop),
        migrations.RemoveField(model_name="step", name="result"),
        migrations.AlterField(
            model_name="step", name="result_json", field=models.TextField()
        ),
    ]
