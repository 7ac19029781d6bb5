"""The ``guidepost-mcp`` console script: ``lint``, ``show``, ``test``, ``capture``, ``serve``,
``createsuperuser``, ``createkey``, ``revokekey``, ``grant``, ``verify``, ``erase``,
``retention``, the review commands, ``publish``, ``migrate`` (moving runs onto the live
version; ``manage.py moveruns``), ``restore``, ``webhook`` and ``worker``.

Each subcommand dispatches to the Django management command of the same name,
so ``guidepost-mcp X`` behaves exactly like ``python manage.py X``; ``test`` is
``manage.py flowtest``, because Django's own ``test`` command has that name
(``createsuperuser``, ``createkey``, ``revokekey``, ``grant``, ``webhook`` and ``worker``
migrate the database first, so they work before any ``serve``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

PROG = "guidepost-mcp"
# Subcommands whose management command has another name (Django owns ``test``).
# ``migrate`` is Django's own (the database's schema): moving runs is ``moveruns``.
COMMAND_NAMES = {"test": "flowtest", "migrate": "moveruns"}


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
    lint.add_argument(
        "--categories",
        metavar="PATH",
        help="categories.yaml to check against (default: beside each file, "
        "else the flows directory's)",
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
    serve.add_argument(
        "--no-worker",
        action="store_true",
        help="do not deliver webhooks in this process (run guidepost-mcp worker instead)",
    )
    commands.add_parser(
        "webhook",
        help="webhook subscriptions: add URL --events E1,E2 (prints the signing secret), "
        "list, remove ID, test ID",
        add_help=False,
    )
    commands.add_parser("worker", help="deliver webhooks (for instances served with --no-worker)")
    createkey = commands.add_parser(
        "createkey",
        help="create an agent key NAME and print it, once, as the last line "
        "(migrates the database first)",
    )
    createkey.add_argument("name", help="who uses the key, e.g. support-bot")
    createkey.add_argument(
        "--rate-burst", metavar="N", help="the key's own burst (default GUIDEPOST_RATE_BURST)"
    )
    createkey.add_argument(
        "--rate-per-second",
        metavar="R",
        help="the key's own refill rate (default GUIDEPOST_RATE_PER_SECOND)",
    )
    createkey.add_argument(
        "--runs-per-day", metavar="N", help="runs the key may start per day, UTC (default: no cap)"
    )
    createkey.add_argument(
        "--adopt-keyless",
        action="store_true",
        help="make the active and stalled runs started without a key this key's",
    )
    revokekey = commands.add_parser(
        "revokekey", help="revoke the agent key NAME (migrates the database first)"
    )
    revokekey.add_argument("name", help="the key's name")
    verify = commands.add_parser(
        "verify",
        help="check each run's hash chain, fields and replay, the ledger and the sealed audit "
        "records; exits non-zero naming everything that differs",
    )
    verify.add_argument(
        "run_ids", nargs="*", metavar="RUN_ID", help="runs to check (default: everything)"
    )
    verify.add_argument(
        "--heads",
        metavar="FILE",
        help="seal what can be sealed, verify, then write the heads to FILE (a new file) "
        "to store elsewhere",
    )
    verify.add_argument(
        "--since",
        metavar="FILE",
        help="also prove that nothing recorded before the heads in FILE changed",
    )
    erase = commands.add_parser(
        "erase",
        help="erase the values of ended runs (RUN_ID… or --ref REF) with --reason TEXT; "
        "verify still proves their path, statuses, times and who acted",
    )
    erase.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="the runs to erase")
    erase.add_argument("--ref", help="erase every ended run started with this ref")
    erase.add_argument("--reason", help="why (recorded in each run's chain)")
    erase.add_argument("--keep-ref", action="store_true", help="keep each run's ref")
    erase.add_argument("--by", metavar="NAME", help="who asks, recorded as operator:NAME")
    erase.add_argument("--vacuum", action="store_true", help="then rewrite the database")
    retention = commands.add_parser(
        "retention",
        help="erase ended runs past GUIDEPOST_RETENTION_DAYS and delete audit records past "
        "GUIDEPOST_AUDIT_RETENTION_DAYS (for cron)",
    )
    retention.add_argument("--vacuum", action="store_true", help="then rewrite the database")
    commands.add_parser(
        "grant",
        help="give USER a role, support-lead or ops (USER ROLE; --revoke takes it away); "
        "migrates the database first",
        add_help=False,
    )
    commands.add_parser(
        "createsuperuser",
        help="create an admin user (migrates the database first); "
        "Django's options pass through, e.g. --username",
        add_help=False,
    )
    add_review_commands(commands)
    return parser


# Review commands take their arguments from the management command itself (see its --help).
REVIEW_COMMANDS = {
    "drafts": "list pending drafts with their lint status",
    "approve": "approve a pending draft (FLOW_ID|DRAFT_ID): publish it",
    "discard": "discard a pending draft (FLOW_ID|DRAFT_ID --reason TEXT)",
    "draft": "submit a flow file (FILE) as a draft for review",
    "migrate": "move the active and stalled runs of FLOW_ID on older versions onto the live "
    "version (--dry-run first; --run RUN_ID for chosen runs)",
    "restore": "make an approved version of FLOW_ID live again (FLOW_ID VERSION --reason "
    "TEXT): a draft of its text, for the same review",
    "publish": "make a flows directory (DIR) live on every instance, once it lints and "
    "passes its tests",
}


def add_review_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, help_text in REVIEW_COMMANDS.items():
        commands.add_parser(name, help=help_text, add_help=False)


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
    elif args.command in ("createkey", "revokekey"):
        argv.append(args.name)
        if getattr(args, "adopt_keyless", False):
            argv.append("--adopt-keyless")
    elif args.command in ("verify", "erase"):
        argv += args.run_ids
        if getattr(args, "keep_ref", False):
            argv.append("--keep-ref")
    if getattr(args, "vacuum", False):
        argv.append("--vacuum")
    if getattr(args, "no_worker", False):
        argv.append("--no-worker")
    for option in (
        "categories",
        "host",
        "port",
        "flows",
        "workers",
        "min_coverage",
        "heads",
        "since",
        "rate_burst",
        "rate_per_second",
        "runs_per_day",
        "ref",
        "reason",
        "by",
    ):
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


def use_host(host: str) -> None:
    """Make ``host`` the listening address of this process and its workers.

    Called before Django reads its settings, like ``use_flows_dir``: GUIDEPOST_HOST then
    tells every worker whether it listens beyond loopback (agent keys are then required,
    and GUIDEPOST_AUTH=off is refused).
    """
    os.environ["GUIDEPOST_HOST"] = host


def flows_option(argv: Sequence[str]) -> str | None:
    """The value of ``--flows DIR`` or ``--flows=DIR`` in a command line, if any.

    >>> flows_option(["manage.py", "serve", "--flows", "x"]), flows_option(["serve", "--flows=y"])
    ('x', 'y')
    """
    return option_value(argv, "--flows")


def option_value(argv: Sequence[str], option: str) -> str | None:
    """The value of ``OPTION VALUE`` or ``OPTION=VALUE`` in a command line, if any.

    >>> option_value(["manage.py", "serve", "--host", "0.0.0.0"], "--host")
    '0.0.0.0'
    """
    for i, arg in enumerate(argv):
        if arg == option and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(option + "="):
            return arg.removeprefix(option + "=")
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; returns 0 on success. Failures exit through Django (status 1)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    flows = getattr(args, "flows", None)
    if flows is None and args.command in REVIEW_COMMANDS:
        flows = flows_option(extra)  # passed through to the command, which checks it
    if flows is not None:
        try:
            args.flows = use_flows_dir(flows)
        except ValueError as exc:
            parser.error(str(exc))
    if getattr(args, "host", None) is not None:
        use_host(args.host)
    if args.command in ("createsuperuser", "createkey", "revokekey", "grant", "webhook", "worker"):
        run_django([PROG, "migrate", "--no-input", "--verbosity", "0"])
    run_django(django_argv(args, extra))
    return 0


def run_django(argv: list[str]) -> None:
    """Run a Django command line; a configuration error is one line on stderr, exit 1.

    Settings refuse a malformed variable with ImproperlyConfigured naming it; the
    traceback behind it would only hide that line.
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "guidepost.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(argv)
    except ImproperlyConfigured as exc:
        sys.exit(f"{Path(argv[0]).name}: {exc}")


if __name__ == "__main__":
    sys.exit(main())
