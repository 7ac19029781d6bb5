"""Decided drafts record the live revision of their flow at the decision (ADR 0068); flow
versions are called revisions in the admin (ADR 0069)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("flows_app", "0007_draft_tests_at_approval")]

    operations = [
        migrations.AlterModelOptions(
            name="flowversion",
            options={"ordering": ["-created_at"], "verbose_name": "flow revision"},
        ),
        migrations.AddField(
            model_name="draft",
            name="live_at_decision",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="flows_app.flowversion",
            ),
        ),
        migrations.AddField(
            model_name="draft",
            name="live_at_decision_recorded",
            field=models.BooleanField(default=False),
        ),
    ]
