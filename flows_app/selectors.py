"""Reads of flows: the live catalog as agents see it, and the exact version a run is on."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from flows_app.catalog import current_catalog
from flows_app.domain.building import build_flow
from flows_app.domain.errors import Refusal
from flows_app.domain.files import report_flow_tests
from flows_app.domain.flow_tests import FlowTestReport
from flows_app.domain.model import Category, Flow
from flows_app.domain.names import closest
from flows_app.domain.yaml_safe import parse_yaml
from flows_app.models import FlowVersion


def flow_summary(flow: Flow, *, with_summary: bool = False) -> dict[str, Any]:
    """``{id, title, version}`` (and ``summary``); a flow without a version has no key."""
    out: dict[str, Any] = {"id": flow.id, "title": flow.title}
    if with_summary:
        out["summary"] = flow.display_summary
    if flow.version is not None:
        out["version"] = flow.version
    return out


def flows_overview(category: str | None) -> dict[str, Any]:
    """guide_flows: categories with counts, or the flows of one category.

    Raises Refusal for a category that does not exist.
    """
    catalog = current_catalog()
    if category is None:
        counts: dict[str, int] = {}
        for flow in catalog.flows.values():
            counts[flow.category] = counts.get(flow.category, 0) + 1
        return {
            "categories": [
                {
                    "id": c.id,
                    "title": c.title,
                    "description": c.description,
                    "count": counts.get(c.id, 0),
                }
                for c in catalog.categories.values()
            ],
            "next": "Pick the category that fits the person's need and call guide_flows with "
            "category=<id>. If none fits, help without a procedure.",
        }
    if category not in catalog.categories:
        raise Refusal(
            "category not found",
            f"no category has id {category!r}",
            "Call guide_flows without category to list them, or use one of candidates.",
            retryable=True,
            candidates=closest(
                category, catalog.categories, aliases=_category_names(catalog.categories)
            ),
        )
    flows = [f for f in catalog.flows.values() if f.category == category]
    if flows:
        next_text = (
            "Pick the flow whose summary fits and call guide_start with its flow_id, passing in "
            "values what the person already told you (see index in the result)."
        )
    else:
        next_text = (
            "No procedure exists for this category: do not invent one. Help the person without a "
            "flow, or hand over to a human."
        )
    return {
        "category": category,
        "flows": [flow_summary(f, with_summary=True) for f in flows],
        "next": next_text,
    }


def _category_names(categories: Mapping[str, Category]) -> dict[str, list[str]]:
    return {c.id: [c.title, c.description] for c in categories.values()}


def flow_live(flow_id: str) -> Flow:
    """The live flow agents may start. Raises Refusal (with candidates) when there is none."""
    flows = current_catalog().flows
    flow = flows.get(flow_id)
    if flow is None:
        raise Refusal(
            "flow not found",
            f"no flow has id {flow_id!r}",
            "Call guide_flows to find the flow, or use one of candidates.",
            retryable=True,
            candidates=closest(
                flow_id,
                flows,
                aliases={f.id: [f.title, f.display_summary] for f in flows.values()},
            ),
        )
    return flow


def flow_of_version(version: FlowVersion) -> Flow:
    """The exact flow content of a pinned version (the live object when it is the same).

    Raises Refusal when the stored text no longer loads.
    """
    live = current_catalog().flows.get(version.flow_id)
    if live is not None and live.content_hash == version.content_hash:
        return live
    return _flow_from_source(version.content_hash, version.source)


@lru_cache(maxsize=256)
def _flow_from_source(content_hash: str, source: str) -> Flow:
    data = parse_yaml(source).data
    category = str(data.get("category", ""))
    # A pinned version stays runnable even if its category was renamed since.
    flow, _ = build_flow(source, categories={category: Category(category, category)})
    if flow is None:
        raise Refusal(
            "flow version unreadable",
            f"the pinned flow version {content_hash[:12]} no longer loads",
            "Hand the conversation to a human; report the run id to the operators.",
        )
    return flow


def flow_tests_report(flow: Flow) -> FlowTestReport | None:
    """``flow`` (a draft's, or a live one) checked against the live tests of its id: the
    scenarios, guarantees and coverage of ``<flows dir>/tests/<flow_id>.yaml``. None when
    that file does not exist. Reads files, never the database; never raises for bad tests.
    """
    return report_flow_tests(flow, current_catalog().directory)
