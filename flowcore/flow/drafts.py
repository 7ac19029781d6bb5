"""Draft intake and review, pure: what a submitted text must be to be stored, and its lines.

A draft must be a YAML mapping that names its flow with a valid ``id``: the id is what a
review is about and what a newer draft of the same flow supersedes. Anything else is
refused and stored nowhere. A draft with lint errors is stored, so the author sees its
findings and a person sees what was attempted.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from flowcore.common.errors import Refusal
from flowcore.common.limits import MAX_YAML_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES
from flowcore.flow.building import build_flow, content_hash
from flowcore.flow.findings import Finding, counted, has_errors, yaml_error_finding
from flowcore.flow.flow_ids import FLOW_ID_RE
from flowcore.flow.lint.live import LiveRevision, lint_against_live
from flowcore.flow.model import Category, Flow
from flowcore.flow.yaml_safe import YamlMap, YamlRefused, parse_yaml

DRAFT_REFUSED = "draft refused"
SEND_PLAIN_YAML = (
    f"Send plain YAML under {MAX_YAML_BYTES // 1024} KiB: one mapping of at most "
    f"{MAX_YAML_NODES} values, no tags, few aliases, nesting under {MAX_YAML_DEPTH}."
)
NAME_THE_FLOW = (
    "Start the YAML with id: <flow id> (1-64 lowercase letters, digits or _, like "
    "refund_request) and send it again with guide_draft."
)
FIX_THE_SYNTAX = "Fix the YAML at that line and send it again with guide_draft."


@dataclass(frozen=True)
class DraftCheck:
    """A submission that may be stored: its flow id, title and lint findings."""

    flow_id: str
    title: str
    content_hash: str
    findings: list[Finding]
    flow: Flow | None = field(compare=False, repr=False)
    # The live tests of its flow id checked on it (``FlowTestReport.summary()``), when
    # asked for and there is a tests file.
    tests: dict[str, object] | None = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return not has_errors(self.findings)


def check_draft(
    text: str,
    *,
    categories: Mapping[str, Category],
    live: Mapping[str, LiveRevision] | None = None,
) -> DraftCheck:
    """Judge a submitted flow text for intake: refuse it, or return what to store.

    Raises Refusal ("draft refused", retryable) for text that is too large, unsafe
    to load, does not parse, is not a mapping, or names no valid flow id; the reason
    is the finding that decided it, with its line. Lint errors do not refuse a draft.
    ``live`` holds the live flows' revisions by id, which a changed flow is checked against.
    """
    try:
        data = parse_yaml(text).data
    except YamlRefused as refused:
        raise Refusal(
            DRAFT_REFUSED, _at_line(refused.message, refused.line), SEND_PLAIN_YAML, retryable=True
        ) from None
    except yaml.YAMLError as exc:
        syntax = yaml_error_finding(exc, where="?")
        raise Refusal(
            DRAFT_REFUSED,
            _at_line(syntax["message"], syntax.get("line")),
            FIX_THE_SYNTAX,
            retryable=True,
        ) from None
    flow_id = _flow_id(data)
    flow, findings = build_flow(text, categories=categories)
    if flow is not None and live is not None:
        findings += lint_against_live(flow, live.get(flow.id))
    title = data.get("title")
    return DraftCheck(
        flow_id=flow_id,
        title=title.strip() if isinstance(title, str) else "",
        content_hash=content_hash(text),
        findings=findings,
        flow=flow,
    )


def _flow_id(data: YamlMap) -> str:
    if "id" not in data:
        raise Refusal(
            DRAFT_REFUSED,
            _at_line("the flow has no 'id': a draft must name its flow", data.line),
            NAME_THE_FLOW,
            retryable=True,
        )
    flow_id: Any = data["id"]
    line = data.key_lines.get("id")
    if not isinstance(flow_id, str):
        raise Refusal(
            DRAFT_REFUSED,
            _at_line(f"'id' must be text like refund_request, not {flow_id!r}", line),
            NAME_THE_FLOW,
            retryable=True,
        )
    if not FLOW_ID_RE.fullmatch(flow_id):
        shown = flow_id if len(flow_id) <= 80 else flow_id[:77] + "..."
        raise Refusal(
            DRAFT_REFUSED,
            _at_line(
                f"flow id '{shown}' must be 1-64 lowercase letters, digits or _ "
                "(like payment_failed)",
                line,
            ),
            NAME_THE_FLOW,
            retryable=True,
        )
    return flow_id


def _at_line(message: str, line: int | None) -> str:
    return f"{message} (line {line})" if line else message


# --- reading a draft ------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceLine:
    """One line of a flow's text (1-based ``number``) and the findings that point at it."""

    number: int
    text: str
    findings: tuple[Finding, ...]


