"""Plain indexes on the audit records' key_name and run_id, without the LIKE copies nothing
uses (ADR 0091)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("access_app", "0003_audit_count"),
    ]

    operations = [
        migrations.AlterField(
            model_name="auditrecord",
            name="key_name",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AlterField(
            model_name="auditrecord",
            name="run_id",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddIndex(
            model_name="auditrecord",
            index=models.Index(fields=["key_name"], name="audit_key_name"),
        ),
        migrations.AddIndex(
            model_name="auditrecord",
            index=models.Index(fields=["run_id"], name="audit_run_id"),
        ),
    ]
