"""The flows shipped in flows/ must always lint clean."""

from __future__ import annotations

from django.conf import settings

from flows_app.lint import format_finding
from flows_app.loader import load_catalog


def test_bundled_flows_lint_clean() -> None:
    catalog = load_catalog(settings.GUIDEPOST_FLOWS_DIR)
    assert [format_finding(f) for f in catalog.errors] == []
    assert len(catalog.flows) >= 5
