"""``manage.py flowtest`` (``guidepost-mcp test``): run every flow's scenarios and guarantees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from flowcore.checks.flow_tests import report_lines
from flowcore.checks.tests_dir import check_flows_dir
from flowcore.flow.findings import format_finding
from flows_app.commands import add_flows_option


class Command(BaseCommand):
    help = (
        "Run the scenarios and check the guarantees of flows (tests/<flow_id>.yaml in the "
        "flows directory), with coverage; exits non-zero on any failure."
    )
    # Reads files and runs the engine only: no database.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "flow_ids", nargs="*", metavar="FLOW_ID", help="flows to test (default: every flow)"
        )
        add_flows_option(parser)
        parser.add_argument(
            "--min-coverage",
            type=float,
            metavar="N",
            help="fail when a flow's node or edge coverage is under N percent",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        directory: Path = options["flows"] or settings.GUIDEPOST_FLOWS_DIR
        if not directory.is_dir():
            raise CommandError(f"{directory}: no such directory")
        minimum: float | None = options["min_coverage"]
        if minimum is not None and not 0 <= minimum <= 100:
            raise CommandError(f"--min-coverage {minimum:g}: give a percentage from 0 to 100")
        run = check_flows_dir(directory, options["flow_ids"])
        for found in run.findings:
            self.stdout.write(self.style.ERROR(format_finding(found)))
        failed_flows = [f["where"].removeprefix("tests/") for f in run.findings]
        scenarios = failed = guarantees = broken = 0
        for report in run.reports:
            for line in report_lines(report, min_coverage=minimum):
                style = self.style.ERROR if line.startswith(("FAIL", "BROKEN", "error")) else None
                self.stdout.write(style(line) if style else line)
            scenarios += len(report.scenarios)
            failed += len(report.failed_scenarios)
            guarantees += len(report.guarantees)
            broken += len(report.broken_guarantees)
            under = minimum is not None and not report.coverage.at_least(minimum)
            if not report.ok or under:
                failed_flows.append(report.flow_id)
        summary = (
            f"{len(run.reports)} flows, {scenarios} scenarios ({failed} failed), "
            f"{guarantees} guarantees ({broken} broken)"
        )
        if failed_flows:
            self.stdout.write(summary)
            raise CommandError("tests failed: " + ", ".join(failed_flows))
        self.stdout.write(self.style.SUCCESS(summary))
