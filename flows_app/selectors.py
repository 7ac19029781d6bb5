"""Reads of flows: the live flows as agents see them (this instance's copy of the catalog),
the exact version a run is on, drafts as a reviewer reads them, and the database's catalog
as the catalog copier reads it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from django.db.models import Count, Q

from flowcore.checks.flow_tests import (
    FlowTestReport,
    check_flow_tests,
    parse_flow_tests,
    summary_status,
)
from flowcore.checks.guarantees import Guarantee
from flowcore.checks.tests_dir import flow_tests_path, load_flow_tests, report_flow_tests
from flowcore.common.cache import BoundedCache
from flowcore.common.errors import NotFound, Refusal
from flowcore.common.limits import (
    DRAFT_TEST_VERDICTS,
    MAX_CANDIDATES,
    MAX_SUBMITTER_LENGTH,
    PINNED_FLOWS,
    RECENT_DRAFTS_FOR_CANDIDATES,
)
from flowcore.common.names import closest
from flowcore.common.text import shown
from flowcore.flow.building import build_flow, content_hash
from flowcore.flow.drafts import SourceLine, source_lines
from flowcore.flow.findings import Finding
from flowcore.flow.flow_diff import (
    DiffLine,
    describe_changes,
    flow_changes,
    line_diff,
    node_marks,
)
from flowcore.flow.lint.live import LiveRevision, lint_against_live
from flowcore.flow.model import Category, Flow
from flowcore.flow.yaml_safe import parse_yaml
from flowcore.run.results import flow_summary
from flows_app.catalog import current_catalog
from flows_app.models import CatalogFile, CatalogRevision, Draft, FlowVersion


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
            f"no category has id {shown(category)}",
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
            f"no flow has id {shown(flow_id)}",
            "Use one of candidates, or call guide_flows to find the flow."
            if near
            else "Call guide_flows to find the flow; if none fits, help without a procedure.",
            retryable=True,
            candidates=near,
        )
    return flow


def flow_of_version(version: FlowVersion) -> Flow:
    """The exact flow of a pinned version: the live object when it is the same, else one
    built once per process from its text (its hash is its identity; a row whose text does
    not match its hash is built every time, never cached), so ``source`` is read at most
    once per process. Raises Refusal when the stored text no longer loads.
    """
    live = current_catalog().flows.get(version.flow_id)
    if live is not None and live.content_hash == version.content_hash:
        return live
    pinned = _pinned.get(version.content_hash)
    if pinned is not None:
        return pinned
    source = version.source
    flow = _flow_from_source(version.content_hash, source)
    if content_hash(source) == version.content_hash:
        _pinned.put(version.content_hash, flow)
    return flow


def flow_of_hash(content_hash: str) -> Flow:
    """The flow of the stored version with this content hash (``flow_of_version``).

    Raises Refusal when no version has it, or its text no longer loads."""
    version = FlowVersion.objects.filter(content_hash=content_hash).first()
    if version is None:
        raise Refusal(
            "flow version unreadable",
            f"no flow version has content hash {content_hash[:12]}",
            "Report the run id to the operators.",
        )
    return flow_of_version(version)


# A revision is named by at least this many digits of its content hash (restore).
MIN_REVISION_DIGITS = 6

# Flows built from stored versions, by content hash: never by a row's id, which is reused
# (a test database after a rollback), where a text's hash is not.
_pinned: BoundedCache[str, Flow] = BoundedCache(PINNED_FLOWS)


def _flow_from_source(version_hash: str, source: str) -> Flow:
    data = parse_yaml(source).data
    category = str(data.get("category", ""))
    # A pinned version stays runnable even if its category was renamed since.
    flow, _ = build_flow(source, categories={category: Category(category, category)})
    if flow is None:
        raise Refusal(
            "flow version unreadable",
            f"the pinned flow revision {version_hash[:12]} no longer loads",
            "Hand the conversation to a human; report the run id to the operators.",
        )
    return flow


def flow_for_page(flow_id: str) -> tuple[Flow, FlowVersion | None]:
    """The flow a flow page draws: the live one, else (a flow retired from the catalog)
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


