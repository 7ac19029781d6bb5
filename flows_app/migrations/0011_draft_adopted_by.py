"""The key that adopted a draft submitted without a key (createkey --adopt-keyless)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("flows_app", "0010_catalog_in_the_database"),
    ]

    operations = [
        migrations.AddField(
            model_name="draft",
            name="adopted_by",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
    ]
