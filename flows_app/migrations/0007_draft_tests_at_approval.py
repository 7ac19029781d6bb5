"""Drafts record the live tests checked at their approval, and whether breaking them was confirmed."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("flows_app", "0006_support_lead_group")]

    operations = [
        migrations.AddField(
            model_name="draft",
            name="tests_at_approval",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="draft",
            name="broken_tests_confirmed",
            field=models.BooleanField(default=False),
        ),
    ]
