"""The ``guidepost-mcp`` console script: ``guidepost-mcp COMMAND ARGS...`` runs management
command COMMAND through Django's own dispatch (``django-admin``'s), so each command's
``add_arguments`` is the only place its options are declared and ``guidepost-mcp X``
behaves exactly like ``python manage.py X``.

Two commands have another name here, because Django owns theirs: ``test`` is
``flowtest`` (Django's ``test`` runs a test suite) and ``migrate`` is ``moveruns``, moving
runs onto the live version (Django's ``migrate`` is the database's schema).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from difflib import get_close_matches
from pathlib import Path
from typing import NoReturn

import django
from django.core.exceptions import ImproperlyConfigured
from django.core.management import BaseCommand, ManagementUtility

from guidepost.rundir import run_directory

PROG = "guidepost-mcp"
DESCRIPTION = "Walk fixed procedures (YAML flows) with LLM agents over MCP."
# What guidepost-mcp runs, in the order its help lists them: the commands the README
# documents and the review, webhook and endpoint commands, not the whole of Django's list.
COMMANDS = (
    "serve",
    "lint",
    "show",
    "test",
    "capture",
    "drafts",
    "draft",
    "approve",
    "discard",
    "restore",
    "publish",
    "migrate",
    "createsuperuser",
    "adduser",
    "grant",
    "createkey",
    "revokekey",
    "verify",
    "erase",
    "retention",
    "webhook",
    "endpoint",
    "worker",
)
# The commands whose management command has another name: Django owns these two.
ALIASES = {"test": "flowtest", "migrate": "moveruns"}
# These write to the database a person may not have migrated yet (no ``serve`` so far).
MIGRATES_FIRST = (
    "createsuperuser",
    "adduser",
    "createkey",
    "revokekey",
    "grant",
    "webhook",
    "endpoint",
    "worker",
)
# Django's dispatch answers these with the list of commands (``help COMMAND``: its help).
HELP = ("help", "-h", "--help")


class Utility(ManagementUtility):
    """Django's dispatch over guidepost's commands, by the names guidepost-mcp gives them.

    ``run_from_argv`` names the parser after ``argv[1]``, the name typed, so
    ``guidepost-mcp migrate --help`` says ``guidepost-mcp migrate``.
    """

    def fetch_command(self, subcommand: str) -> BaseCommand:
        return super().fetch_command(management_command(subcommand))

    def main_help_text(self, commands_only: bool = False) -> str:
        if commands_only:
            return "\n".join(COMMANDS)
        column = max(map(len, COMMANDS)) + 4
        # As argparse wraps its help, with room for the text beside the names.
        width = max(shutil.get_terminal_size().columns - 2, column + 20)
        lines = [f"usage: {PROG} COMMAND [ARGS...]", "", DESCRIPTION, "", "commands:"]
        for name in COMMANDS:
            lines.append(
                textwrap.fill(
                    first_sentence(self.fetch_command(name).help),
                    width=width,
                    initial_indent=f"  {name}".ljust(column),
                    subsequent_indent=" " * column,
                )
            )
        migrating = ", ".join(MIGRATES_FIRST[:-1]) + f" and {MIGRATES_FIRST[-1]}"
        lines += [
            "",
            textwrap.fill(f"{migrating} migrate the database first.", width=width),
            textwrap.fill(f"{PROG} COMMAND --help shows its arguments and options.", width=width),
        ]
        return "\n".join(lines)


def management_command(name: str) -> str:
    """The management command ``guidepost-mcp NAME`` runs; a usage error for any other NAME."""
    if name in COMMANDS:
        return ALIASES.get(name, name)
    closest = [alias for alias, command in ALIASES.items() if command == name]
    closest += get_close_matches(name, COMMANDS)
    suggestion = f"; did you mean {' or '.join(closest)}?" if closest else ""
    usage_error(f"unknown command {name!r}{suggestion} ({PROG} --help lists the commands)")


def usage_error(message: str) -> NoReturn:
    """Exit 2 with ``message`` on stderr, as argparse does."""
    print(f"{PROG}: error: {message}", file=sys.stderr)
    sys.exit(2)


def first_sentence(text: str) -> str:
    """The first sentence of a command's help, for the list of commands.

    >>> first_sentence("Move runs (RUN_ID moves: ... or stays). Then a summary.")
    'Move runs (RUN_ID moves: ... or stays).'
    """
    found = re.match(r"(.+?[\w)]\.)(?:\s|$)", text, re.S)
    return found.group(1) if found else text


def use_flows_dir(flows: str) -> None:
    """Make ``flows`` the flows directory of this process and its workers.

    Called before Django reads its settings (settings are never changed at run
    time), so GUIDEPOST_FLOWS_DIR names this directory everywhere. Raises
    ValueError for a path that is not a directory.
    """
    directory = Path(flows).expanduser().resolve()
    if not directory.is_dir():
        raise ValueError(f"--flows {flows}: no such directory")
    os.environ["GUIDEPOST_FLOWS_DIR"] = str(directory)


def use_host(host: str) -> None:
    """Make ``host`` the listening address of this process and its workers.

    Called before Django reads its settings, like ``use_flows_dir``: GUIDEPOST_HOST then
    tells every worker whether it listens beyond loopback (agent keys are then required,
    and GUIDEPOST_AUTH=off is refused).
    """
    os.environ["GUIDEPOST_HOST"] = host


def use_port(port: str) -> None:
    """Make ``port`` the listening port of this process and its workers, as ``use_host``
    does the address: GUIDEPOST_PORT then gives the links webhooks carry their port when
    GUIDEPOST_PUBLIC_URL is not set. A port that is not a number is left to ``serve``'s
    own refusal, and port 0 (any free port) to the default."""
    if port.isdigit() and int(port) > 0:
        os.environ["GUIDEPOST_PORT"] = port


def use_listening_address(argv: Sequence[str]) -> None:
    """``serve --host``/``--port`` in a command line, made this process's settings before
    Django reads them."""
    host, port = option_value(argv, "--host"), option_value(argv, "--port")
    if host is not None:
        use_host(host)
    if port is not None:
        use_port(port)


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
    """Run one command line; returns 0 on success, 2 alone (after listing the commands).

    A command's failure exits through Django: its message on stderr, status 1.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        run_django([PROG, "help"], Utility)
        return 2
    name = args[0]
    if name not in HELP:
        management_command(name)  # an unknown name is refused before anything runs
    flows = flows_option(args)
    if flows is not None:
        try:
            use_flows_dir(flows)
        except ValueError as exc:
            usage_error(str(exc))
    if name == "serve":
        use_listening_address(args)
    if name in MIGRATES_FIRST:
        migrate_if_behind()
    if name == "serve":
        with run_directory():
            run_django([PROG, *args], Utility)
    else:
        run_django([PROG, *args], Utility)
    return 0


def migrate_if_behind() -> None:
    """Migrate the database when a migration is not applied yet, and only then.

    Django's ``migrate`` costs most of a second even with nothing to do, and the
    commands that migrate first are also run to read (``webhook list``).
    """
    with configuration_errors(PROG):
        django.setup()
        from guidepost.schema import schema_is_current  # needs the apps set up

        if schema_is_current():
            return
    run_django([PROG, "migrate", "--no-input", "--verbosity", "0"])


def run_django(argv: list[str], utility: type[ManagementUtility] = ManagementUtility) -> None:
    """Run a Django command line; a configuration error is one line on stderr, exit 1.

    ``utility`` dispatches: Django's own (``manage.py``), or guidepost-mcp's ``Utility``.
    """
    with configuration_errors(argv[0]):
        utility(argv).execute()


@contextmanager
def configuration_errors(program: str) -> Iterator[None]:
    """Settings refuse a malformed variable with ImproperlyConfigured naming it; the
    traceback behind it would only hide that line, so it is one line on stderr, exit 1."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "guidepost.settings")
    try:
        yield
    except ImproperlyConfigured as exc:
        sys.exit(f"{Path(program).name}: {exc}")


if __name__ == "__main__":
    sys.exit(main())
