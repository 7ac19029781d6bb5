"""The ``outputSchema`` of every tool: JSON Schema (2020-12) of its successful result.

With an output schema declared, MCP requires a tool's structured content to
conform, and clients check it; errors (``isError``) carry no structured content.
Every object is closed (``additionalProperties: false``), so a key added to a
result without being declared here fails ``tests/guidepost/mcp/test_first_contact.py``.
Kept compact: ``tools/list`` sends all of this on every listing.
"""

from __future__ import annotations

from typing import Any, get_args

from flowcore.flow.findings import ERROR_CODES, WARNING_CODES
from flowcore.flow.model import NodeKind
from flowcore.flow.slot_types import SLOT_TYPES
from flowcore.run.engine import StallReason, StepStatus
from flowcore.run.state import Via

STR: dict[str, Any] = {"type": "string"}
INT: dict[str, Any] = {"type": "integer"}
STRS: dict[str, Any] = {"type": "array", "items": STR}
STR_MAP: dict[str, Any] = {"type": "object", "additionalProperties": STR}
# A run's values: text and labels, and a typed slot's number or boolean (ADR 0116).
VALUE_MAP: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {"anyOf": [STR, {"type": "number"}, {"type": "boolean"}]},
}
# Never a list of types ({"type": ["string", "null"]}): valid JSON Schema, but not
# portable (the MCP Inspector's --strict check warns of each): clients that turn a schema
# into types of their own read anyOf, not always a list.
STR_OR_NULL: dict[str, Any] = {"anyOf": [STR, {"type": "null"}]}
# A flow's version is text; a run's start recorded before it was (rules 2) is given back
# as recorded, with the number its author wrote, when retried with its request_id.
VERSION: dict[str, Any] = {"anyOf": [STR, INT]}
NODE_KINDS = list(get_args(NodeKind))


def obj(required: list[str], /, **properties: dict[str, Any]) -> dict[str, Any]:
    """A closed object: exactly ``properties``, of which ``required`` are always present."""
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def enum(*values: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


FLOW = obj(["id", "title"], id=STR, title=STR, version=VERSION)
NODE = obj(
    ["id", "kind", "say"],
    id=STR,
    kind=enum(*NODE_KINDS),
    say=STR,
    accepts=STR_MAP,
    returns=STR_MAP,
    other={"const": True},
    type=enum(*(t for t in SLOT_TYPES if t != "choice")),
    slots={
        "type": "object",
        "additionalProperties": obj(
            ["ask", "required"],
            ask=STR,
            required={"type": "boolean"},
            type=enum(*SLOT_TYPES),
            options=STRS,
            hint=STR,
        ),
    },
    outcome=STR,
)
SHORT_NODE = obj(["id", "kind", "say"], id=STR, kind=enum(*NODE_KINDS), say=STR)
FOLD_STEP = obj(
    ["id", "kind", "say"],
    id=STR,
    kind=enum(*NODE_KINDS),
    say=STR,
    outcome=STR,
    branches={"type": "array", "items": {"$ref": "#/$defs/branch"}},
)
BRANCH = obj(
    ["label", "when", "steps"], label=STR, when=STR, steps={"type": "array", "items": FOLD_STEP}
)
# Keys each status always carries; the rest are optional.
STATUS_REQUIRES = {
    "completed": ["outcome"],
    "unmatched": ["attempt", "max_unmatched", "rejected"],
    "branched": ["branches", "common"],
    "stalled": ["reason", "handoff"],
}


def step_result(**extra: dict[str, Any]) -> dict[str, Any]:
    """guide_start, guide_answer and guide_back: a step result (plus ``extra`` keys)."""
    schema = obj(
        ["run_id", "status", "next"],
        run_id=STR,
        status=enum(*get_args(StepStatus)),
        next=STR,
        node=NODE,
        tell={"type": "array", "items": obj(["id", "say"], id=STR, say=STR)},
        checked={
            "type": "array",
            "items": obj(["id", "say", "took", "next"], id=STR, say=STR, took=STR, next=STR),
        },
        looked_up={
            "type": "array",
            "items": obj(["id", "say", "took"], id=STR, say=STR, took=STR, next=STR, failed=STR),
        },
        skipped=STRS,
        ignored={
            "type": "array",
            "items": obj(["key", "reason"], key=STR, reason=STR, candidates=STRS),
        },
        outcome=STR_OR_NULL,
        attempt=INT,
        max_unmatched=INT,
        rejected=STR,
        rejected_slots=STR_MAP,
        candidates=STRS,
        branches={"type": "array", "items": {"$ref": "#/$defs/branch"}},
        common={"anyOf": [SHORT_NODE, {"type": "null"}]},
        reason=enum(*get_args(StallReason)),
        handoff=STR,
        other={"const": True},
        repeated={"const": True},
        **extra,
    )
    schema["allOf"] = [
        {"if": {"properties": {"status": {"const": status}}}, "then": {"required": keys}}
        for status, keys in STATUS_REQUIRES.items()
    ]
    schema["$defs"] = {"branch": BRANCH}
    return schema


FLOWS_RESULT = {
    **obj(
        ["next"],
        categories={
            "type": "array",
            "items": obj(
                ["id", "title", "description", "count"],
                id=STR,
                title=STR,
                description=STR,
                count=INT,
            ),
        },
        category=STR,
        flows={
            "type": "array",
            "items": obj(["id", "title", "summary"], id=STR, title=STR, summary=STR, version=STR),
        },
        next=STR,
    ),
    "oneOf": [{"required": ["categories"]}, {"required": ["category", "flows"]}],
}
START_RESULT = step_result(flow=FLOW, index=STR_MAP)
ANSWER_RESULT = step_result()
STATUS_RESULT = obj(
    ["run_id", "flow", "state", "path", "values", "started_at", "updated_at", "next"],
    run_id=STR,
    flow=FLOW,
    state=enum("active", "completed", "stalled", "closed"),
    node=NODE,
    path={
        "type": "array",
        "items": obj(
            ["id", "kind", "via"],
            id=STR,
            kind=enum(*NODE_KINDS),
            via=enum(*get_args(Via)),
            value=STR,
            # A check's entry: the values its conditions read (null: the run had none); a
            # lookup's, the values it sent.
            read={
                "type": "object",
                "additionalProperties": {
                    "anyOf": [STR, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]
                },
            },
        ),
    },
    values=VALUE_MAP,
    outcome=STR_OR_NULL,
    handoff=STR,
    ref=STR,
    started_at={"type": "string", "format": "date-time"},
    updated_at={"type": "string", "format": "date-time"},
    next=STR,
)
CLOSE_RESULT = obj(
    ["run_id", "state", "reason", "next"],
    run_id=STR,
    state={"const": "closed"},
    reason=STR,
    next=STR,
    repeated={"const": True},
)
DRAFT_RESULT = obj(
    ["draft_id", "ok", "findings", "next"],
    draft_id=STR,
    flow_id=STR,
    ok={"type": "boolean"},
    findings={
        "type": "array",
        "items": obj(
            ["level", "code", "where", "message"],
            level=enum("error", "warning"),
            code=enum(*ERROR_CODES, *WARNING_CODES),
            where=STR,
            message=STR,
            file=STR,
            line=INT,
        ),
    },
    tests=obj(
        ["scenarios", "failed", "guarantees", "broken", "names"],
        scenarios=INT,
        failed=INT,
        guarantees=INT,
        broken=INT,
        names=STRS,
    ),
    previously=obj(
        ["draft_id", "state", "reason"], draft_id=STR, state={"const": "discarded"}, reason=STR
    ),
    next=STR,
    repeated={"const": True},
)
