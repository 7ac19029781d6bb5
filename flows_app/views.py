"""Read-only flow pages for ops: the live flows, and one flow's diagram annotated with
how its runs of the last days went (where they passed, stalled and fell off its labels),
its recent runs and its versions. Also the diagram's stylesheet.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.safestring import mark_safe
from django.views.decorators.http import condition, require_safe

from access_app.callers import Caller
from access_app.web import staff_page
from flowcore.common.limits import USAGE_DAYS, USAGE_MAX_RUNS
from flowcore.drawing.diagram import diagram_css, legend_svg, render_svg
from flowcore.drawing.usage import flow_usage, version_stats
from flows_app import selectors as flow_selectors
from flows_app.runs_port import UsageInputs, flow_runs

_CSS = diagram_css()
_CSS_ETAG = '"' + hashlib.sha256(_CSS.encode()).hexdigest()[:16] + '"'


@require_safe
@condition(etag_func=lambda request: _CSS_ETAG)
def diagram_stylesheet(request: HttpRequest) -> HttpResponse:
    """The diagrams' CSS as a file, so pages need no inline style (Content-Security-Policy)."""
    response = HttpResponse(_CSS, content_type="text/css; charset=utf-8")
    response["Cache-Control"] = "no-cache"  # revalidated by ETag: one 304 per page load
    return response


@staff_page("flows.view")
def flows_list(request: HttpRequest, caller: Caller) -> HttpResponse:
    since = timezone.now() - timedelta(days=USAGE_DAYS)
    counts = flow_runs().runs_by_flow(since=since)
    flows = [(flow, *counts.get(flow.id, (0, 0))) for flow in flow_selectors.flows_live()]
    ctx = {"flows": flows, "days": USAGE_DAYS, "nav": "flows"}
    return render(request, "flows/list.html", ctx)


@staff_page("flows.view")
def flow_detail(request: HttpRequest, caller: Caller, flow_id: str) -> HttpResponse:
    """The flow's diagram with how its runs went, every version's runs side by side, and
    (``?version=REVISION``) the diagram of one version with the counts of its runs only."""
    flow, version = flow_selectors.flow_for_page(flow_id)
    since = timezone.now() - timedelta(days=USAGE_DAYS)
    versions = flow_selectors.flow_versions(flow.id)
    by_version = flow_runs().flow_usage_by_version(flow.id, since=since)
    chosen = request.GET.get("version", "")
    picked = next((v for v in versions if chosen and v.revision == chosen), None)
    if picked is not None:
        flow = flow_selectors.flow_of_hash(picked.content_hash)
        inputs = by_version.get(picked.content_hash) or UsageInputs([], [], False)
    else:  # every version's runs: the same two queries, added up
        inputs = UsageInputs(
            [state for i in by_version.values() for state in i.states],
            [rejected for i in by_version.values() for rejected in i.rejected],
            any(i.capped for i in by_version.values()),
        )
    usage = flow_usage(flow, inputs.states, inputs.rejected)
    svg = render_svg(flow, node_notes=usage.node_notes(), edge_notes=usage.edge_notes(flow))
    live = flow_selectors.flows_live()
    compared = [
        (v, version_stats(by_version[v.content_hash].states, by_version[v.content_hash].rejected))
        for v in versions
        if v.content_hash in by_version
    ]
    ctx = {
        "picked": picked,
        "compared": compared,
        "flow": flow,
        "version": version,
        "live": any(f.content_hash == flow.content_hash for f in live),
        "usage": usage,
        "capped": inputs.capped,
        "max_runs": USAGE_MAX_RUNS,
        "days": USAGE_DAYS,
        # render_svg escapes every text it draws; the markup is ours.
        "svg": mark_safe(svg),
        "legend": mark_safe(legend_svg(states=(), taken=False)),
        "runs": flow_runs().flow_runs_recent(flow.id),
        "versions": versions,
        "stalls": usage.stalls(),
        "nav": "flows",
    }
    return render(request, "flows/flow.html", ctx)
