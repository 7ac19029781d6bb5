"""A ``guidepost-mcp`` command line run in the test's own process and transaction."""

from __future__ import annotations

import io

from django.core.management import call_command

from guidepost.cli import build_parser, django_argv


def typed(*argv: str) -> str:
    """Run ``guidepost-mcp ARGV`` as an operator types it: guidepost-mcp's own parser and
    translation to the management command, then the command; returns what it printed.
    Raises CommandError as the command does. ``call_command`` rather than ``main``, which
    closes the database connections when the command ends (the test's transaction too)."""
    args, extra = build_parser().parse_known_args(list(argv))
    out = io.StringIO()
    call_command(*django_argv(args, extra)[1:], stdout=out)
    return out.getvalue()
