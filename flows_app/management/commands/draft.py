from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from flowcore.common.errors import Refusal
from flowcore.flow.findings import format_finding
from flows_app.commands import (
    acting_as,
    add_as_option,
    add_flows_option,
    check_flows_option,
    refused,
)
from flows_app.models import Draft
from flows_app.services import draft_create


class Command(BaseCommand):
    help = "Submit a flow file as a draft for review, as a person would (nothing goes live)."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, metavar="FILE", help="the flow's YAML file")
        add_flows_option(parser)
        add_as_option(parser, "submits")

    def handle(self, *args: Any, **options: Any) -> None:
        check_flows_option(options["flows"])
        path: Path = options["file"]
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{path}: cannot read it as UTF-8 text ({exc})") from None
        try:
            submitted = draft_create(
                text=text,
                submitted_via=Draft.Via.CLI,
                submitted_by=acting_as(options["acting_as"]),
            )
        except Refusal as refusal:
            raise refused(refusal) from None
        draft = submitted.draft
        for finding in draft.findings:
            self.stdout.write(format_finding(finding))
        if submitted.repeated:
            self.stdout.write(f"{draft.public_id} ({draft.flow_id}) already waits for review")
            return
        state = "stored for review" if draft.ok else "stored, with lint errors"
        replaces = f"; replaces {submitted.superseded}" if submitted.superseded else ""
        self.stdout.write(f"{draft.public_id} ({draft.flow_id}) {state}{replaces}")
