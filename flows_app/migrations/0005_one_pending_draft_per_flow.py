"""At most one pending draft per flow: older pending duplicates are superseded first.

Pending drafts stored before intake refused text without a flow id (flow id "")
are discarded with that reason: no review can approve them.
"""

from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

NO_FLOW_ID = "names no flow id: drafts without one are refused at intake since review began"


def tidy_pending(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    Draft = apps.get_model("flows_app", "Draft")
    pending = Draft.objects.filter(status="pending")
    pending.filter(flow_id="").update(status="discarded", decision_reason=NO_FLOW_ID)
    newest: dict[str, int] = {}
    for draft in pending.exclude(flow_id="").order_by("flow_id", "-created_at", "-pk"):
        if draft.flow_id not in newest:
            newest[draft.flow_id] = draft.pk
            continue
        Draft.objects.filter(pk=draft.pk).update(
            status="superseded", superseded_by_id=newest[draft.flow_id]
        )


class Migration(migrations.Migration):
    dependencies = [("flows_app", "0004_draft_review")]

    operations = [
        migrations.RunPython(tidy_pending, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="draft",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status", "pending")),
                fields=("flow_id",),
                name="draft_one_pending_per_flow",
            ),
        ),
    ]
