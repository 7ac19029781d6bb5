"""AgentKey, AuditRecord, RateBucket and FailureStreak now belong to access_app (same
tables, access_app 0001); runs_app forgets them."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("runs_app", "0009_audit_caller_at"),
        ("access_app", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="AgentKey"),
                migrations.DeleteModel(name="AuditRecord"),
                migrations.DeleteModel(name="FailureStreak"),
                migrations.DeleteModel(name="RateBucket"),
            ],
            database_operations=[],
        )
    ]
