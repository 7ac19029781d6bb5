"""Pages for ops: the inbox (the runs list, runs waiting for a person first), one run on
its flow's diagram, the JSON the run page polls for live updates, and the forms a person
posts to take a stalled run on, resolve it or close it. Each view parses the request,
calls selectors or one use case and the pure run view, and renders; access is
decided by ``access_app.web`` and ``run_get``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import SafeString, mark_safe

from access_app.callers import ANONYMOUS, KEY_OWNER, RUNS_RESOLVE, Caller
from access_app.web import http_status, staff_form, staff_json, staff_page
from flowcore.common.errors import Refusal
from flowcore.common.jsontext import readable_json
from flowcore.common.limits import MAX_RUN_QUERY_LENGTH, RUNS_PER_PAGE
from flowcore.common.lookups import Misfit
from flowcore.drawing.diagram import legend_svg, render_svg
from flowcore.drawing.run_view import RunView, run_view, step_summary
from flowcore.flow.model import TEXT, AskNode, CheckNode, CollectNode, Flow, LookupNode, Slot
from flowcore.flow.slot_types import as_text
from flowcore.run import engine
from flowcore.run.lookups import Looked, judged
from flowcore.run.personal import mask, masked_step
from flowcore.run.results import RESOLVE
from flowcore.run.state import RunState
from runs_app import claims, resolve, selectors
from runs_app.erasure import ERASED, run_erasure, step_erased
from runs_app.models import Run, Step
from runs_app.selectors import RunFilters

STATES = [choice for choice, _ in Run.State.choices]
# The inbox's views: every run, the runs waiting for a person, the runs I have taken on.
VIEWS = ("all", "waiting", "mine")


# --- the runs list ------------------------------------------------------------------------------


def filters_from(query: Mapping[str, str], me: str = "") -> RunFilters:
    """The list's filters from a query string; a state that does not exist filters nothing.
    ``view``: ``waiting`` (stalled runs), ``mine`` (runs ``me`` has taken on)."""
    state = query.get("state") or None
    view = query.get("view")
    if view == "waiting":
        state = Run.State.STALLED
    return RunFilters(
        state=state if state in STATES else None,
        flow_id=(query.get("flow") or "").strip() or None,
        q=(query.get("q") or "").strip()[:MAX_RUN_QUERY_LENGTH] or None,
        claimed_by=me if view == "mine" else None,
        inbox=True,
    )


def _positive(raw: str | None, default: int) -> int:
    try:
        value = int(raw or default)
    except ValueError:
        return default
    return value if value > 0 else default


@staff_page("runs.view")
def runs_list(request: HttpRequest, caller: Caller) -> HttpResponse:
    filters = filters_from(request.GET, caller.name)
    per_page = _positive(request.GET.get("per_page"), RUNS_PER_PAGE)
    page = selectors.runs_page(
        filters, page=_positive(request.GET.get("page"), 1), per_page=per_page
    )
    if page.page > page.pages:  # past the end: show the last page instead of nothing
        page = selectors.runs_page(filters, page=page.pages, per_page=per_page)
    keep = request.GET.copy()
    keep.pop("page", None)
    stalled, mine = selectors.runs_inbox_counts(caller.name)
    ctx = {
        "page": page,
        "runs": page.items,
        "filters": filters,
        "states": STATES,
        "flow_ids": selectors.run_flow_ids(),
        "stalled": stalled,
        "mine": mine,
        "view": request.GET.get("view") if request.GET.get("view") in VIEWS else "all",
        "query": keep.urlencode(),
        "filtered": filters != RunFilters(inbox=True),
        "can_resolve": RUNS_RESOLVE in caller.permissions,
        "me": caller.name,
        "here": request.get_full_path(),
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
    note: str = ""  # a person's note with their answer


def made_by(step: Step) -> str:
    """Who made ``step`` when it was not the run's agent (a person, ``staff:NAME``, or an
    operator's command); "" for an agent's step."""
    agent = step.caller.startswith((KEY_OWNER, ANONYMOUS))
    return "" if agent or not step.caller else step.caller


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
        summary=step_summary(step.tool, result) + (f" (by {by})" if (by := made_by(step)) else ""),
        next=str(result.get("next", "")),
        handoff=str(result.get("handoff", "")),
        note=str(given.get("note") or "") if step.tool == RESOLVE else "",
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
            (k, mask(v) if k in self.hidden else as_text(v), self.flow.owner_of(k) or "")
            for k in keys
            for v in (self.state.values[k],)
        ]

    def checks(self) -> list[dict[str, Any]]:
        """The checks on the run's path: what each checked, the condition that held (or
        ``else``), where it led, and the values it read (personal ones masked)."""
        found = []
        for entry in self.state.effective_path():
            node = self.flow.nodes.get(entry.id)
            if not isinstance(node, CheckNode) or entry.read is None:
                continue
            read = [
                (k, "—" if v is None else mask(v) if k in self.hidden else as_text(v))
                for k, v in entry.read
            ]
            took = entry.value or ""
            to = dict(node.edges()).get(took)
            found.append({"id": node.id, "say": node.say, "took": took, "to": to, "read": read})
        return found

    def lookups(self) -> list[dict[str, Any]]:
        """The lookups on the run's path, and the one it stalled at: the endpoint asked,
        what it answered or why the call failed, how long it took, where the run went,
        and the values sent (personal ones masked)."""
        if not self.flow.has_lookups:
            return []
        calls = selectors.run_lookup_calls(self.run)
        entries = self.state.effective_path()
        if self.state.state == "stalled" and self.state.path:
            entries.append(self.state.path[-1])
        found = []
        for entry in entries:
            node = self.flow.nodes.get(entry.id)
            if not isinstance(node, LookupNode) or entry.via == "back":
                continue
            made = calls.get(node.id, {})
            try:
                answer = judged(node, Looked.from_recorded(made)) if made else None
            except ValueError:  # a row changed by hand: verify names it, the page shows the rest
                answer = None
            sent = [(k, mask(v) if k in self.hidden else as_text(v)) for k, v in entry.read or ()]
            found.append(
                {
                    "id": node.id,
                    "say": node.say,
                    "endpoint": node.call,
                    "took": entry.value or "",
                    "by_person": entry.via == "person",
                    "failed": answer.reason if isinstance(answer, Misfit) else "",
                    "ms": made.get("ms"),
                    "to": node.next.get(entry.value or ""),
                    "sent": sent,
                }
            )
        return found

    def context(self) -> dict[str, Any]:
        node = self.flow.nodes.get(self.state.node) if self.state.node else None
        return {
            "run": self.run,
            "flow": self.flow,
            "state": self.state,
            "node": node,
            "values": self.values(),
            "checks": self.checks(),
            "lookups": self.lookups(),
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


@dataclass(frozen=True)
class SlotField:
    """One slot of a collect where a run stalled, as the resolve form asks for it."""

    name: str
    ask: str
    required: bool
    hint: str
    pattern: str
    value: str  # what the person typed (after a refusal), else ""


def resolve_panel(
    shown: RunPicture, caller: Caller, posted: Mapping[str, str] | None
) -> dict[str, Any]:
    """What the resolve panel of a stalled run's page shows: who has the run since when,
    and for a person allowed to resolve runs whom it is not taken from, the node where it
    stalled as a form: an ask's labels with their meanings, a collect's slots still to
    give with their hints and patterns, a lookup's labels and the values it may set."""
    claim = selectors.run_claim(shown.run) if shown.run.state == Run.State.STALLED else None
    ctx: dict[str, Any] = {
        "claim": claim,
        "claim_since": claims.clock(claim.at, timezone.now()) if claim is not None else "",
        # Only the taker may answer or close a taken run: nobody else is shown a form the
        # server would refuse.
        "taken_by_another": claim is not None and claim.by != caller.name,
        "can_resolve": RUNS_RESOLVE in caller.permissions,
        "me": caller.name,
        "posted": posted or {},
    }
    node = shown.flow.nodes.get(shown.state.node) if shown.state.node else None
    if shown.run.state != Run.State.STALLED or node is None:
        return ctx
    if isinstance(node, AskNode):
        ctx["labels"] = list(node.accepts.items())
    elif isinstance(node, CollectNode):
        ctx["slots"] = [
            SlotField(
                name=slot.name,
                ask=slot.ask,
                required=slot.required,
                # A typed slot says what fits on the form, as a refusal would.
                hint=engine.slot_format(slot) if slot.type != TEXT else slot.hint or "",
                pattern=slot.pattern or "",
                value=(posted or {}).get("slot:" + slot.name, ""),
            )
            for slot in engine.slots_to_give(node, shown.state.values)
        ]
    elif isinstance(node, LookupNode):
        ctx["labels"] = list(node.returns.items())
        ctx["slots"] = [
            SlotField(
                name=key,
                ask=f"what {node.call} would have answered ({kind}), if you know it",
                required=False,
                hint=engine.slot_format(Slot(key, "", type=kind)) if kind != TEXT else "",
                pattern="",
                value=(posted or {}).get("slot:" + key, ""),
            )
            for key, kind in node.sets.items()
        ]
    return ctx


