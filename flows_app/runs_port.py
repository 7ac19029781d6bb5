"""What flows_app reads of runs, through one port.

The flow pages (``views``), the flows API (``api``) and the review admin (``admin``)
count and list a flow's runs, yet flows_app never imports runs_app: it sits below it,
so that runs can pin flow versions without a circle. They ask ``flow_runs()`` for
exactly what ``FlowRuns`` lists; the project, which may import both apps, hands in
runs_app's provider when its apps are ready (``guidepost.apps``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from django.core.exceptions import ImproperlyConfigured
from django.db.models import Model

from flowcore.run.state import RunState


@dataclass(frozen=True)
class UsageInputs:
    """What the flow pages aggregate: run states, answers rejected per node, and whether
    the window held more runs than were read."""

    states: list[RunState]
    rejected: list[tuple[str, str | None, int]]
    capped: bool


class FlowRuns(Protocol):
    """The reads of runs a flow's pages need."""

    def runs_by_flow(self, *, since: datetime) -> dict[str, tuple[int, int]]:
        """Per flow id: (runs started since ``since``, runs stalled now among them)."""
        ...

    def flow_usage_inputs(self, flow_id: str, *, since: datetime) -> UsageInputs:
        """The states of the flow's runs started since ``since`` (at most
        ``limits.USAGE_MAX_RUNS``) and its answers that matched no label."""
        ...

    def flow_usage_by_version(self, flow_id: str, *, since: datetime) -> dict[str, UsageInputs]:
        """``flow_usage_inputs``, per content hash of the version the runs are on."""
        ...

    def runs_by_version(self, flow_id: str) -> dict[str, dict[str, int]]:
        """Per content hash of the flow's versions: its runs by state (every run, ever)."""
        ...

    def flow_runs_recent(self, flow_id: str) -> Sequence[Model]:
        """The flow's most recent runs (``limits.RECENT_RUNS``), as the run table draws them."""
        ...


_provider: FlowRuns | None = None


def flow_runs_provide(provider: FlowRuns) -> None:
    """Make ``provider`` the one ``flow_runs()`` returns (the project's composition root
    calls this once its apps are ready)."""
    global _provider
    _provider = provider


def flow_runs() -> FlowRuns:
    """The reads of runs the project handed in; ImproperlyConfigured before it has."""
    if _provider is None:
        raise ImproperlyConfigured(
            "nothing provides flows_app.runs_port.FlowRuns: the guidepost app, which hands "
            "in runs_app's, is not installed or not ready"
        )
    return _provider
