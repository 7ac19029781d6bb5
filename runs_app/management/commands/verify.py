"""``verify [RUN_ID…] [--heads FILE] [--since FILE]``: every run's history and the ledger
checked (ADR 0067; what is checked: ``runs_app.verification``).

Prints one line per problem, naming the run, seal or audit record and what differs, then
a summary; exits non-zero on any problem. ``--heads FILE`` first seals what can be sealed,
then, when everything verifies, writes the current heads to FILE (a new file) for the
operator to store elsewhere; ``--since FILE`` also proves that nothing recorded before
those heads changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from flowcore.flow.findings import counted
from runs_app.ledger import Heads, heads_now, heads_read, seal_all
from runs_app.verification import Verdict, verify


class Command(BaseCommand):
    help = (
        "Check each run's hash chain, fields and replay, the ledger of seals and the sealed "
        "audit records; exit non-zero naming everything that differs."
    )
    # A read needs none of Django's system checks, which import the URLconf and so
    # the API and the admin: most of its time (serve runs them when it starts).
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="default: everything")
        parser.add_argument(
            "--heads",
            type=Path,
            metavar="FILE",
            help="seal what can be sealed, verify everything, then write the heads to FILE "
            "(a new file) to store elsewhere",
        )
        parser.add_argument(
            "--since",
            type=Path,
            metavar="FILE",
            help="also prove that nothing recorded before the heads in FILE changed",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        run_ids: list[str] = options["run_ids"]
        out: Path | None = options["heads"]
        since: Heads | None = None
        if run_ids and (out or options["since"]):
            raise CommandError("--heads and --since check everything: give no RUN_ID")
        if out is not None and out.exists():
            raise CommandError(f"{out} exists: heads are written once, to a new file")
        if options["since"] is not None:
            try:
                since = heads_read(options["since"])
            except ValueError as exc:
                raise CommandError(str(exc)) from None
        sealed = seal_all() if out is not None else 0
        # Read before the check: every step the heads name is then one the check proved.
        heads = heads_now() if out is not None else None
        verdict = verify(run_ids, since=since)
        for line in [*verdict.problems, *verdict.notes]:
            self.stdout.write(line)
        if verdict.problems:
            raise CommandError(
                f"{counted(len(verdict.problems), 'problem')} ({', '.join(verdict.subjects)}); "
                f"checked {_checked(verdict)}"
            )
        self.stdout.write(_summary(verdict, since, sealed))
        if out is not None and heads is not None:
            try:
                with out.open("x", encoding="utf-8") as handle:
                    handle.write(heads.to_json())
            except OSError as exc:
                raise CommandError(f"{out}: {exc.strerror or exc}") from None
            self.stdout.write(
                f"heads written to {out}: seal {heads.seq}, "
                f"{counted(len(heads.runs), 'run')} not sealed yet; store it elsewhere"
            )


def _checked(verdict: Verdict) -> str:
    checked = counted(verdict.runs, "run")
    if verdict.ledger is not None:
        checked += f", {counted(verdict.ledger.seals, 'seal')}"
    return checked


def _summary(verdict: Verdict, since: Heads | None, sealed: int) -> str:
    parts = [
        f"{counted(verdict.runs, 'run')} verified: hash chains intact, fields bound, replays equal"
        + (
            f" ({verdict.erased} erased: path, statuses, times and who acted proven, values gone)"
            if verdict.erased
            else ""
        )
    ]
    ledger = verdict.ledger
    if ledger is not None:
        parts.append(
            f"{counted(ledger.seals, 'seal')} intact ({counted(ledger.records, 'audit record')}"
            + (f", {ledger.pruned} pruned by retention" if ledger.pruned else "")
            + (f", {ledger.erased} erased with their runs" if ledger.erased else "")
            + f"; {ledger.unsealed} not sealed yet)"
        )
    if sealed:
        parts.append(f"{counted(sealed, 'seal')} written")
    if since is not None:
        parts.append(f"nothing changed since the heads of {since.written_at}")
    return "; ".join(parts)
