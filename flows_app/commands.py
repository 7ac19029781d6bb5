"""What commands share: the one ``--flows`` option, who is acting, and a Refusal as a
command failure."""

from __future__ import annotations

import getpass
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError, CommandParser

from flowcore.common.errors import Refusal


def add_as_option(parser: CommandParser, what: str) -> None:
    parser.add_argument(
        "--as",
        dest="acting_as",
        metavar="NAME",
        help=f"who {what}, for the record (default: the operating system user)",
    )


def acting_as(name: str | None) -> str:
    """The name recorded for a person acting from the command line."""
    chosen = (name or "").strip()
    if chosen:
        return chosen
    try:
        return getpass.getuser()
    except OSError:  # no user name in the environment or the password database
        raise CommandError("cannot tell who you are: pass --as NAME") from None


def refused(refusal: Refusal) -> CommandError:
    return CommandError(f"{refusal.error}: {refusal.reason}. {refusal.next}")


def add_flows_option(parser: CommandParser) -> None:
    parser.add_argument(
        "--flows",
        type=Path,
        metavar="DIR",
        help="flows directory (default: GUIDEPOST_FLOWS_DIR, else flows/)",
    )


def check_flows_option(flows: Path | None) -> None:
    """``--flows`` was applied before settings were read (guidepost-mcp, manage.py): a
    caller that passes it otherwise (``call_command``) is told to set the setting."""
    if flows is not None and flows.expanduser().resolve() != settings.GUIDEPOST_FLOWS_DIR:
        raise CommandError(f"--flows {flows}: set GUIDEPOST_FLOWS_DIR={flows} instead")