# --- drafts ---------------------------------------------------------------------------------

DRAFT_NOT_FOUND = "draft not found"
DraftKind = Literal["new flow", "change", "same as live", "not recorded"]
# Drafts a person decided: compared with the live revision recorded at the decision.
DECIDED = (Draft.Status.APPROVED, Draft.Status.DISCARDED)


def draft_kind(draft: Draft) -> DraftKind:
    """Whether the draft adds a flow, changes the live one, or repeats it exactly: against
    the live flow now, or for a decided draft the live revision at its decision ("not
    recorded" for one decided before that was kept). Reads the recorded revision's hash
    from ``live_hash`` when the query annotated it (the drafts list), else one row."""
    if draft.status in DECIDED:
        if not draft.live_at_decision_recorded:
            return "not recorded"
        if draft.live_at_decision_id is None:
            return "new flow"
        live_hash = getattr(draft, "live_hash", None)
        if live_hash is None:
            revision = draft.live_at_decision
            live_hash = revision.content_hash if revision is not None else ""
    else:
        live = current_catalog().flows.get(draft.flow_id)
        if live is None:
            return "new flow"
        live_hash = live.content_hash
    return "same as live" if live_hash == draft.content_hash else "change"


def draft_find(ref: str) -> Draft:
    """The draft with public id ``ref``, else the pending draft of the flow ``ref``.

    Raises Refusal ("draft not found") with the closest pending flows and draft ids.
    """
    draft = Draft.objects.filter(public_id=ref).first()
    if draft is None:
        draft = Draft.objects.filter(flow_id=ref, status=Draft.Status.PENDING).first()
    if draft is not None:
        return draft
    pending = list(
        Draft.objects.filter(status=Draft.Status.PENDING).values_list("flow_id", "public_id")
    )
    exists = Draft.objects.filter(flow_id=ref).exists()
    raise Refusal(
        DRAFT_NOT_FOUND,
        f"flow {ref!r} has no pending draft"
        if exists
        else f"no draft has id {ref!r} and no flow {ref!r} has a pending draft",
        "Name a pending draft by its id or its flow id (guidepost-mcp drafts lists them).",
        candidates=closest(ref, [name for pair in pending for name in pair]),
    )


DRAFT_NOT_NAMED = "draft not named"
DRAFT_CHANGED = "draft changed"


def draft_to_approve(ref: str, *, revision: str | None = None) -> Draft:
    """The draft a person approves: ``ref`` is its id, or its flow's id with the
    ``revision`` its review page shows, so that a draft submitted since the person read
    one (by the same agent or another) is never the one published.

    Raises Refusal: "draft not found" (as ``draft_find``), "draft not named" (a flow id
    without a revision), "draft changed" (a revision other than the pending draft's).
    """
    draft = Draft.objects.filter(public_id=ref).first()
    if draft is None:
        draft = draft_find(ref)
        if not revision:
            raise Refusal(
                DRAFT_NOT_NAMED,
                f"{ref} names a flow, not the draft you reviewed: its pending draft now is "
                f"{draft.public_id}, revision {draft.revision}, submitted by {draft.submitter}",
                f"Name the draft you reviewed: approve {draft.public_id}, or {ref} --revision "
                "with the revision its page shows.",
            )
    wanted = (revision or "").strip().lower()
    if wanted and (len(wanted) < MIN_REVISION_DIGITS or not draft.content_hash.startswith(wanted)):
        raise Refusal(
            DRAFT_CHANGED,
            f"draft {draft.public_id} of {draft.flow_id} is revision {draft.revision}, "
            f"submitted by {draft.submitter}, not revision {shown(revision or '')}",
            f"Review {draft.public_id} (its page shows what it changes and what it replaced), "
            "then approve it by its id.",
        )
    return draft