def source_lines(
    text: str, findings: Iterable[Finding]
) -> tuple[tuple[Finding, ...], list[SourceLine]]:
    """The text as numbered lines with their findings beside them.

    Returns (findings with no line in the text, lines). Tabs and spaces are kept
    exactly; a finding past the last line counts as having no line.

    >>> loose, lines = source_lines("id: a\\n  x: 1\\n", [])
    >>> [(line.number, line.text) for line in lines]
    [(1, 'id: a'), (2, '  x: 1')]
    """
    rows = text.splitlines() or [""]
    by_line: dict[int, list[Finding]] = {}
    loose: list[Finding] = []
    for found in findings:
        line = found.get("line")
        if line is not None and 1 <= line <= len(rows):
            by_line.setdefault(line, []).append(found)
        else:
            loose.append(found)
    return tuple(loose), [
        SourceLine(number, row, tuple(by_line.get(number, ())))
        for number, row in enumerate(rows, 1)
    ]


def finding_counts(findings: Iterable[Finding]) -> tuple[int, int]:
    """(errors, warnings)."""
    errors = warnings = 0
    for found in findings:
        if found["level"] == "error":
            errors += 1
        else:
            warnings += 1
    return errors, warnings


def lint_status(findings: Iterable[Finding]) -> str:
    """What lint said, in a few words.

    >>> lint_status([]), lint_status([{"level": "warning", "code": "empty_say", "where": "f",
    ...     "message": "m"}])
    ('ok', 'ok, 1 warning')
    """
    errors, warnings = finding_counts(findings)
    parts = [counted(errors, "error")] if errors else ["ok"]
    if warnings:
        parts.append(counted(warnings, "warning"))
    return ", ".join(parts)


# How an agent's submission records its submitter (the caller's key, see access_app.callers).
_AGENT_KEY = "key:"
_KEYLESS = "anon:"


def submitter_shown(submitted_by: str, via: str) -> str:
    """Who submitted a draft, for a person: the agent key's name, "anonymous (address,
    client)" for an agent without a key, else the name recorded with ``via`` (a person's,
    from the admin or the command line).

    >>> submitter_shown("key:support-bot", "agent key")
    'support-bot (agent key)'
    >>> submitter_shown("anon:127.0.0.1", "agent key"), submitter_shown("anon:::1:claude", "x")
    ('anonymous (127.0.0.1)', 'anonymous (::1, claude)')
    >>> submitter_shown("maria", "admin user")
    'maria (admin user)'
    """
    if submitted_by.startswith(_KEYLESS):
        address, client = _address_and_client(submitted_by.removeprefix(_KEYLESS))
        return f"anonymous ({address}, {client})" if client else f"anonymous ({address})"
    return f"{submitted_by.removeprefix(_AGENT_KEY)} ({via})"


def _address_and_client(text: str) -> tuple[str, str]:
    """``address[:client]``, where the address may hold colons itself (IPv6): the longest
    prefix that is an IP address, else what comes before the first colon."""
    cuts = [len(text), *(i for i in range(len(text) - 1, 0, -1) if text[i] == ":")]
    for cut in cuts:
        try:
            ipaddress.ip_address(text[:cut])
        except ValueError:
            continue
        return text[:cut], text[cut + 1 :]
    address, _, client = text.partition(":")
    return address, client
