"""What flows_app reads of runs, through one port.

The flow pages (``views``), the flows API (``api``) and the review admin (``admin``)
count and list a flow's runs, yet flows_app never imports runs_app (it sits below it,
ADR 0063). They ask ``flow_runs()``, the provider the project names in
``settings.GUIDEPOST_FLOW_RUNS`` (runs_app's ``runs_app.selectors.flow_runs``), for
exactly what ``FlowRuns`` lists.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, cast

from django.conf import settings
from django.db.models import Model
from django.utils.module_loading import import_string

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


@functools.cache
def flow_runs() -> FlowRuns:
    """The provider named by ``settings.GUIDEPOST_FLOW_RUNS``, imported once."""
    return cast(FlowRuns, import_string(settings.GUIDEPOST_FLOW_RUNS))
