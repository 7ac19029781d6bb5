"""The flows shipped in flows/ must always lint clean."""

from __future__ import annotations

from django.conf import settings

from flowcore.flow.files import load_catalog
from flowcore.flow.findings import format_finding


def test_bundled_flows_lint_clean() -> None:
    catalog = load_catalog(settings.GUIDEPOST_FLOWS_DIR)
    assert [format_finding(f) for f in catalog.errors] == []
    assert len(catalog.flows) >= 5