def draft_of_submitter(public_id: str, submitter: str, *, keyed: bool) -> Draft:
    """The draft ``public_id`` that the caller ``submitter`` (its key, as ``guide_draft``
    stored it) submitted, or adopted (``createkey --adopt-keyless``). Raises NotFound
    ("draft not found") otherwise: a draft someone else submitted is refused exactly like
    one that does not exist, the same statements run, and the candidates are close ids
    among the caller's own recent drafts (none without an agent key: keyless callers on
    one address cannot be told apart)."""
    mine = submitter[:MAX_SUBMITTER_LENGTH]
    own = Draft.objects.filter(
        Q(submitted_by=mine) | Q(adopted_by=mine), submitted_via=Draft.Via.KEY
    )
    draft = own.filter(public_id=public_id).select_related("superseded_by").first()
    if draft is not None:
        return draft
    recent = own.order_by("-created_at").values_list("public_id", flat=True)
    raise NotFound(
        DRAFT_NOT_FOUND,
        f"no draft you submitted has id {shown(public_id)}",
        "Read the draft_id that guide_draft returned to you (guidepost://drafts/<draft_id>); "
        "a draft submitted with another key cannot be read with this one.",
        candidates=closest(public_id, list(recent[:RECENT_DRAFTS_FOR_CANDIDATES])) if keyed else (),
    )


def drafts_pending() -> list[Draft]:
    """Pending drafts, oldest first (the order to review them in)."""
    return list(Draft.objects.filter(status=Draft.Status.PENDING).order_by("created_at", "pk"))


@dataclass(frozen=True)
class DraftVerdict:
    """A draft judged now: its lint against the current categories (``flow`` None: it has
    errors) and, while it is pending, against the live flow of its id (an error there
    leaves ``flow`` built, for the review to show what it changes), and its flow checked
    against the live tests of its id (``tests`` None: no tests file, or no flow to run
    them on). ``tests_file`` is relative to the flows directory."""

    flow: Flow | None
    findings: list[Finding]
    tests: FlowTestReport | None
    tests_file: str
    has_tests_file: bool


def draft_verdict(draft: Draft) -> DraftVerdict:
    """What approval decides on and the draft page shows: lint now and the live tests.
    Reads files, never the database."""
    catalog = current_catalog()
    flow, findings = build_flow(
        draft.yaml, categories=catalog.categories, expected_id=draft.flow_id
    )
    live = catalog.flows.get(draft.flow_id) if draft.pending else None
    if flow is not None and live is not None:
        findings += lint_against_live(flow, LiveRevision.of(live))
    # Named relative to the flows directory: these lines are shown to people and recorded.
    tests = report_flow_tests(flow, catalog.directory, relative=True) if flow else None
    path = flow_tests_path(catalog.directory, draft.flow_id)
    return DraftVerdict(
        flow=flow,
        findings=findings,
        tests=tests,
        tests_file=path.relative_to(catalog.directory).as_posix(),
        has_tests_file=tests is not None or path.is_file(),
    )


@dataclass(frozen=True)
class DraftReview:
    """Everything a reviewer reads about a draft, against the live flow of the same id.

    ``verdict`` holds the lint of the draft now, against the current categories, and
    the live tests checked on it (what approval judges); ``changes`` and ``hunks``
    compare it with ``live``: the live flow now, or for a decided draft the live revision
    recorded at its decision (``at_decision``), ``live_revision`` then.
    """

    draft: Draft
    kind: DraftKind
    live: Flow | None
    live_revision: FlowVersion | None
    at_decision: bool
    verdict: DraftVerdict
    loose_findings: tuple[Finding, ...]
    lines: list[SourceLine]
    changes: list[str]
    hunks: list[list[DiffLine]]
    # Node id -> "new" / "changed" against the live flow, for the diagram.
    marks: dict[str, str]

    @property
    def flow(self) -> Flow | None:
        return self.verdict.flow

    @property
    def findings(self) -> list[Finding]:
        return self.verdict.findings

    @property
    def tests(self) -> FlowTestReport | None:
        return self.verdict.tests

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f["level"] == "error")

    @property
    def warnings(self) -> int:
        return len(self.findings) - self.errors


