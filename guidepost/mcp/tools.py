"""The seven MCP tools: their names, descriptions, input schemas and handlers.

A handler only picks its arguments and calls one service or selector; the
dispatcher (``guidepost.mcp.dispatch``) runs the guards before it and shapes
every refusal after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from access_app.callers import Caller
from access_app.guards import arguments, draft_budget, string
from access_app.oauth import SCOPE_DRAFT, SCOPE_WALK
from flowcore.checks.flow_tests import brief_of_tests, summary_verdict
from flowcore.common.limits import (
    MAX_CLOSE_REASON_LENGTH,
    MAX_ID_LENGTH,
    MAX_LABEL_LENGTH,
    MAX_REF_LENGTH,
    MAX_SLOT_VALUE_LENGTH,
    MAX_VALUES_PER_CALL,
    MAX_YAML_BYTES,
)
from flowcore.flow.findings import in_key_order
from flows_app import selectors as flows_selectors
from flows_app.models import Draft
from flows_app.services import DraftSubmitted, draft_create, draft_judge
from guidepost.mcp import output_schemas
from runs_app import agent_steps, selectors

Handler = Callable[[Caller, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    handler: Handler
    read_only: bool = False
    # It discards or ends something a person may still want (answers, a run).
    destructive: bool = False
    # A guard of its own, run by the dispatcher with the others, outside the call's
    # transaction (a budget taken there would be rolled back with a refused call).
    budget: Callable[[Caller], None] | None = None
    # The costly part of the call that needs no database, run by the dispatcher after the
    # arguments are validated and before the call's transaction opens; the handler gets
    # the arguments it returns. A write transaction held through it would hold, on
    # SQLite, the database's one writer: every other caller's write would wait for it.
    prepare: Handler | None = None
    # What an OAuth access token must grant to call it.
    scope: str = SCOPE_WALK


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise ImproperlyConfigured(f"two MCP tools are named {tool.name!r}")
        self._tools[tool.name] = tool
        return tool

    def tool(
        self,
        *,
        name: str,
        title: str,
        description: str,
        schema: dict[str, Any],
        output: dict[str, Any],
        read_only: bool = False,
        destructive: bool = False,
        budget: Callable[[Caller], None] | None = None,
        prepare: Handler | None = None,
        scope: str = SCOPE_WALK,
    ) -> Callable[[Handler], Handler]:
        def decorate(handler: Handler) -> Handler:
            self.register(
                Tool(
                    name,
                    title,
                    description,
                    schema,
                    output,
                    handler,
                    read_only,
                    destructive,
                    budget,
                    prepare,
                    scope,
                )
            )
            return handler

        return decorate

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def all(self) -> list[Tool]:
        return list(self._tools.values())


registry = ToolRegistry()

RUN_ID = string("The run_id returned by guide_start.", max_length=MAX_ID_LENGTH)
VALUES = {
    "type": "object",
    "description": (
        "Answers already known, keyed as in guide_start's index: an ask node's id -> one of "
        f"its labels (at most {MAX_LABEL_LENGTH} characters), a slot name -> its value (at most "
        f"{MAX_SLOT_VALUE_LENGTH}); a slot with a type (number, integer, boolean) takes a JSON "
        'number or boolean too. "__unknown__" means the person does not know.'
    ),
    "additionalProperties": {
        "anyOf": [
            {"type": "string", "maxLength": MAX_SLOT_VALUE_LENGTH},
            {"type": "number"},
            {"type": "boolean"},
        ]
    },
    "propertyNames": {"maxLength": MAX_ID_LENGTH},
    "maxProperties": MAX_VALUES_PER_CALL,
}


# --- the tools ----------------------------------------------------------------------------


@registry.tool(
    name="guide_flows",
    title="List procedures",
    description=(
        "Find the procedure (flow) for the person's need. Without category: the categories "
        "with how many flows each has. With category: that category's flows (id, title, "
        "summary). Call it first, pick the flow whose summary fits, then call guide_start. "
        "If no flow fits, do not invent a procedure."
    ),
    schema=arguments([], category=string("A category id from the list.", max_length=MAX_ID_LENGTH)),
    output=output_schemas.FLOWS_RESULT,
    read_only=True,
)
def guide_flows(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    return flows_selectors.flows_overview(args.get("category"))


@registry.tool(
    name="guide_start",
    title="Start a procedure",
    description=(
        "Start a run of a flow. Returns the first thing to tell or ask (node, tell), and an "
        "index of every key the flow accepts. Pass values you already know from the "
        "conversation (see index) so the run skips questions already answered; pass ref to "
        "link the run to your conversation or ticket id; pass a request_id of your own so "
        "that a retry after a time-out returns the same run (repeated: true) instead of "
        "starting a second one. Then follow `next`."
    ),
    schema=arguments(
        ["flow_id"],
        flow_id=string("The flow's id, from guide_flows.", max_length=MAX_ID_LENGTH),
        values=VALUES,
        ref=string(
            "Your own conversation or ticket id, stored with the run.",
            max_length=MAX_REF_LENGTH,
        ),
        request_id=string(
            "Any id of yours for this start (a UUID, say): calling again with the same "
            "request_id returns the run already started instead of a new one.",
            max_length=MAX_ID_LENGTH,
        ),
    ),
    output=output_schemas.START_RESULT,
)
def guide_start(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    return agent_steps.run_start(
        caller=caller,
        flow_id=args["flow_id"],
        values=args.get("values"),
        ref=args.get("ref"),
        request_id=args.get("request_id"),
    )


@registry.tool(
    name="guide_answer",
    title="Answer the current step",
    description=(
        "Send the person's answer for the node the run waits at. At an ask node, choice is the "
        "label of node.accepts whose condition matches what the person said (you map their "
        'words to a label; the server never interprets free text); "__unknown__" if they do '
        "not know. At a collect node, send the slot values in values. values may also carry "
        "answers for later nodes. Set at to the node id you are answering: a retry after a "
        "time-out then returns the first result (repeated: true) instead of applying twice. "
        "Then follow `next`: deliver `tell` items in order, ask `node`, or hand over."
    ),
    schema=arguments(
        ["run_id"],
        run_id=RUN_ID,
        choice=string(
            'A label of the waiting ask node\'s accepts, or "__unknown__".',
            max_length=MAX_LABEL_LENGTH,
        ),
        values=VALUES,
        at=string(
            "The node id you are answering (node.id from the last result).",
            max_length=MAX_ID_LENGTH,
        ),
    ),
    output=output_schemas.ANSWER_RESULT,
)
def guide_answer(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    return agent_steps.run_answer(
        caller=caller,
        run_id=args["run_id"],
        choice=args.get("choice"),
        values=args.get("values"),
        at=args.get("at"),
    )


@registry.tool(
    name="guide_status",
    title="Show a run",
    description=(
        "Where a run is and how it got there: state, the waiting node, the path taken, the "
        "values given, and what to do next. Use it to resume after losing context, or to "
        "brief the human who takes over."
    ),
    schema=arguments(["run_id"], run_id=RUN_ID),
    output=output_schemas.STATUS_RESULT,
    read_only=True,
)
def guide_status(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    return selectors.run_status(caller=caller, run_id=args["run_id"])


@registry.tool(
    name="guide_back",
    title="Go back to an earlier step",
    description=(
        "Undo answers when the person corrects an earlier one: reopens an ask or collect node "
        "the run passed, and discards everything answered at or after it; the run waits there "
        "again. Without to, undoes the last answer (on a stalled run: reopens the node where it "
        "stalled). Works on active, stalled and completed runs."
    ),
    schema=arguments(
        ["run_id"],
        run_id=RUN_ID,
        to=string("The id of an ask or collect node on the run's path.", max_length=MAX_ID_LENGTH),
    ),
    output=output_schemas.ANSWER_RESULT,
    destructive=True,
)
def guide_back(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    return agent_steps.run_back(caller=caller, run_id=args["run_id"], to=args.get("to"))


@registry.tool(
    name="guide_close",
    title="Close a run",
    description=(
        "End a run that will not reach an end: the person left, or a human took over. "
        "Closing twice is harmless."
    ),
    schema=arguments(
        ["run_id", "reason"],
        run_id=RUN_ID,
        reason=string("Why the run ends here, in a few words.", max_length=MAX_CLOSE_REASON_LENGTH),
    ),
    output=output_schemas.CLOSE_RESULT,
    destructive=True,
)
def guide_close(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    return agent_steps.run_close(caller=caller, run_id=args["run_id"], reason=args["reason"])


@registry.tool(
    name="guide_draft",
    title="Submit a flow for review",
    description=(
        "Submit a new or changed flow (YAML) for review; to change one, read "
        "guidepost://flows/<id> first. Returns lint findings (ok: no errors) and the flow's "
        "tests it fails; guidepost://drafts/<draft_id> tells the decision. No run uses a "
        "draft until approved. Format: keys id ([a-z0-9_]), title, category (an id from "
        "guide_flows), entry (first node id), nodes (a list); optional summary, version, "
        "on_unknown (escalate or broaden), on_stuck (a note for a person). Every node has id, "
        "kind and say (what to convey). Kinds: ask (accepts: {label: when to choose it}; "
        "next: {label: node id}, optional __other__, __unknown__), tell (next: node id), "
        "collect (slots: {name: {ask, required, pattern, hint, personal}} or {name: what to ask}; "
        "next: node id), check (when: [{if: CEL, e.g. amount > 100.0, next: node id}], else: "
        "node id), end (outcome: one word); personal: true marks personal data. Labels are "
        "[A-Za-z0-9_.-]; every path reaches an end, never a node twice. A new draft replaces "
        "the flow's pending one."
    ),
    schema=arguments(["yaml"], yaml=string("The flow's YAML text.", max_length=MAX_YAML_BYTES)),
    output=output_schemas.DRAFT_RESULT,
    budget=draft_budget,
    prepare=lambda caller, args: {**args, "judged": draft_judge(text=args["yaml"])},
    scope=SCOPE_DRAFT,
)
def guide_draft(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    submitted = draft_create(
        text=args["yaml"],
        submitted_via=Draft.Via.KEY,
        submitted_by=caller.key,
        judged=args["judged"],
    )
    return draft_result(submitted)


def draft_result(submitted: DraftSubmitted) -> dict[str, Any]:
    """guide_draft's result, with ``repeated`` when nothing new was stored,
    ``tests`` when the live flow of its id has tests, ``previously`` when a person already
    discarded the same text."""
    draft = submitted.draft
    if submitted.repeated:
        next_text = (
            f"This exact YAML is already waiting for review as {draft.public_id}: nothing new "
            "was stored. A person must approve it before any agent can use it."
        )
    elif draft.ok:
        next_text = (
            "Stored for review. A person must approve the draft before any agent can use it; "
            "do not run it yourself."
        )
    else:
        next_text = (
            "Stored, but it has lint errors: fix every error finding and submit the corrected "
            "YAML with guide_draft again."
        )
    if submitted.superseded:
        next_text += f" It replaces the earlier pending draft {submitted.superseded}."
    tests = submitted.tests
    if tests is not None:
        verdict = summary_verdict(tests, subject="it")
        if tests.get("ok"):
            next_text += (
                f" Against the live tests of {draft.flow_id}: {verdict}; the reviewer sees the "
                "same check."
            )
        else:
            next_text += (
                f" Against the live tests of {draft.flow_id}, {verdict}. The reviewer sees this "
                "and must confirm it to approve the draft: if the change is not meant to break "
                "them, fix the draft and submit it again."
            )
    previously = submitted.previously
    if previously is not None:
        next_text += (
            f" A person discarded this exact text before ({previously.public_id}): address "
            "the reason given in previously, or it will likely be discarded again."
        )
    result: dict[str, Any] = {
        "draft_id": draft.public_id,
        "flow_id": draft.flow_id,
        "ok": draft.ok,
        "findings": in_key_order(draft.findings),
    }
    if tests is not None:
        result["tests"] = brief_of_tests(tests)
    if previously is not None:
        result["previously"] = {
            "draft_id": previously.public_id,
            "state": previously.status,
            "reason": previously.decision_reason,
        }
    result["next"] = next_text
    if submitted.repeated:
        result["repeated"] = True
    return result
