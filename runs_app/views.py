"""Read-only pages for ops: the runs list, one run on its flow's diagram, and the JSON the
run page polls for live updates. Each view parses the request, calls selectors and the
pure run view, and renders; access is decided by ``access_app.web`` and ``run_get``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from access_app.callers import Caller
from access_app.web import staff_json, staff_page
from flows_app.domain.diagram import legend_svg, render_svg
from flows_app.domain.jsontext import readable_json
from flows_app.domain.limits import MAX_RUN_QUERY_LENGTH, RUNS_PER_PAGE
from flows_app.domain.model import Flow
from flows_app.domain.personal import mask, masked_step
from flows_app.domain.run_view import RunView, run_view, step_summary
from flows_app.domain.state import RunState
from runs_app import selectors
from runs_app.erasure import ERASED, run_erasure, step_erased
from runs_app.models import Run, Step
from runs_app.selectors import RunFilters

STATES = [choice for choice, _ in Run.State.choices]


# --- the runs list ------------------------------------------------------------------------------


def filters_from(query: Mapping[str, str]) -> RunFilters:
    """The list's filters from a query string; a state that does not exist filters nothing."""
    state = query.get("state") or None
    return RunFilters(
        state=state if state in STATES else None,
        flow_id=(query.get("flow") or "").strip() or None,
        q=(query.get("q") or "").strip()[:MAX_RUN_QUERY_LENGTH] or None,
    )


def _positive(raw: str | None, default: int) -> int:
    try:
        value = int(raw or default)
    except ValueError:
        return default
    return value if value > 0 else default


@staff_page("runs.view")
def runs_list(request: HttpRequest, caller: Caller) -> HttpResponse:
    filters = filters_from(request.GET)
    per_page = _positive(request.GET.get("per_page"), RUNS_PER_PAGE)
    page = selectors.runs_page(
        filters, page=_positive(request.GET.get("page"), 1), per_page=per_page
    )
    if page.page > page.pages:  # past the end: show the last page instead of nothing
        page = selectors.runs_page(filters, page=page.pages, per_page=per_page)
    keep = request.GET.copy()
    keep.pop("page", None)
    ctx = {
        "page": page,
        "runs": page.items,
        "filters": filters,
        "states": STATES,
        "flow_ids": selectors.run_flow_ids(),
        "stalled": selectors.runs_stalled_count(),
        "query": keep.urlencode(),
        "filtered": filters != RunFilters(),
        "nav": "runs",
    }
    return render(request, "runs/list.html", ctx)


# --- one run --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepRow:
    seq: int
    created_at: Any
    tool: str
    input: str
    status: str
    summary: str
    next: str
    handoff: str


def step_row(step: Step, hidden: frozenset[str] = frozenset()) -> StepRow:
    """A step as the timeline shows it; ``hidden``: the personal keys to mask."""
    if step_erased(step):
        return StepRow(
            seq=step.seq,
            created_at=step.created_at,
            tool=step.tool,
            input=ERASED,
            status=step.status,
            summary=ERASED,
            next="",
            handoff="",
        )
    result = step.result
    given = step.input
    if hidden:
        given, result = masked_step(given, result, hidden, step.node_before)
    return StepRow(
        seq=step.seq,
        created_at=step.created_at,
        tool=step.tool,
        input=readable_json(given),
        status=step.status,
        summary=step_summary(step.tool, result),
        next=str(result.get("next", "")),
        handoff=str(result.get("handoff", "")),
    )


@dataclass(frozen=True)
class RunPicture:
    """Everything the run page and its live updates show, computed once per request."""

    run: Run
    flow: Flow
    state: RunState
    view: RunView
    hidden: frozenset[str] = frozenset()  # the personal keys to mask (ADR 0087)

    @property
    def svg(self) -> SafeString:
        # render_svg escapes every text it draws; the markup is ours.
        return mark_safe(
            render_svg(
                self.flow,
                node_states=self.view.node_states,
                edge_states={edge: "taken" for edge in self.view.taken},
            )
        )

    def values(self) -> list[tuple[str, str, str]]:
        """(key, value, the node it belongs to), in the flow's order."""
        keys = [k for k in self.flow.value_keys if k in self.state.values]
        keys += [k for k in self.state.values if k not in keys]
        return [
            (k, mask(v) if k in self.hidden else v, self.flow.owner_of(k) or "")
            for k in keys
            for v in (self.state.values[k],)
        ]

    def context(self) -> dict[str, Any]:
        node = self.flow.nodes.get(self.state.node) if self.state.node else None
        return {
            "run": self.run,
            "flow": self.flow,
            "state": self.state,
            "node": node,
            "values": self.values(),
            "folds": self.view.folds,
            "unmatched": dict(self.state.unmatched),
            "erasure": run_erasure(self.run),
        }


def picture(run: Run, caller: Caller) -> RunPicture:
    flow = selectors.run_flow(run)
    state = selectors.run_state(run)
    return RunPicture(
        run=run,
        flow=flow,
        state=state,
        view=run_view(flow, state),
        hidden=selectors.personal_hidden(caller, flow),
    )


@staff_page("runs.view")
def run_detail(request: HttpRequest, caller: Caller, run_id: str) -> HttpResponse:
    shown = picture(selectors.run_get(caller, run_id), caller)
    ctx = shown.context()
    ctx.update(
        svg=shown.svg,
        legend=mark_safe(legend_svg()),
        rows=[step_row(step, shown.hidden) for step in selectors.run_steps(shown.run)],
        live_url=reverse("run-live", args=[shown.run.public_id]),
        nav="runs",
    )
    return render(request, "runs/run.html", ctx)


@staff_json("runs.view")
def run_live(request: HttpRequest, caller: Caller, run_id: str) -> HttpResponse:
    """What changed on the run since revision ``after``: the nodes' states, the taken
    edges, new timeline rows and the refreshed summary. Nothing but the revision when
    nothing changed (one query beyond the guards)."""
    after = _positive(request.GET.get("after"), 0)
    run = selectors.run_get(caller, run_id)
    data: dict[str, Any] = {
        "revision": run.revision,
        "state": run.state,
        "final": run.state == Run.State.CLOSED,
    }
    if run.revision == after:
        return JsonResponse(data)
    shown = picture(run, caller)
    # A client ahead of the run (it cannot be: steps are never removed) starts over.
    since = after if after < run.revision else 0
    rows = [step_row(step, shown.hidden) for step in selectors.run_steps(run, after=since)]
    ctx = shown.context()
    data.update(
        node_states=shown.view.node_states,
        taken=shown.view.taken_pairs(),
        reset=since != after,
        rows_html=render_to_string("runs/_steps.html", {"rows": rows}, request),
        summary_html=render_to_string("runs/_summary.html", ctx, request),
        values_html=render_to_string("runs/_values.html", ctx, request),
    )
    return JsonResponse(data)