def draft_review(draft: Draft) -> DraftReview:
    """Judge the draft now (``draft_verdict``) and compare it with the live flow of the same
    id: the live flow now, or for a decided draft the revision that was live at its
    decision. Reads files, and of the database ``draft`` and that revision."""
    at_decision = draft.status in DECIDED
    revision = draft.live_at_decision if at_decision else None
    source: str | None = None
    live: Flow | None = None
    if revision is not None:
        source = revision.source
        try:
            live = flow_of_version(revision)
        except Refusal:
            live = None  # a revision that no longer loads still has its line diff
    elif not at_decision:
        live = current_catalog().flows.get(draft.flow_id)
        source = live.source if live else None
    verdict = draft_verdict(draft)
    flow = verdict.flow
    loose, lines = source_lines(draft.yaml, verdict.findings)
    compared = flow_changes(live, flow) if live and flow else None
    return DraftReview(
        draft=draft,
        kind=draft_kind(draft),
        live=live,
        live_revision=revision,
        at_decision=at_decision,
        verdict=verdict,
        loose_findings=loose,
        lines=lines,
        changes=describe_changes(compared) if compared else [],
        hunks=line_diff(source, draft.yaml) if source is not None else [],
        marks=node_marks(compared) if compared else {},
    )


@dataclass(frozen=True)
class LiveTests:
    """A draft checked against the live tests of its flow id now: ``summary`` is
    ``FlowTestReport.summary()`` (None: there is no tests file); ``ran`` is False when the
    draft has lint errors, so there is no flow to run them on."""

    summary: Mapping[str, object] | None
    ran: bool = True


# A pending draft's check against the live tests, by the exact inputs that decide it (the
# draft's text, the categories it lints against, the tests file's text), so the drafts list
# costs one small file read per pending row and a check only when one of them changed; an
# agent reading its draft's resource costs the same.
_live_tests_seen: BoundedCache[tuple[object, ...], LiveTests] = BoundedCache(DRAFT_TEST_VERDICTS)
TESTS_NOT_RUN = "not run: lint errors"
TESTS_NOT_RECORDED = "—"


def draft_tests_status(draft: Draft) -> str:
    """The drafts list's word on a draft's tests: for a pending draft, the live tests now
    (``ok``, ``2 broken``, ``none`` without a tests file); for an approved one, what was
    recorded at approval (``confirmed`` when breaking them was); else a dash."""
    if draft.status == Draft.Status.APPROVED:
        recorded = draft.tests_at_approval
        if not isinstance(recorded, dict):
            return TESTS_NOT_RECORDED  # approved before approvals checked the tests
        status = summary_status(recorded.get("summary"))
        return f"{status}, confirmed" if draft.broken_tests_confirmed else status
    if draft.status != Draft.Status.PENDING:
        return TESTS_NOT_RECORDED
    live = draft_live_tests(draft)
    return summary_status(live.summary) if live.ran else TESTS_NOT_RUN


def draft_tests_summary(draft: Draft) -> Mapping[str, object] | None:
    """The tests summary an agent reads with its draft: for a pending draft the
    live tests now, for an approved one the record of its approval; None when there were
    no tests to run (no tests file, lint errors, or a draft discarded or superseded)."""
    if draft.status == Draft.Status.APPROVED:
        recorded = draft.tests_at_approval
        summary = recorded.get("summary") if isinstance(recorded, dict) else None
        return summary if isinstance(summary, dict) else None
    if draft.status != Draft.Status.PENDING:
        return None
    return draft_live_tests(draft).summary


