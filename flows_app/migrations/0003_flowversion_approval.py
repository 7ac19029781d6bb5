"""A flow version remembers who approved it, when, and from which draft.

LiveFlow is a proxy: the admin's entry for the live flows (no table).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("flows_app", "0002_flowversion")]

    operations = [
        migrations.AddField(
            model_name="flowversion",
            name="approved_by",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.AddField(
            model_name="flowversion",
            name="approved_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="flowversion",
            name="draft",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="flow_versions",
                to="flows_app.draft",
            ),
        ),
        migrations.CreateModel(
            name="LiveFlow",
            fields=[],
            options={"verbose_name": "live flow", "proxy": True, "default_permissions": ()},
            bases=("flows_app.flowversion",),
        ),
    ]
