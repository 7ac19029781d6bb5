"""``createkey NAME``: a new agent key, printed once, alone, as the last line of stdout.

``--rate-burst``, ``--rate-per-second`` and ``--runs-per-day`` give the key limits of its
own. Once a key exists, callers without one are refused, so the runs they started would
be orphaned mid-conversation: the command says how many are still open, and
``--adopt-keyless`` makes them the new key's, and lets it read the drafts submitted
without a key, in the transaction that creates it. It lives in the project because it
needs the apps: access_app's keys, flows_app's drafts and runs_app's runs.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from access_app.callers import Limits
from access_app.services import KeyRefused, key_create
from flows_app.services import drafts_adopt_keyless
from runs_app.adoption import keyless_runs_open, runs_adopt_keyless


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value >= 0.001:  # also refuses nan
        raise ValueError(text)
    return value


class Command(BaseCommand):
    help = (
        "Create an agent key named NAME and print it once, alone, as the last line. "
        "Only its SHA-256 is stored: copy it now."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="who uses the key, e.g. support-bot")
        parser.add_argument(
            "--rate-burst",
            type=_positive_int,
            metavar="N",
            help="calls the key may make at once (default: GUIDEPOST_RATE_BURST)",
        )
        parser.add_argument(
            "--rate-per-second",
            type=_positive_float,
            metavar="R",
            help="how fast that burst refills (default: GUIDEPOST_RATE_PER_SECOND)",
        )
        parser.add_argument(
            "--runs-per-day",
            type=_positive_int,
            metavar="N",
            help="runs the key may start per day, UTC (default: no cap)",
        )
        parser.add_argument(
            "--adopt-keyless",
            action="store_true",
            help=(
                "make the runs started without a key that are active or stalled this key's, "
                "and the drafts submitted without a key readable with it"
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        limits = Limits(
            burst=options["rate_burst"],
            per_second=options["rate_per_second"],
            runs_per_day=options["runs_per_day"],
        )
        try:
            with transaction.atomic():
                key, secret = key_create(name=options["name"], limits=limits)
                adopted = runs_adopt_keyless(key.name) if options["adopt_keyless"] else []
                drafts = drafts_adopt_keyless(key.name) if options["adopt_keyless"] else []
        except KeyRefused as exc:
            raise CommandError(str(exc)) from None
        if drafts:
            self.stdout.write(
                f"{len(drafts)} draft(s) submitted without a key now belong to {key.name}: "
                "its agent reads them (guidepost://drafts/<draft_id>) with the key."
            )
        if adopted:
            self.stdout.write(
                f"{len(adopted)} run(s) started without a key now belong to {key.name}: "
                "its agent carries them on with the key."
            )
        else:
            left = keyless_runs_open()
            if left.total:
                self.stdout.write(
                    f"Warning: {left.active} active and {left.stalled} stalled run(s) were "
                    "started without a key. Now that a key exists, callers without one are "
                    "refused, and these runs answer `run not found` to every key. To hand "
                    f"them to {key.name}, revoke this key and create it again with "
                    "--adopt-keyless."
                )
        self.stdout.write(
            f"Created the agent key {key.name} ({key.display}…). It is shown this once and "
            "never stored: give it to the agent now, which sends it as "
            "Authorization: Bearer <key>."
        )
        self.stdout.write(secret)
