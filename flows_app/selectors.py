"""Reads of flows: the live catalog as agents see it, and the exact version a run is on."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from django.db.models import Count

from flows_app.catalog import current_catalog
from flows_app.domain.building import build_flow
from flows_app.domain.errors import NotFound, Refusal
from flows_app.domain.model import Category, Flow
from flows_app.domain.names import closest
from flows_app.domain.results import flow_summary
from flows_app.domain.yaml_safe import parse_yaml
from flows_app.models import FlowVersion


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
        near = closest(category, catalog.categories, aliases=_category_names(catalog.categories))
        raise NotFound(
            "category not found",
            f"no category has id {category!r}",
            "Use one of candidates, or call guide_flows without category to list them all."
            if near
            else "Call guide_flows without category to list the categories.",
            retryable=True,
            candidates=near,
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
        near = closest(
            flow_id, flows, aliases={f.id: [f.title, f.display_summary] for f in flows.values()}
        )
        raise NotFound(
            "flow not found",
            f"no flow has id {flow_id!r}",
            "Use one of candidates, or call guide_flows to find the flow."
            if near
            else "Call guide_flows to find the flow; if none fits, help without a procedure.",
            retryable=True,
            candidates=near,
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


def flow_for_page(flow_id: str) -> tuple[Flow, FlowVersion | None]:
    """The flow a flow page draws: the live one, else (a flow retired from the directory)
    its most recently stored version. Raises NotFound when neither exists."""
    live = current_catalog().flows.get(flow_id)
    if live is not None:
        version = FlowVersion.objects.filter(content_hash=live.content_hash).first()
        return live, version
    version = FlowVersion.objects.filter(flow_id=flow_id).order_by("-created_at").first()
    if version is None:
        flow_live(flow_id)  # raises NotFound with the closest live flows as candidates
        raise AssertionError("unreachable")
    return flow_of_version(version), version


def flow_versions(flow_id: str) -> list[FlowVersion]:
    """The stored versions of a flow, newest first, each with ``run_count``; one query."""
    versions = (
        FlowVersion.objects.filter(flow_id=flow_id)
        .defer("source")
        .annotate(run_count=Count("runs"))
        .order_by("-created_at")
    )
    return list(versions)


def flows_live() -> list[Flow]:
    """The live flows, in the directory's order."""
    return list(current_catalog().flows.values())
