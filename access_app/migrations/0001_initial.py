"""AgentKey, AuditRecord, RateBucket and FailureStreak move from runs_app to access_app
(ADR 0063). Their tables keep their names and rows: only Django's state moves here
(runs_app 0010 drops it there), as FlowVersion moved to flows_app.

Their content types are renamed too, so the permissions granted on them (a group that
may view agent keys) and the admin's log entries keep pointing at the same models.
"""

import re

import django.core.validators
from django.db import migrations, models

MODELS = ("agentkey", "auditrecord", "ratebucket", "failurestreak")


def content_types_to(apps, schema_editor, old, new):
    """Move the four models' content types from app ``old`` to app ``new``. A content type
    already present under ``new`` is left alone (the old one then stays, stale, as
    Django's own model renames leave it; ``manage.py remove_stale_contenttypes``)."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    types = ContentType.objects.using(schema_editor.connection.alias)
    for model in MODELS:
        if not types.filter(app_label=new, model=model).exists():
            types.filter(app_label=old, model=model).update(app_label=new)


def forwards(apps, schema_editor):
    content_types_to(apps, schema_editor, "runs_app", "access_app")


def backwards(apps, schema_editor):
    content_types_to(apps, schema_editor, "access_app", "runs_app")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("runs_app", "0009_audit_caller_at"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="FailureStreak",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("caller", models.CharField(max_length=200, unique=True)),
                        ("scope", models.CharField(blank=True, default="", max_length=64)),
                        ("failures", models.PositiveIntegerField(default=0)),
                        ("by_error", models.JSONField(default=dict)),
                        ("last_failure", models.CharField(blank=True, default="", max_length=64)),
                        ("updated_at", models.DateTimeField()),
                    ],
                    options={"db_table": "runs_app_failurestreak"},
                ),
                migrations.CreateModel(
                    name="RateBucket",
                    fields=[
                        ("caller", models.CharField(max_length=200, primary_key=True, serialize=False)),
                        ("tokens", models.FloatField()),
                        ("stamp", models.FloatField()),
                        ("allowed", models.BooleanField()),
                    ],
                    options={"db_table": "runs_app_ratebucket"},
                ),
                migrations.CreateModel(
                    name="AgentKey",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("name", models.CharField(help_text="Who uses the key, e.g. support-bot: 1 to 64 characters: letters, digits, '_', '.', '-', starting with a letter or digit.", max_length=64, validators=[django.core.validators.RegexValidator(re.compile("\\A[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\\Z"), "A key name has 1 to 64 characters: letters, digits, '_', '.', '-', starting with a letter or digit.")])),
                        ("display", models.CharField(editable=False, help_text="not secret", max_length=16, verbose_name="key starts with")),
                        ("digest", models.CharField(editable=False, max_length=64, unique=True)),
                        ("created_at", models.DateTimeField(editable=False)),
                        ("revoked_at", models.DateTimeField(blank=True, editable=False, null=True)),
                    ],
                    options={
                        "db_table": "runs_app_agentkey",
                        "ordering": ["name", "-created_at"],
                        "constraints": [models.UniqueConstraint(condition=models.Q(("revoked_at__isnull", True)), fields=("name",), name="agentkey_one_active_key_per_name", violation_error_message="This name already has an active key; revoke it first.")],
                    },
                ),
                migrations.CreateModel(
                    name="AuditRecord",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("at", models.DateTimeField(db_index=True)),
                        ("key_name", models.CharField(blank=True, db_index=True, default="", max_length=64)),
                        ("caller", models.CharField(blank=True, default="", max_length=200)),
                        ("client", models.CharField(blank=True, default="", max_length=200)),
                        ("peer", models.CharField(blank=True, default="", max_length=64)),
                        ("tool", models.CharField(max_length=100)),
                        ("run_id", models.CharField(blank=True, db_index=True, default="", max_length=64)),
                        ("outcome", models.CharField(max_length=64)),
                        ("status", models.PositiveSmallIntegerField()),
                        ("duration_ms", models.FloatField()),
                    ],
                    options={
                        "db_table": "runs_app_auditrecord",
                        "ordering": ["-at", "-id"],
                        "indexes": [models.Index(fields=["caller", "at"], name="audit_caller_at")],
                    },
                ),
            ],
            # The tables exist already: runs_app made them (runs_app 0004, 0007, 0008, 0009).
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
