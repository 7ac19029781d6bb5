from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from flowcore.flow.files import lint_paths
from flowcore.flow.findings import counted, format_finding


class Command(BaseCommand):
    help = "Lint flow files (directories or .yaml files); exits non-zero on any error."
    # Lint reads files only: no database, and no dependency on the rest of the project's checks.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "paths",
            nargs="*",
            type=Path,
            metavar="PATH",
            help="flow directories or .yaml files (default: GUIDEPOST_FLOWS_DIR)",
        )
        parser.add_argument(
            "--categories",
            type=Path,
            metavar="PATH",
            help="the categories.yaml to check flows against (default: the one beside "
            "each file, else the flows directory's)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        paths: list[Path] = options["paths"] or [settings.GUIDEPOST_FLOWS_DIR]
        categories: Path | None = options["categories"]
        for path in [*paths, *([categories] if categories else [])]:
            if not path.exists():
                raise CommandError(f"{path}: no such file or directory")
        checked, findings = lint_paths(
            paths, categories=categories, fallback_dir=settings.GUIDEPOST_FLOWS_DIR
        )
        errors = sum(1 for f in findings if f["level"] == "error")
        warnings = len(findings) - errors
        for f in findings:
            style = self.style.ERROR if f["level"] == "error" else self.style.WARNING
            self.stdout.write(style(format_finding(f)))
        summary = ", ".join(
            (counted(checked, "flow"), counted(errors, "error"), counted(warnings, "warning"))
        )
        if errors:
            self.stdout.write(summary)
            raise CommandError(f"lint failed with {counted(errors, 'error')}")
        self.stdout.write(self.style.SUCCESS(summary))
