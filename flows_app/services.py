"""Writes of flows: pinning a flow version, and storing drafts for review.

Drafts are linted by the same function as the CLI and the flows directory.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import yaml
from django.utils import timezone

from flows_app.catalog import current_catalog
from flows_app.domain.building import build_flow, content_hash
from flows_app.domain.errors import Refusal
from flows_app.domain.findings import has_errors
from flows_app.domain.limits import MAX_YAML_BYTES, MAX_YAML_DEPTH
from flows_app.domain.model import Flow
from flows_app.domain.yaml_safe import YamlRefused, parse_yaml
from flows_app.models import Draft, FlowVersion


def flow_version_pin(*, flow: Flow, now: datetime) -> FlowVersion:
    """The stored version of ``flow``'s exact text, created on first use."""
    version, _ = FlowVersion.objects.get_or_create(
        content_hash=flow.content_hash,
        defaults={
            "flow_id": flow.id,
            "title": flow.title,
            "version": "" if flow.version is None else str(flow.version),
            "source": flow.source,
            "created_at": now,
        },
    )
    return version


def draft_create(*, text: str, submitted_by: str) -> dict[str, Any]:
    """Lint a flow's YAML and store it as a pending draft.

    Raises Refusal ("draft refused") for text that is too large, unsafe to load,
    or not a mapping; such text is stored nowhere.
    """
    try:
        data = parse_yaml(text).data
    except YamlRefused as refused:
        where = f" (line {refused.line})" if refused.line else ""
        raise Refusal(
            "draft refused",
            refused.message + where,
            f"Send plain YAML under {MAX_YAML_BYTES // 1024} KiB: one mapping, no tags, "
            f"few aliases, nesting under {MAX_YAML_DEPTH}.",
            retryable=True,
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
