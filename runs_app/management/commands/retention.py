"""``retention``: apply GUIDEPOST_RETENTION_DAYS and GUIDEPOST_AUDIT_RETENTION_DAYS once
(``runs_app.erasure.retention``, ADR 0087), e.g. from cron; prints what it did."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from flowcore.flow.findings import counted
from runs_app.erasure import database_vacuum, retention


class Command(BaseCommand):
    help = (
        "Erase ended runs older than GUIDEPOST_RETENTION_DAYS (and delete events as old), and "
        "delete audit records older than GUIDEPOST_AUDIT_RETENTION_DAYS (unset: kept); prints "
        "what it did."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--vacuum",
            action="store_true",
            help="then rewrite the database so no free page keeps the erased text",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        done = retention()
        if done.run_days is None:
            self.stdout.write("runs: kept (GUIDEPOST_RETENTION_DAYS is not set)")
        else:
            self.stdout.write(
                f"runs: {counted(len(done.runs), 'ended run')} older than {done.run_days} days "
                "erased"
            )
            self.stdout.write(
                f"events: {counted(done.events, 'event')} older than {done.run_days} days "
                "deleted, with their deliveries"
            )
        if done.audit_days is None:
            self.stdout.write("audit records: kept (GUIDEPOST_AUDIT_RETENTION_DAYS is not set)")
        else:
            self.stdout.write(
                f"audit records: {counted(done.audit_records, 'record')} older than "
                f"{done.audit_days} days deleted"
            )
        if options["vacuum"]:
            self.stdout.write(database_vacuum())
