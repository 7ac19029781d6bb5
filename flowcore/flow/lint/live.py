"""What lint says of a draft against the live flow of its id: ``unchanged_version``.

Runs are pinned to a flow's exact text, and people name that text by its ``version``
("version 2024.2"): two texts under one version would be told apart by their revision
hashes alone, in the history, on run pages and in events. So a draft that changes a live
flow must change its ``version`` too (when the live flow has one).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

import yaml

from flowcore.flow.findings import Finding
from flowcore.flow.lint.common import Report
from flowcore.flow.model import Flow
from flowcore.flow.yaml_safe import YamlRefused, key_line_of, parse_yaml


class LiveRevision(NamedTuple):
    """What a draft is checked against of the live flow of its id (plain data: it crosses
    to the judging process, where a Flow, with its compiled patterns, cannot)."""

    version: str | int | None
    content_hash: str

    @classmethod
    def of(cls, flow: Flow) -> LiveRevision:
        return cls(flow.version, flow.content_hash)


def live_revisions(flows: Mapping[str, Flow]) -> dict[str, LiveRevision]:
    return {flow_id: LiveRevision.of(flow) for flow_id, flow in flows.items()}


def lint_against_live(flow: Flow, live: LiveRevision | None) -> list[Finding]:
    """An ``unchanged_version`` error when ``flow`` (a draft) differs from the live flow of
    its id but declares the live flow's version; nothing for a new flow, the same text,
    or a live flow without a version. Never raises."""
    if live is None or live.version is None or flow.content_hash == live.content_hash:
        return []
    if flow.version is None or str(flow.version) != str(live.version):
        return []
    bumped = next_version(live.version)
    fix = (
        f"set version: {bumped} (or any version other than {live.version})"
        if bumped is not None
        else f"give it a version other than {live.version}"
    )
    report = Report(flow.id, None)
    report.error(
        "unchanged_version",
        f"the live flow {flow.id} is version {live.version} and this draft changes it under "
        f"the same version, so runs and the flow's history could not tell the two apart: "
        f"{fix}",
        line=_version_line(flow.source),
    )
    return report.findings


def next_version(version: str | int) -> str | int | None:
    """The version after ``version``: its last number plus one (None: it has no number).

    >>> next_version("2024.2"), next_version(5), next_version("v1-beta"), next_version("x")
    ('2024.3', 6, 'v2-beta', None)
    """
    if isinstance(version, int):
        return version + 1
    numbers = list(re.finditer(r"\d+", version))
    if not numbers:
        return None
    last = numbers[-1]
    return f"{version[: last.start()]}{int(last.group()) + 1}{version[last.end() :]}"


def _version_line(source: str) -> int | None:
    try:
        return key_line_of(parse_yaml(source).data, "version")
    except (YamlRefused, yaml.YAMLError):  # it built a Flow, so it parses: a courtesy
        return None
