"""The ``guidepost-mcp`` console script: ``lint``, ``show``, ``test``, ``capture``, ``serve``.

Each subcommand dispatches to the Django management command of the same name,
so ``guidepost-mcp X`` behaves exactly like ``python manage.py X``; ``test`` is
``manage.py flowtest``, because Django's own ``test`` command has that name.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

PROG = "guidepost-mcp"
# Subcommands whose management command has another name (Django owns ``test``).
COMMAND_NAMES = {"test": "flowtest"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Walk fixed procedures (YAML flows) with LLM agents over MCP.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    lint = commands.add_parser("lint", help="check flow files; exits non-zero on any error")
    lint.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="flow directories or .yaml files (default: the flows directory)",
    )

    show = commands.add_parser("show", help="print a flow as a text tree")
    show.add_argument("flow_id", help="the flow's id")
    show.add_argument("--flows", metavar="DIR", help="flows directory")

    test = commands.add_parser(
        "test",
        help="run the flows' scenarios and check their guarantees; exits non-zero on any failure",
    )
    test.add_argument("flow_ids", nargs="*", metavar="FLOW_ID", help="flows (default: all)")
    test.add_argument("--flows", metavar="DIR", help="flows directory")
    test.add_argument(
        "--min-coverage",
        type=float,
        metavar="N",
        help="fail when a flow's node or edge coverage is under N percent",
    )

    capture = commands.add_parser(
        "capture", help="append a scenario replaying a recorded run to the flow's tests file"
    )
    capture.add_argument("run_id", help="the run's id (r_...)")
    capture.add_argument("--flows", metavar="DIR", help="flows directory")

    serve = commands.add_parser("serve", help="serve MCP (/mcp/) and the web UI")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (default 8127)")
    serve.add_argument("--flows", metavar="DIR", help="flows directory")
    serve.add_argument("--workers", type=int, help="worker processes (default 1)")
    return parser


def django_argv(args: argparse.Namespace, extra: Sequence[str]) -> list[str]:
    """The ``manage.py``-style argv for a parsed command line (``extra`` passed through)."""
    argv = [PROG, COMMAND_NAMES.get(args.command, args.command)]
    if args.command == "lint":
        argv += args.paths
    elif args.command == "show":
        argv.append(args.flow_id)
    elif args.command == "test":
        argv += args.flow_ids
    elif args.command == "capture":
        argv.append(args.run_id)
    for option in ("host", "port", "flows", "workers", "min_coverage"):
        value = getattr(args, option, None)
        if value is not None:
            argv += [
                f"--{option.replace('_', '-')}",
                f"{value:g}" if isinstance(value, float) else str(value),
            ]
    return [*argv, *extra]


def use_flows_dir(flows: str) -> str:
    """Make ``flows`` the flows directory of this process and its workers.

    Called before Django reads its settings (settings are never changed at run
    time), so GUIDEPOST_FLOWS_DIR names this directory everywhere. Raises
    ValueError for a path that is not a directory.
    """
    directory = Path(flows).expanduser().resolve()
    if not directory.is_dir():
        raise ValueError(f"--flows {flows}: no such directory")
    os.environ["GUIDEPOST_FLOWS_DIR"] = str(directory)
    return str(directory)


def flows_option(argv: Sequence[str]) -> str | None:
    """The value of ``--flows DIR`` or ``--flows=DIR`` in a command line, if any.

    >>> flows_option(["manage.py", "serve", "--flows", "x"]), flows_option(["serve", "--flows=y"])
    ('x', 'y')
    """
    for i, arg in enumerate(argv):
        if arg == "--flows" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--flows="):
            return arg.removeprefix("--flows=")
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; returns 0 on success. Failures exit through Django (status 1)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    flows = getattr(args, "flows", None)
    if flows is not None:
        try:
            args.flows = use_flows_dir(flows)
        except ValueError as exc:
            parser.error(str(exc))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "guidepost.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(django_argv(args, extra))
    return 0


if __name__ == "__main__":
    sys.exit(main())