def draft_live_tests(draft: Draft) -> LiveTests:
    """``draft`` against the live tests of its flow id as they are now (cached by what
    decides it: the draft's text, the categories and the tests file's text)."""
    catalog = current_catalog()
    path = flow_tests_path(catalog.directory, draft.flow_id)
    try:
        tests_text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return LiveTests(None)
    except (OSError, UnicodeError):
        return _live_tests(draft, None)  # the check says why it cannot be read
    key = (draft.content_hash, tuple(catalog.categories.items()), tests_text)
    known = _live_tests_seen.get(key)
    if known is not None:
        return known
    return _live_tests_seen.put(key, _live_tests(draft, tests_text))


def _live_tests(draft: Draft, tests_text: str | None) -> LiveTests:
    catalog = current_catalog()
    flow, _ = build_flow(draft.yaml, categories=catalog.categories, expected_id=draft.flow_id)
    if flow is None:
        return LiveTests(None, ran=False)
    if tests_text is None:
        report = report_flow_tests(flow, catalog.directory)
    else:
        path = flow_tests_path(catalog.directory, flow.id)
        report = check_flow_tests(
            flow, parse_flow_tests(tests_text, flow_id=flow.id, file=str(path))
        )
    return LiveTests(report.summary() if report else None)


# --- flow versions --------------------------------------------------------------------------


def flow_versions_by_hash(hashes: Iterable[str]) -> dict[str, FlowVersion]:
    versions = FlowVersion.objects.filter(content_hash__in=list(hashes)).select_related("draft")
    return {v.content_hash: v for v in versions}


def flow_version_is_live(version: FlowVersion) -> bool:
    live = current_catalog().flows.get(version.flow_id)
    return live is not None and live.content_hash == version.content_hash


@dataclass(frozen=True)
class VersionDiff:
    """A flow revision against the one it replaced (``replaced``), else the one recorded
    before it (``previous`` None: the first)."""

    version: FlowVersion
    previous: FlowVersion | None
    changes: list[str]
    hunks: list[list[DiffLine]]
    replaced: bool = False


def flow_version_previous(version: FlowVersion) -> FlowVersion | None:
    return (
        FlowVersion.objects.filter(flow_id=version.flow_id, created_at__lte=version.created_at)
        .exclude(pk=version.pk)
        .exclude(created_at=version.created_at, pk__gt=version.pk)
        .order_by("-created_at", "-pk")
        .first()
    )


def flow_version_diff(version: FlowVersion) -> VersionDiff:
    """What changed to ``version`` from the revision it replaced when its draft was approved,
    else from the revision of the same flow recorded before it."""
    draft = version.draft
    replaced = draft.live_at_decision if draft is not None else None
    if replaced is not None and replaced.pk == version.pk:
        replaced = None  # approved as the live text itself: it replaced nothing
    previous = replaced if replaced is not None else flow_version_previous(version)
    if previous is None:
        return VersionDiff(version, None, [], [])
    changes: list[str] = []
    try:
        changes = describe_changes(
            flow_changes(flow_of_version(previous), flow_of_version(version))
        )
    except Refusal:
        pass  # a revision that no longer loads still has its line diff
    hunks = line_diff(previous.source, version.source)
    return VersionDiff(version, previous, changes, hunks, replaced=replaced is not None)


def flow_tests_report(flow: Flow) -> FlowTestReport | None:
    """``flow`` (a draft's, or a live one) checked against the live tests of its id: the
    scenarios, guarantees and coverage of ``<flows dir>/tests/<flow_id>.yaml``. None when
    that file does not exist. Reads files, never the database; never raises for bad tests.
    """
    return report_flow_tests(flow, current_catalog().directory)


