"""``manage.py moveruns FLOW_ID`` (``guidepost-mcp migrate``): move the active and stalled
runs of a flow pinned to older versions onto its live version (spec §4, ADR 0083).

Named ``moveruns`` here because Django's own ``migrate`` has the other name.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from flowcore.common.errors import Refusal
from flows_app.commands import (
    acting_as,
    add_as_option,
    add_flows_option,
    check_flows_option,
    refused,
)
from runs_app.moves import runs_move


class Command(BaseCommand):
    help = (
        "Move the active and stalled runs of FLOW_ID pinned to older versions onto its live "
        "version, each whose recorded inputs replay there the same way; one line per run "
        "(RUN_ID moves: ... or RUN_ID stays: ...), then a summary."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("flow_id", metavar="FLOW_ID", help="the flow whose runs move")
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="say what would move and what would stay, and change nothing",
        )
        parser.add_argument(
            "--run",
            dest="runs",
            action="append",
            default=[],
            metavar="RUN_ID",
            help="move only this run (repeat for more); default: every run that can",
        )
        add_flows_option(parser)
        add_as_option(parser, "moves the runs")

    def handle(self, *args: Any, **options: Any) -> None:
        check_flows_option(options["flows"])
        by = "operator:" + acting_as(options["acting_as"])
        try:
            report = runs_move(
                flow_id=options["flow_id"],
                by=by,
                run_ids=options["runs"],
                dry_run=options["dry_run"],
            )
        except Refusal as refusal:
            raise refused(refusal) from None
        for line in report.lines():
            self.stdout.write(line)
