"""The MCP resources: each live flow's YAML, and the caller's own drafts.

``resources/list`` and ``resources/templates/list`` describe what exists, like
``tools/list``: the live catalog, never a draft. Reading a resource is a call like a
tool's: ``guidepost.mcp.dispatch`` runs ``READ_RESOURCE`` through the same guards
(authenticate, rate limit, authorize, validate) and audits it, so its refusals are the
error object (``guidepost.mcp.server`` sends it as a JSON-RPC error).
"""

from __future__ import annotations

from typing import Any

import mcp.types as types

from access_app.audit import RESOURCE_READ
from access_app.callers import Caller
from access_app.guards import arguments, string
from flowcore.checks.flow_tests import brief_of_tests
from flowcore.common.errors import InvalidInput, NotFound
from flowcore.common.jsontext import compact_json
from flowcore.common.limits import MAX_URI_LENGTH, RESOURCES_PER_PAGE
from flowcore.common.text import shown
from flowcore.flow.flow_ids import FLOW_ID_RE
from flows_app.catalog import current_catalog
from flows_app.models import Draft
from flows_app.selectors import draft_of_submitter, draft_tests_summary, flow_live
from guidepost.mcp.tools import Tool
from runs_app.chain import iso

FLOWS = "guidepost://flows/"
DRAFTS = "guidepost://drafts/"
YAML = "application/yaml"
JSON = "application/json"

TEMPLATES = [
    types.ResourceTemplate(
        name="flow",
        title="A live flow's YAML",
        uri_template=FLOWS + "{flow_id}",
        description=(
            "The YAML text of the live flow flow_id, as agents walk it: read it before you "
            "propose a change with guide_draft."
        ),
        mime_type=YAML,
    ),
    types.ResourceTemplate(
        name="draft",
        title="A draft you submitted",
        uri_template=DRAFTS + "{draft_id}",
        description=(
            "What became of a draft you submitted with guide_draft: its state (pending, "
            "approved, discarded, superseded), when and by whom it was decided, the reason "
            "of a discard, and the live tests it fails or breaks. Only your own drafts."
        ),
        mime_type=JSON,
    ),
]


def flows_page(cursor: str | None) -> types.ListResourcesResult:
    """One page of the live flows, by id: those after ``cursor`` (the last id of the page
    before; a flow added or withdrawn between two pages shifts nothing else)."""
    if cursor is not None and not FLOW_ID_RE.fullmatch(cursor):
        raise InvalidInput(
            "invalid cursor",
            f"the cursor {shown(cursor)} is not one resources/list returned",
            "Call resources/list without a cursor, then pass the nextCursor it returns.",
        )
    flows = current_catalog().flows
    ids = sorted(i for i in flows if cursor is None or i > cursor)
    page = ids[:RESOURCES_PER_PAGE]
    return types.ListResourcesResult(
        resources=[
            types.Resource(
                uri=FLOWS + flow_id,
                name=flow_id,
                title=flows[flow_id].title,
                description=flows[flow_id].display_summary,
                mime_type=YAML,
                size=len(flows[flow_id].source.encode()),
            )
            for flow_id in page
        ],
        next_cursor=page[-1] if len(ids) > RESOURCES_PER_PAGE else None,
    )


def read_resource(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    """One resource's contents: ``{uri, mimeType, text}``. Raises NotFound for a URI that
    names no flow, no draft of the caller's, or nothing guidepost serves."""
    uri: str = args["uri"]
    if uri.startswith(FLOWS):
        flow = flow_live(uri.removeprefix(FLOWS))
        return {"uri": uri, "mimeType": YAML, "text": flow.source}
    if uri.startswith(DRAFTS):
        draft = draft_of_submitter(
            uri.removeprefix(DRAFTS), caller.key, keyed=bool(caller.key_name)
        )
        return {"uri": uri, "mimeType": JSON, "text": compact_json(draft_report(draft))}
    raise NotFound(
        "resource not found",
        f"guidepost has no resource {shown(uri)}",
        f"Read {FLOWS}<flow_id> (resources/list lists them) or {DRAFTS}<draft_id> "
        "(the draft_id guide_draft returned).",
        retryable=True,
    )


def draft_report(draft: Draft) -> dict[str, Any]:
    """A draft as its submitter reads it, with what to do next."""
    report: dict[str, Any] = {
        "draft_id": draft.public_id,
        "flow_id": draft.flow_id,
        "state": draft.status,
        "submitted_at": iso(draft.created_at),
    }
    if draft.decided_at is not None:
        report["decided_at"] = iso(draft.decided_at)
    if draft.decided_by:
        report["decided_by"] = draft.decided_by
    if draft.decision_reason:
        report["reason"] = draft.decision_reason
    summary = draft_tests_summary(draft)
    if summary is not None:
        report["tests"] = brief_of_tests(summary)
    report["next"] = _draft_next(draft)
    return report


def _draft_next(draft: Draft) -> str:
    if draft.status == Draft.Status.PENDING:
        return (
            "A person has not decided yet. Carry on with your work and read this resource "
            "again later; do not submit the same text again."
        )
    if draft.status == Draft.Status.APPROVED:
        return f"Approved: {draft.flow_id} is live as this text; guide_start runs it."
    if draft.status == Draft.Status.DISCARDED:
        return (
            "Discarded: nothing changed for agents. If the reason can be addressed, change "
            "the YAML as it says and submit it with guide_draft; do not resubmit it as is."
        )
    newer = draft.superseded_by.public_id if draft.superseded_by else None
    return f"Replaced by a newer draft of {draft.flow_id}" + (
        f": read {DRAFTS}{newer}." if newer else "."
    )


# A resource read as the dispatcher sees it: a read-only call, never listed as a tool.
READ_RESOURCE = Tool(
    name=RESOURCE_READ,
    title="Read a resource",
    description="",
    input_schema=arguments(["uri"], uri=string("The resource's URI.", max_length=MAX_URI_LENGTH)),
    output_schema={},
    handler=read_resource,
    read_only=True,
)