def flow_guarantees(flow: Flow) -> tuple[Guarantee, ...]:
    """The guarantees the live tests of ``flow``'s id state (``<flows dir>/tests/<id>.yaml``);
    none without that file. What a move checks on each run's path."""
    tests = load_flow_tests(current_catalog().directory, flow.id)
    return () if tests is None else tests.guarantees


def flow_version_find(flow_id: str, ref: str) -> FlowVersion:
    """The recorded revision of ``flow_id`` that ``ref`` names: a revision (the first
    digits of its content hash, at least ``MIN_REVISION_DIGITS``), else the flow's own
    ``version`` value, when exactly one revision has it.

    Raises NotFound ("version not found") with the revisions as candidates.
    """
    versions = list(
        FlowVersion.objects.filter(flow_id=flow_id).defer("source").order_by("-created_at")
    )
    ref = ref.strip()
    found = []
    if len(ref) >= MIN_REVISION_DIGITS:
        found = [v for v in versions if v.content_hash.startswith(ref.lower())]
    if not found:
        found = [v for v in versions if v.version == ref]
    if len(found) == 1:
        return FlowVersion.objects.get(pk=found[0].pk)
    raise NotFound(
        "version not found",
        f"{len(found)} revisions of {flow_id} have version {shown(ref)}: name one by its revision"
        if found
        else f"no revision of {flow_id} is {shown(ref)}",
        "Name a revision by the first digits of its content hash, as the flow's history "
        "shows them, or by its version when only one revision has it.",
        candidates=[v.revision for v in (found or versions)][:MAX_CANDIDATES],
    )


@dataclass(frozen=True)
class HistoryRow:
    """One recorded revision of a flow in its history: every approval of its text (the
    drafts approved with it: a restore approves the same text again), and whether it is
    live now."""

    version: FlowVersion
    approvals: list[Draft]
    live: bool


def flow_history(flow_id: str) -> list[HistoryRow]:
    """Every recorded revision of ``flow_id``, newest first, with its approvals; two
    queries."""
    versions = flow_versions(flow_id)
    approved: dict[str, list[Draft]] = {}
    drafts = Draft.objects.filter(flow_id=flow_id, status=Draft.Status.APPROVED).defer("yaml")
    for draft in drafts.order_by("-decided_at"):
        approved.setdefault(draft.content_hash, []).append(draft)
    live = current_catalog().flows.get(flow_id)
    live_hash = live.content_hash if live is not None else ""
    return [
        HistoryRow(v, approved.get(v.content_hash, []), v.content_hash == live_hash)
        for v in versions
    ]


def flow_versions_diff(old: FlowVersion, new: FlowVersion) -> VersionDiff:
    """What changes for agents, and the line diff, from ``old`` to ``new`` (any two
    revisions of a flow, in either order)."""
    changes: list[str] = []
    try:
        changes = describe_changes(flow_changes(flow_of_version(old), flow_of_version(new)))
    except Refusal:
        pass  # a revision that no longer loads still has its line diff
    return VersionDiff(new, old, changes, line_diff(old.source, new.source))


# --- the catalog in the database: a flow's truth ----------------------------------------------


def catalog_revision() -> int:
    """The catalog's revision: one row by its key, what an instance reads once per poll
    interval (0: no catalog yet)."""
    row = CatalogRevision.objects.filter(pk=1).values_list("revision", flat=True).first()
    return int(row or 0)


def catalog_id() -> str:
    """The name of this database's catalog ("" before it has one)."""
    return CatalogRevision.objects.filter(pk=1).values_list("catalog_id", flat=True).first() or ""


def catalog_changes_since(revision: int) -> tuple[int, dict[str, str | None]]:
    """The catalog's revision now, and the files changed after ``revision``: name -> text
    (None: removed). From revision 0, every file the catalog holds."""
    current = catalog_revision()
    rows = CatalogFile.objects.filter(revision__gt=revision).values_list("name", "text")
    if revision == 0:
        rows = rows.filter(text__isnull=False)
    return current, dict(rows)
