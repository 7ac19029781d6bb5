from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from flowcore.common.names import closest
from flowcore.drawing.mermaid import render_mermaid
from flowcore.drawing.text_tree import render_tree
from flowcore.flow.files import FLOW_SUFFIX, FlowCatalog, load_catalog
from flows_app.commands import add_flows_option

RENDERERS = {"text": render_tree, "mermaid": render_mermaid}


class Command(BaseCommand):
    help = (
        "Print a flow as a text tree, depth-first from its entry, or as a Mermaid "
        "flowchart (--format mermaid) to paste where Mermaid is drawn."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("flow_id", help="the flow's id (its file name without .yaml)")
        parser.add_argument(
            "--format",
            choices=sorted(RENDERERS),
            default="text",
            help="text (a tree, every condition written out) or mermaid (a flowchart)",
        )
        add_flows_option(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        directory: Path = options["flows"] or settings.GUIDEPOST_FLOWS_DIR
        if not directory.is_dir():
            raise CommandError(f"{directory}: no such directory")
        catalog = load_catalog(directory)
        flow = catalog.flows.get(options["flow_id"])
        if flow is None:
            raise CommandError(not_found_message(options["flow_id"], catalog))
        self.stdout.write(RENDERERS[options["format"]](flow))


def not_found_message(flow_id: str, catalog: FlowCatalog) -> str:
    path = catalog.directory / f"{flow_id}{FLOW_SUFFIX}"
    if path.is_file():
        return f"flow {flow_id} has lint errors: run `guidepost-mcp lint {path}` and fix them"
    known = sorted(catalog.flows)
    close = closest(flow_id, known, n=3)
    if close:
        return f"no flow {flow_id!r} in {catalog.directory}; closest: {', '.join(close)}"
    listed = ", ".join(known[:10]) or "none"
    return f"no flow {flow_id!r} in {catalog.directory}; known flows: {listed}"