def _run_page(
    request: HttpRequest,
    caller: Caller,
    run_id: str,
    *,
    refusal: Refusal | None = None,
    posted: Mapping[str, str] | None = None,
) -> HttpResponse:
    shown = picture(selectors.run_get(caller, run_id), caller)
    ctx = shown.context()
    ctx.update(
        svg=shown.svg,
        legend=mark_safe(legend_svg()),
        rows=[step_row(step, shown.hidden) for step in selectors.run_steps(shown.run)],
        live_url=reverse("run-live", args=[shown.run.public_id]),
        nav="runs",
        refusal=refusal,
        **resolve_panel(shown, caller, posted),
    )
    status = http_status(refusal) if refusal is not None else 200
    return render(request, "runs/run.html", ctx, status=status)


@staff_page("runs.view")
def run_detail(request: HttpRequest, caller: Caller, run_id: str) -> HttpResponse:
    return _run_page(request, caller, run_id)


def _answer_of(post: Mapping[str, str]) -> tuple[str | None, dict[str, object] | None]:
    """The form's answer as ``engine.resolve`` takes it: ``choice``, and ``slot:NAME`` fields
    as values (an empty field is a slot left out)."""
    choice = post.get("choice") or None
    values: dict[str, object] = {
        key.removeprefix("slot:"): value
        for key, value in post.items()
        if key.startswith("slot:") and value.strip()
    }
    return choice, values or None


