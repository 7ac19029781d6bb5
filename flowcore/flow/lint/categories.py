"""Entries of categories.yaml."""

from __future__ import annotations

from flowcore.flow.findings import Finding
from flowcore.flow.lint.common import (
    CATEGORY_ID_RE,
    CATEGORY_KEYS,
    Report,
    as_text,
    check_keys,
    describe,
    text_value,
)


def lint_category(
    cat_id: object, spec: object, *, file: str | None = None, line: int | None = None
) -> list[Finding]:
    """Findings for one entry of categories.yaml (``id: {title, description}``). Never raises."""
    report = Report("categories", file)
    at = (as_text(cat_id),)
    if not isinstance(cat_id, str):
        report.error(
            "schema",
            f"category id {as_text(cat_id)} is read as {describe(cat_id)}, not text: quote it",
            at=at,
            line=line,
        )
        return report.findings
    if not CATEGORY_ID_RE.fullmatch(cat_id):
        report.error(
            "schema",
            f"category id '{cat_id}' must be 1-64 letters, digits or _: rename it",
            at=at,
            line=line,
        )
    if not isinstance(spec, dict):
        report.error(
            "schema",
            f"category '{cat_id}' must be a mapping with title and description, "
            f"not {describe(spec)}",
            at=at,
            line=line,
        )
        return report.findings
    check_keys(report, spec, CATEGORY_KEYS, at=at, what=f"category '{cat_id}'")
    text_value(report, spec, "title", at=at, what=f"category '{cat_id}'", required=True)
    text_value(report, spec, "description", at=at, what=f"category '{cat_id}'")
    return report.findings
