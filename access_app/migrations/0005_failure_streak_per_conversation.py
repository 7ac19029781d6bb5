"""Failure streaks per conversation: a caller holds one streak per run, ref or
connection (and one across them all), no longer one in all (ADR 0104)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("access_app", "0004_audit_plain_indexes"),
    ]

    operations = [
        migrations.AlterField(
            model_name="failurestreak",
            name="caller",
            field=models.CharField(max_length=200),
        ),
        migrations.AddConstraint(
            model_name="failurestreak",
            constraint=models.UniqueConstraint(
                fields=("caller", "scope"), name="failure_streak_per_scope"
            ),
        ),
    ]
