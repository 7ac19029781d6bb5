from __future__ import annotations

from pathlib import Path
from typing import Any

import uvicorn
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from flows_app.domain.files import load_catalog


class Command(BaseCommand):
    help = "Migrate, load and lint the flows, then serve MCP (/mcp/) and the web UI with uvicorn."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=settings.GUIDEPOST_HOST)
        parser.add_argument("--port", type=int, default=settings.GUIDEPOST_PORT)
        parser.add_argument(
            "--flows",
            type=Path,
            help="flows directory (default: flows/); read before Django starts, "
            "so it reaches every worker",
        )
        parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["workers"] < 1:
            raise CommandError("--workers must be at least 1")
        flows = options["flows"]
        if flows is not None and flows.expanduser().resolve() != settings.GUIDEPOST_FLOWS_DIR:
            # guidepost-mcp and manage.py apply --flows before settings are read; a caller
            # that reaches this command another way must set GUIDEPOST_FLOWS_DIR itself.
            raise CommandError(f"--flows {flows}: set GUIDEPOST_FLOWS_DIR={flows} instead")
        call_command("migrate", interactive=False, verbosity=0)
        catalog = load_catalog(settings.GUIDEPOST_FLOWS_DIR)
        for finding in catalog.findings:
            self.stderr.write(
                f"{finding['level']} {finding['code']} {finding['where']}: {finding['message']}"
            )
        if catalog.errors:
            raise CommandError(
                f"{len(catalog.errors)} lint errors in {settings.GUIDEPOST_FLOWS_DIR}; "
                "fix them (guidepost-mcp lint) before serving"
            )
        url = f"http://{options['host']}:{options['port']}"
        self.stdout.write(
            f"guidepost: {len(catalog.flows)} flows from {settings.GUIDEPOST_FLOWS_DIR}; "
            f"MCP at {url}/mcp/, admin at {url}/admin/"
        )
        uvicorn.run(
            "guidepost.asgi:application",
            host=options["host"],
            port=options["port"],
            workers=options["workers"],
            log_level="warning",
            timeout_graceful_shutdown=5,
        )