@staff_form("runs.resolve")
def run_resolve(request: HttpRequest, caller: Caller, run_id: str) -> HttpResponse:
    """A person resolves the run: answers the node where it stalled. A refusal is shown on
    the run's page with what they typed."""
    choice, values = _answer_of(request.POST)
    try:
        result = resolve.run_resolve(
            caller=caller,
            run_id=run_id,
            choice=choice,
            values=values,
            note=request.POST.get("note"),
        )
    except Refusal as refusal:
        if refusal.error == "run not found":
            raise
        return _run_page(request, caller, run_id, refusal=refusal, posted=request.POST.dict())
    where = result.get("node", {}).get("id", "")
    messages.success(
        request,
        f"Resolved. The run is {'completed' if result['status'] == 'completed' else 'active'}"
        + (f" at {where}" if where else "")
        + ": the agent goes on from there.",
    )
    return HttpResponseRedirect(reverse("run", args=[run_id]), status=303)


@staff_form("runs.resolve")
def run_close(request: HttpRequest, caller: Caller, run_id: str) -> HttpResponse:
    """A person closes a stalled run with a reason."""
    try:
        resolve.run_close_stalled(caller=caller, run_id=run_id, reason=request.POST.get("reason"))
    except Refusal as refusal:
        if refusal.error == "run not found":
            raise
        return _run_page(request, caller, run_id, refusal=refusal, posted=request.POST.dict())
    messages.success(request, "Closed. The agent is told the run is closed.")
    return HttpResponseRedirect(reverse("run", args=[run_id]), status=303)


@staff_form("runs.resolve")
def run_claim(request: HttpRequest, caller: Caller, run_id: str) -> HttpResponse:
    """Take a stalled run on (``action=claim``) or release it (``action=release``), then go
    back to the page the form was on (``back``)."""
    try:
        if request.POST.get("action") == "release":
            held = claims.run_release(caller=caller, run_id=run_id)
            if held is not None:
                whose = "your" if held == caller.name else f"{held}'s"
                messages.success(request, f"Released {whose} claim on {run_id}.")
        else:
            claims.run_claim(caller=caller, run_id=run_id)
            messages.success(request, f"You took {run_id} on: others see it taken by you.")
    except Refusal as refusal:
        if refusal.error == "run not found":
            raise
        messages.error(request, f"{refusal.reason}. {refusal.next}")
    back = request.POST.get("back") or ""
    if not url_has_allowed_host_and_scheme(back, allowed_hosts=None) or not back.startswith("/"):
        back = reverse("run", args=[run_id])
    return HttpResponseRedirect(back, status=303)


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
    ctx.update(resolve_panel(shown, caller, None), live_url=reverse("run-live", args=[run_id]))
    data.update(
        resolve_html=render_to_string("runs/_resolve.html", ctx, request),
        node_states=shown.view.node_states,
        taken=shown.view.taken_pairs(),
        reset=since != after,
        rows_html=render_to_string("runs/_steps.html", {"rows": rows}, request),
        summary_html=render_to_string("runs/_summary.html", ctx, request),
        values_html=render_to_string("runs/_values.html", ctx, request),
    )
    return JsonResponse(data)
