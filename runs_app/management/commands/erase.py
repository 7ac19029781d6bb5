"""``erase RUN_ID… --reason TEXT`` or ``erase --ref REF --reason TEXT``: erase ended runs'
values and keep their proof (``runs_app.erasure``, ADR 0086).

Prints one line per run erased (or already erased, or left because it is still open), then
a summary; exits non-zero when a run does not exist or is still active or stalled.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from flowcore.common.errors import Refusal
from flowcore.flow.findings import counted
from runs_app.erasure import database_vacuum, run_erase, runs_erase_by_ref

# Who erases from the command line (the erase step's caller).
OPERATOR = "operator:erase"


class Command(BaseCommand):
    help = (
        "Erase the values of ended runs (RUN_ID…, or every run with --ref REF): what people "
        "said goes, what verify proves stays; the erasure is recorded in each run's chain."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="the runs to erase")
        parser.add_argument("--ref", help="erase every ended run started with this ref")
        parser.add_argument(
            "--reason", required=True, help="why (recorded in the chain), e.g. the ticket"
        )
        parser.add_argument(
            "--keep-ref", action="store_true", help="keep each run's ref (erased by default)"
        )
        parser.add_argument(
            "--vacuum",
            action="store_true",
            help="then rewrite the database so no free page keeps the erased text",
        )
        parser.add_argument(
            "--by",
            default="",
            metavar="NAME",
            help="who asks for the erasure, recorded as operator:NAME (default: operator:erase)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        run_ids: list[str] = options["run_ids"]
        ref: str | None = options["ref"]
        if bool(run_ids) == bool(ref):
            raise CommandError("give RUN_ID… or --ref REF (one of them)")
        by = f"operator:{options['by']}" if options["by"] else OPERATOR
        reason, keep_ref = options["reason"], options["keep_ref"]
        try:
            if ref:
                erased, still_open = runs_erase_by_ref(
                    ref=ref, reason=reason, by=by, keep_ref=keep_ref
                )
                for run_id in erased:
                    self.stdout.write(f"{run_id}: erased")
                for run_id in still_open:
                    self.stdout.write(f"{run_id}: not erased: still open (close it first)")
                summary = f"{counted(len(erased), 'run')} erased with ref {ref!r}"
                if still_open:
                    raise CommandError(
                        f"{summary}; {counted(len(still_open), 'run')} still open: close them, "
                        "then erase again"
                    )
                self.stdout.write(summary)
                self._vacuum(options)
                return
            done = 0
            for run_id in run_ids:
                if run_erase(run_id=run_id, reason=reason, by=by, keep_ref=keep_ref):
                    done += 1
                    self.stdout.write(f"{run_id}: erased")
                else:
                    self.stdout.write(f"{run_id}: erased already")
        except Refusal as refusal:
            raise CommandError(f"{refusal.error}: {refusal.reason}. {refusal.next}") from None
        self.stdout.write(f"{counted(done, 'run')} erased")
        self._vacuum(options)

    def _vacuum(self, options: dict[str, Any]) -> None:
        if options["vacuum"]:
            self.stdout.write(database_vacuum())
