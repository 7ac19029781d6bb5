"""A ``guidepost-mcp`` command line run in the test's own process and transaction."""

from __future__ import annotations

import io

from django.core.management import call_command

from guidepost.cli import PROG, Utility


def typed(name: str, *args: str) -> str:
    """Run ``guidepost-mcp NAME ARGS`` as an operator types it: guidepost-mcp's own choice
    of the management command for NAME, which parses ARGS as it declares them; returns
    what it printed. Raises CommandError as the command does. ``call_command`` rather than
    ``main``, which closes the database connections when the command ends (the test's
    transaction too)."""
    out = io.StringIO()
    call_command(Utility([PROG, name]).fetch_command(name), *args, stdout=out)
    return out.getvalue()
