"""Drafts get a title, how they were submitted, a decision (by, at, why) and supersession."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("flows_app", "0003_flowversion_approval")]

    operations = [
        migrations.AlterModelOptions(
            name="draft",
            options={
                "ordering": ["-created_at"],
                "permissions": [("approve_draft", "Can approve or discard drafts")],
            },
        ),
        migrations.AddField(
            model_name="draft",
            name="title",
            field=models.CharField(blank=True, default="", max_length=500),
        ),
        migrations.AddField(
            model_name="draft",
            name="submitted_via",
            field=models.CharField(
                choices=[("key", "agent key"), ("user", "admin user"), ("cli", "command line")],
                default="key",
                max_length=8,
            ),
        ),
        migrations.AddField(
            model_name="draft",
            name="decided_by",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.AddField(
            model_name="draft",
            name="decided_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="draft",
            name="decision_reason",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.AddField(
            model_name="draft",
            name="superseded_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="superseded",
                to="flows_app.draft",
            ),
        ),
        migrations.AlterField(
            model_name="draft",
            name="status",
            field=models.CharField(
                choices=[
                    ("pending", "Pending"),
                    ("approved", "Approved"),
                    ("discarded", "Discarded"),
                    ("superseded", "Superseded"),
                ],
                db_index=True,
                default="pending",
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="draft",
            name="findings",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AlterField(
            model_name="draft",
            name="flow_id",
            field=models.CharField(db_index=True, max_length=64),
        ),
    ]
