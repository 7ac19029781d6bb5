"""Lint: every check of a flow, shared by the CLI, drafts and approval.

Checks run in layers (``structure``, ``references``, ``graph_checks``, then
``warnings``, which need a built Flow) and report everything at once, so an author
fixes a flow in one round. Every message says what is wrong and how to fix it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowcore.flow.findings import Finding
from flowcore.flow.lint.categories import lint_category
from flowcore.flow.lint.common import Report
from flowcore.flow.lint.graph_checks import check_graph
from flowcore.flow.lint.references import check_references
from flowcore.flow.lint.structure import check_duplicate_keys, check_flow, check_nodes
from flowcore.flow.lint.warnings import lint_flow
from flowcore.flow.model import Category

__all__ = ["lint_category", "lint_data", "lint_flow"]


def lint_data(
    data: Mapping[Any, Any],
    *,
    categories: Mapping[str, Category],
    file: str | None = None,
    expected_id: str | None = None,
) -> list[Finding]:
    """Structure, reference and graph findings for a parsed flow document.

    ``data`` is what yaml_safe.parse_yaml returns (lines are read from it when present).
    Never raises.
    """
    flow_id = data.get("id")
    report = Report(flow_id if isinstance(flow_id, str) and flow_id else (expected_id or "?"), file)
    check_duplicate_keys(report, data)
    check_flow(report, data, expected_id)
    nodes = check_nodes(report, data)
    check_references(report, data, nodes, categories)
    check_graph(report, data, nodes)
    return report.findings
