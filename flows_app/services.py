"""Drafts: storing agent-submitted flows for review, linted by the same function as the CLI."""

from __future__ import annotations

from typing import Any

import yaml
from django.utils import timezone

from flows_app.catalog import current_catalog
from flows_app.lint import has_errors
from flows_app.loader import YamlRefused, build_flow, content_hash, parse_yaml
from flows_app.models import Draft


class DraftRefused(Exception):
    """The text is refused outright and stored nowhere (contract 5.7)."""

    def __init__(self, reason: str, next: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.next = next


def draft_create(*, text: str, submitted_by: str) -> dict[str, Any]:
    """Lint a flow's YAML and store it as a pending draft. Raises DraftRefused for text
    that is too large, unsafe to load, or not a mapping."""
    try:
        data = parse_yaml(text).data
    except YamlRefused as refused:
        where = f" (line {refused.line})" if refused.line else ""
        raise DraftRefused(
            refused.message + where,
            "Send plain YAML under 256 KiB: one mapping, no tags, few aliases, nesting under 32.",
        ) from None
    except yaml.YAMLError:
        data = None  # lint reports the parse error as a `schema` finding
    flow_id = data.get("id") if isinstance(data, dict) else None
    _, findings = build_flow(text, categories=current_catalog().categories)
    ok = not has_errors(findings)
    draft = Draft.objects.create(
        flow_id=flow_id if isinstance(flow_id, str) else "",
        yaml=text,
        content_hash=content_hash(text),
        ok=ok,
        findings=findings,
        submitted_by=submitted_by,
        created_at=timezone.now(),
    )
    if ok:
        next_text = (
            "Stored for review. A person must approve the draft before any agent can use it; "
            "do not run it yourself."
        )
    else:
        next_text = (
            "Stored, but it has lint errors: fix every error finding and submit the corrected "
            "YAML with guide_draft again."
        )
    result: dict[str, Any] = {"draft_id": draft.public_id}
    if draft.flow_id:
        result["flow_id"] = draft.flow_id
    result.update(ok=ok, findings=findings, next=next_text)
    return result
