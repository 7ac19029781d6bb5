"""Building a Flow from YAML text: parse safely, lint, and construct only when clean.

The one function behind the CLI's lint, the flows directory, drafts and
approval, so every interface judges a flow the same way.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

import yaml

from flowcore.flow import lint
from flowcore.flow.findings import Finding, has_errors, refused_finding, yaml_error_finding
from flowcore.flow.model import (
    DEFAULT_BRANCH_DEPTH,
    DEFAULT_MAX_BRANCH_FANOUT,
    DEFAULT_MAX_UNMATCHED,
    DEFAULT_ON_UNKNOWN,
    TEXT,
    AskNode,
    Branch,
    Category,
    CheckNode,
    CollectNode,
    EndNode,
    Flow,
    LookupNode,
    Slot,
    TellNode,
    frozen_mapping,
)
from flowcore.flow.model import Node as FlowNode
from flowcore.flow.yaml_safe import YamlMap, YamlRefused, key_line_of, parse_yaml

_ID_LINE_RE = re.compile(r"^id:[ \t]*['\"]?([a-z0-9_]{1,64})['\"]?[ \t]*(?:#.*)?$", re.MULTILINE)


def content_hash(text: str) -> str:
    """SHA-256 hex digest of the UTF-8 text: what runs are pinned to."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- building flows ------------------------------------------------------------------------


def build_flow(
    text: str,
    *,
    categories: Mapping[str, Category],
    file: str | None = None,
    expected_id: str | None = None,
) -> tuple[Flow | None, list[Finding]]:
    """Parse and lint one flow; return the Flow only when no finding is an error.

    Never raises for bad input: YAML that is refused or does not parse is a ``schema``
    finding. Callers that must refuse unsafe YAML outright (drafts) call parse_yaml first.
    """
    fallback = expected_id or _guess_id(text) or "?"
    try:
        doc = parse_yaml(text)
    except YamlRefused as exc:
        return None, [refused_finding(exc.message, where=fallback, file=file, line=exc.line)]
    except yaml.YAMLError as exc:
        return None, [yaml_error_finding(exc, where=fallback, file=file)]
    findings = lint.lint_data(doc.data, categories=categories, file=file, expected_id=expected_id)
    if has_errors(findings):
        return None, findings
    flow = _flow_from_data(doc.data, text)
    findings += lint.lint_flow(flow, file=file, lines=_node_lines(doc.data))
    if has_errors(findings):  # a check's condition, judged on the built flow
        return None, findings
    return flow, findings


def _guess_id(text: str) -> str | None:
    r"""The flow id as written on a top-level ``id:`` line, for findings on unparsable text.

    >>> _guess_id("title: x\nid: refund\n")
    'refund'
    """
    match = _ID_LINE_RE.search(text)
    return match.group(1) if match else None


def _node_lines(data: YamlMap) -> dict[str, int]:
    """Each node's line, each condition's of a check as ``node/when/N`` (from 0), and a
    lookup's ``send`` as ``node/send``."""
    lines = {node["id"]: node.line for node in data["nodes"]}
    for node in data["nodes"]:
        if node.get("kind") == "lookup":
            lines[f"{node['id']}/send"] = key_line_of(node, "send") or node.line
        if node.get("kind") == "check":
            for i, item in enumerate(node["when"]):
                lines[f"{node['id']}/when/{i}"] = key_line_of(item, "if") or node.line
    return lines


def _flow_from_data(data: Mapping[str, Any], text: str) -> Flow:
    # Only called on lint-clean data, so every key has the type lint checked.
    nodes = {node["id"]: _node_from_data(node) for node in data["nodes"]}
    return Flow(
        id=data["id"],
        title=data["title"],
        category=data["category"],
        entry=data["entry"],
        nodes=frozen_mapping(nodes),
        summary=data.get("summary"),
        version=data.get("version"),
        max_unmatched=data.get("max_unmatched", DEFAULT_MAX_UNMATCHED),
        max_branch_fanout=data.get("max_branch_fanout", DEFAULT_MAX_BRANCH_FANOUT),
        branch_depth=data.get("branch_depth", DEFAULT_BRANCH_DEPTH),
        on_unknown=data.get("on_unknown", DEFAULT_ON_UNKNOWN),
        on_stuck=data.get("on_stuck"),
        source=text,
        content_hash=content_hash(text),
    )


def _node_from_data(data: Mapping[str, Any]) -> FlowNode:
    kind = data["kind"]
    if kind == "ask":
        return AskNode(
            id=data["id"],
            say=data["say"],
            accepts=frozen_mapping(data["accepts"]),
            next=frozen_mapping(data["next"]),
            on_unknown=data.get("on_unknown"),
            on_stuck=data.get("on_stuck"),
            personal=data.get("personal", False),
            type=data.get("type", TEXT),
        )
    if kind == "tell":
        return TellNode(id=data["id"], say=data["say"], next=data["next"])
    if kind == "collect":
        return CollectNode(
            id=data["id"],
            say=data["say"],
            slots=tuple(_slot_from_data(name, spec) for name, spec in data["slots"].items()),
            next=data["next"],
            on_unknown=data.get("on_unknown"),
            on_stuck=data.get("on_stuck"),
        )
    if kind == "check":
        return CheckNode(
            id=data["id"],
            say=data["say"],
            when=tuple(Branch(if_=item["if"], next=item["next"]) for item in data["when"]),
            else_=data["else"],
        )
    if kind == "lookup":
        return LookupNode(
            id=data["id"],
            say=data["say"],
            call=data["call"],
            send=tuple(data.get("send", ())),
            returns=frozen_mapping(data["returns"]),
            next=frozen_mapping(data["next"]),
            sets=frozen_mapping(data.get("sets", {})),
            on_stuck=data.get("on_stuck"),
            personal=data.get("personal", False),
        )
    return EndNode(id=data["id"], say=data["say"], outcome=data["outcome"])


def _slot_from_data(name: str, spec: str | Mapping[str, Any]) -> Slot:
    if isinstance(spec, str):
        return Slot(name=name, ask=spec)
    return Slot(
        name=name,
        ask=spec["ask"],
        required=spec.get("required", False),
        pattern=spec.get("pattern"),
        hint=spec.get("hint"),
        personal=spec.get("personal", False),
        type=spec.get("type", TEXT),
        options=tuple(spec.get("options", ())),
    )
