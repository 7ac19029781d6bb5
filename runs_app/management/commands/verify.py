"""``verify [RUN_ID…]``: every run's history checked two ways (ADR 0033).

1. Its hash chain (``runs_app.chain.steps_verify``): no step edited, removed or forged.
2. Its replay (``flows_app.domain.replay``): the steps' stored inputs, applied again through
   the engine on the run's pinned flow version, give back each stored result and the
   run's stored state.

Prints one line per problem and exits non-zero naming every run that differs; silent
but for a count when all agree.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from flows_app.domain.errors import Refusal
from flows_app.domain.findings import counted
from flows_app.domain.replay import replay_differences
from runs_app import selectors
from runs_app.chain import steps_verify
from runs_app.models import Run


def run_problems(run: Run) -> list[str]:
    """Everything wrong with ``run``'s stored history; empty when it verifies."""
    problems = []
    broken = steps_verify(run)
    if broken is not None:
        problems.append(f"the hash chain breaks at step {broken}")
    try:
        flow = selectors.run_flow(run)
    except Refusal as refusal:
        return [*problems, f"its flow version cannot be replayed ({refusal.error})"]
    stored, steps = selectors.run_history(run)
    return problems + replay_differences(flow, stored, steps)


class Command(BaseCommand):
    help = (
        "Check each run's hash chain and replay its steps on its pinned flow version; "
        "exit non-zero naming every run whose stored steps or state differ."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="default: every run")

    def handle(self, *args: Any, **options: Any) -> None:
        run_ids: list[str] = options["run_ids"] or selectors.run_ids_all()
        differ: list[str] = []
        for run_id in run_ids:
            run = Run.objects.select_related("flow_version").filter(public_id=run_id).first()
            problems = ["no such run"] if run is None else run_problems(run)
            for problem in problems:
                self.stdout.write(f"{run_id}: {problem}")
            if problems:
                differ.append(run_id)
        checked = counted(len(run_ids), "run")
        if differ:
            raise CommandError(
                f"{len(differ)} of {checked} differ from their history: {', '.join(differ)}"
            )
        self.stdout.write(f"{checked} verified: hash chains intact, replays equal")
