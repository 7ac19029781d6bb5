"""Failure streaks are counted per caller (ADR 0020): one row per caller replaces the
per-run counters and the per-client table."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs_app', '0003_flowversion_moves_to_flows_app'),
    ]

    operations = [
        migrations.CreateModel(
            name='FailureStreak',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('caller', models.CharField(max_length=200, unique=True)),
                ('scope', models.CharField(blank=True, default='', max_length=64)),
                ('failures', models.PositiveIntegerField(default=0)),
                ('by_error', models.JSONField(default=dict)),
                ('last_failure', models.CharField(blank=True, default='', max_length=64)),
                ('updated_at', models.DateTimeField()),
            ],
        ),
        migrations.DeleteModel(
            name='ClientFailures',
        ),
        migrations.RemoveField(
            model_name='run',
            name='failures',
        ),
        migrations.RemoveField(
            model_name='run',
            name='last_failure',
        ),
    ]
