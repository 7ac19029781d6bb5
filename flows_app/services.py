"""Writes of flows: the database's catalog (a flow's truth), pinned flow versions, and
drafts: intake, approval, discard, restore.

Drafts are judged by the same function as the CLI and the flows directory
(``build_flow``). A draft's status changes here and nowhere else: never as a side effect
of saving a model.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from access_app import audit
from access_app.callers import ANONYMOUS, KEY_OWNER
from events_app.services import event_record, kinds_wanted
from flowcore.checks.flow_tests import FlowTestReport, report_lines, summary_verdict
from flowcore.checks.tests_dir import check_flows_dir
from flowcore.common.errors import InvalidInput, NotConfirmed, Refusal, TestsFail
from flowcore.common.limits import (
    MAX_DECISION_REASON_LENGTH,
    MAX_SUBMITTER_LENGTH,
    MAX_TITLE_LENGTH,
)
from flowcore.flow.building import content_hash
from flowcore.flow.drafts import DraftCheck
from flowcore.flow.files import (
    catalog_file_name,
    catalog_files,
    load_catalog,
    read_catalog_file,
    write_flow_file,
)
from flowcore.flow.findings import format_finding, has_errors
from flowcore.flow.lint.live import live_revisions
from flowcore.flow.model import Flow
from flows_app.catalog import current_catalog
from flows_app.judging import draft_judged
from flows_app.models import CatalogFile, CatalogRevision, Draft, FlowVersion
from flows_app.selectors import draft_verdict

# What a refused restore is called.
VERSION_NOT_FOUND = "version not found"
ALREADY_LIVE = "version already live"
# What a refused approval or discard is called (error objects, admin messages, CLI).
DRAFT_NOT_PENDING = "draft not pending"
DRAFT_HAS_ERRORS = "draft has lint errors"
DRAFT_BREAKS_TESTS = "draft breaks tests"
FLOW_FILE_NOT_WRITTEN = "flow file not written"
REASON_REQUIRED = "reason required"
# How many errors a refused approval names before "and N more".
ERRORS_NAMED = 3

# Intake judges one draft at a time per process, in a worker process of its own
# (``flows_app.judging``): judging costs up to ~0.1 s of CPU, which in this process
# would hold the interpreter's lock against every other call.
_JUDGING_A_DRAFT = threading.Lock()


def flow_version_pin(*, flow: Flow, now: datetime) -> FlowVersion:
    """The stored version of ``flow``'s exact text, created on first use."""
    version, _ = FlowVersion.objects.get_or_create(
        content_hash=flow.content_hash,
        defaults={
            "flow_id": flow.id,
            "title": flow.title,
            "version": "" if flow.version is None else str(flow.version),
            "source": flow.source,
            "created_at": now,
        },
    )
    return version


@dataclass(frozen=True)
class DraftSubmitted:
    """The stored draft; ``repeated`` when the same text was already pending and is returned;
    ``superseded``: the id of the pending draft of the same flow that this one replaced;
    ``tests``: the live tests of its flow id checked on it (``FlowTestReport.summary()``;
    None without a tests file or with lint errors); ``previously``: the last discarded
    draft of the same text, when there is one."""

    draft: Draft
    repeated: bool = False
    superseded: str | None = None
    tests: dict[str, object] | None = None
    previously: Draft | None = None


def draft_judge(*, text: str) -> DraftCheck:
    """``text`` judged as a draft against the live catalog (a changed flow against its live
    revision too), with the live tests of its flow id, in the judging worker process (one
    draft at a time per process). Needs no database: call it outside any transaction (a
    write transaction held through up to ~0.1 s of judging would hold SQLite's one writer
    against every other call). Raises what ``draft_create`` raises for text that is
    refused before it is stored."""
    catalog = current_catalog()
    with _JUDGING_A_DRAFT:
        return draft_judged(
            text, catalog.categories, catalog.directory, live_revisions(catalog.flows)
        )


def draft_create(
    *, text: str, submitted_via: str, submitted_by: str, judged: DraftCheck | None = None
) -> DraftSubmitted:
    """Store ``text`` as the pending draft of its flow; ``judged``: what ``draft_judge``
    said of it, when the caller judged it before its transaction.

    The same text already pending is returned with ``repeated``, not stored again; any
    other pending draft of the flow is superseded. Raises Refusal ("draft refused") for
    text refused before it is stored (too large, unsafe, not a mapping, no valid flow id).
    """
    check = judged if judged is not None else draft_judge(text=text)
    try:
        submitted = _draft_store(
            check, text, submitted_via=submitted_via, submitted_by=submitted_by
        )
    except IntegrityError:
        # Another submission for this flow committed between our read and our insert
        # (one pending draft per flow is a constraint): decide again against it.
        submitted = _draft_store(
            check, text, submitted_via=submitted_via, submitted_by=submitted_by
        )
    return replace(submitted, tests=check.tests)


@transaction.atomic
def _draft_store(
    check: DraftCheck, text: str, *, submitted_via: str, submitted_by: str
) -> DraftSubmitted:
    now = timezone.now()
    pending = (
        Draft.objects.select_for_update()
        .filter(flow_id=check.flow_id, status=Draft.Status.PENDING)
        .first()
    )
    previously = (
        Draft.objects.filter(
            flow_id=check.flow_id,
            content_hash=check.content_hash,
            status=Draft.Status.DISCARDED,
        )
        .order_by("-decided_at")
        .first()
    )
    if pending is not None and pending.content_hash == check.content_hash:
        return DraftSubmitted(pending, repeated=True, previously=previously)
    if pending is not None:
        # Free the flow's one pending place before the new draft takes it.
        Draft.objects.filter(pk=pending.pk).update(status=Draft.Status.SUPERSEDED, decided_at=now)
    draft = Draft(
        flow_id=check.flow_id,
        title=check.title[:MAX_TITLE_LENGTH],
        yaml=text,
        content_hash=check.content_hash,
        ok=check.ok,
        findings=check.findings,
        submitted_via=submitted_via,
        submitted_by=submitted_by[:MAX_SUBMITTER_LENGTH],
        created_at=now,
    )
    draft.full_clean()
    draft.save()
    if pending is not None:
        Draft.objects.filter(pk=pending.pk).update(
            superseded_by=draft, decision_reason=f"superseded by {draft.public_id}"
        )
    _draft_event("draft.submitted", draft)
    return DraftSubmitted(
        draft,
        superseded=pending.public_id if pending is not None else None,
        previously=previously,
    )


def draft_approve(
    *, draft: Draft, approved_by: str, confirm_broken_tests: bool = False
) -> FlowVersion:
    """Publish a pending draft: record its text in the catalog and its revision, and write
    this instance's copy of the flow file.

    Re-lints the text and checks it against the live flow's tests at this moment, whatever
    a page showed before. A draft that fails a scenario or breaks a guarantee (or whose
    tests file has errors) is approved only with ``confirm_broken_tests``; the check is
    recorded on the draft either way, with the live revision it replaces. The flow file is
    written last in the transaction, so a failed write records nothing. Raises Refusal
    ("draft not pending", "draft has lint errors", "flow file not written") and
    NotConfirmed ("draft breaks tests", with the runner's lines as ``details``).
    """
    now = timezone.now()
    # Judged outside the transaction (on SQLite it holds the database's write lock): a
    # draft's text never changes after intake, so the locked row has the same one.
    verdict = draft_verdict(draft)
    with transaction.atomic():
        locked = Draft.objects.select_for_update().get(pk=draft.pk)
        _require_pending(locked)
        if locked.content_hash != draft.content_hash:  # only if a draft were ever rewritten
            verdict = draft_verdict(locked)
        flow = verdict.flow
        if flow is None or has_errors(verdict.findings):
            errors = [f for f in verdict.findings if f["level"] == "error"]
            named = "; ".join(format_finding(f) for f in errors[:ERRORS_NAMED])
            more = f"; and {len(errors) - ERRORS_NAMED} more" if len(errors) > ERRORS_NAMED else ""
            raise Refusal(
                DRAFT_HAS_ERRORS,
                f"{len(errors)} lint error{'s' if len(errors) != 1 else ''}: {named}{more}",
                "Ask the author for a corrected draft, or discard this one with a reason.",
            )
        tests = verdict.tests
        broken = tests is not None and not tests.ok
        if tests is not None and broken and not confirm_broken_tests:
            raise NotConfirmed(
                DRAFT_BREAKS_TESTS,
                f"against {verdict.tests_file}, "
                + summary_verdict(tests.summary(), subject="the draft"),
                "Read what it breaks (the draft's page, or the lines printed with this "
                "refusal); to publish it anyway, confirm: the page's checkbox, or "
                "guidepost-mcp approve --break-tests. Or ask the author for a corrected draft.",
                details=report_lines(tests),
            )
        replaced = _live_revision(flow.id, now=now)
        version = flow_version_pin(flow=flow, now=now)
        version.approved_by = approved_by
        version.approved_at = now
        version.draft = locked
        version.save(update_fields=["approved_by", "approved_at", "draft"])
        locked.status = Draft.Status.APPROVED
        locked.decided_by = approved_by
        locked.decided_at = now
        locked.tests_at_approval = _tests_record(tests, verdict.tests_file)
        locked.broken_tests_confirmed = broken
        locked.live_at_decision = replaced
        locked.live_at_decision_recorded = True
        locked.save(update_fields=list(APPROVAL_FIELDS))
        _draft_event("draft.approved", locked)
        # The database carries the catalog to every instance; this instance's copy is
        # written last, so a failed write records nothing.
        catalog_seed(settings.GUIDEPOST_FLOWS_DIR, by=approved_by)
        catalog_put({f"{flow.id}.yaml": locked.yaml}, by=approved_by, via=CatalogFile.Via.APPROVAL)
        _publish(flow.id, locked.yaml)
    _copy_decision(locked, draft)
    return version


def _publish(flow_id: str, text: str) -> None:
    """Write the flow file, the last step of an approval's transaction: an OSError (a
    directory the server may not write, a directory where the file goes) rolls the
    transaction back and becomes a Refusal, so the person approving reads why and nothing
    is left half-done: the draft stays pending, no revision is recorded, no file changes
    (``write_flow_file`` leaves no temporary file)."""
    target = settings.GUIDEPOST_FLOWS_DIR / f"{flow_id}.yaml"
    try:
        write_flow_file(settings.GUIDEPOST_FLOWS_DIR, flow_id, text)
    except OSError as exc:
        raise Refusal(
            FLOW_FILE_NOT_WRITTEN,
            f"{target} could not be written ({exc.strerror or exc})",
            "Nothing was published or recorded: the draft is still pending. Ask whoever runs "
            "the server to let its user write the flows directory (and free that path), then "
            "approve again.",
            retryable=True,
        ) from None


def _live_revision(flow_id: str, *, now: datetime) -> FlowVersion | None:
    """The revision agents are served for ``flow_id`` now, recorded (None: no live flow)."""
    live = current_catalog().flows.get(flow_id)
    return flow_version_pin(flow=live, now=now) if live is not None else None


def _tests_record(tests: FlowTestReport | None, tests_file: str) -> dict[str, object]:
    """What approval keeps of the live tests: where they are, their summary (None: no file)
    and the runner's lines (expected and got, counterexamples) as they were then."""
    return {
        "tests_file": tests_file,
        "summary": tests.summary() if tests else None,
        "report": report_lines(tests) if tests else [],
    }


def _decision_reason(reason: str, what: str, fix: str) -> str:
    """``reason`` stripped; InvalidInput ("reason required") when it is empty or too long."""
    reason = reason.strip()
    if not reason or len(reason) > MAX_DECISION_REASON_LENGTH:
        raise InvalidInput(
            REASON_REQUIRED,
            f"{what} keeps the reason: it is empty"
            if not reason
            else f"the reason is longer than {MAX_DECISION_REASON_LENGTH} characters",
            fix,
        )
    return reason


def draft_discard(*, draft: Draft, discarded_by: str, reason: str) -> Draft:
    """Close a pending draft without publishing it; the draft and the reason are kept, with
    the live revision it was judged against.

    Raises InvalidInput ("reason required") for an empty reason and Refusal
    ("draft not pending") for a draft already decided.
    """
    reason = _decision_reason(
        reason,
        "a discarded draft",
        "Say in a sentence why the draft is not published, so its author can act on it.",
    )
    with transaction.atomic():
        locked = Draft.objects.select_for_update().get(pk=draft.pk)
        _require_pending(locked)
        now = timezone.now()
        locked.status = Draft.Status.DISCARDED
        locked.decided_by = discarded_by
        locked.decided_at = now
        locked.decision_reason = reason
        locked.live_at_decision = _live_revision(locked.flow_id, now=now)
        locked.live_at_decision_recorded = True
        locked.save(update_fields=list(DISCARD_FIELDS))
        _draft_event("draft.discarded", locked)
    _copy_decision(locked, draft)
    return draft


def _draft_event(kind: str, draft: Draft) -> None:
    """Record ``kind`` about ``draft`` in the decision's transaction: one INSERT when some
    subscription wants it."""
    if kind not in kinds_wanted():
        return
    url = reverse("admin:flows_app_draft_change", args=[draft.pk])  # the sender adds the base
    event_record(
        kind,
        {"draft_id": draft.public_id, "flow_id": draft.flow_id, "state": draft.status, "url": url},
    )


def _require_pending(draft: Draft) -> None:
    if draft.status == Draft.Status.PENDING:
        return
    if draft.status == Draft.Status.SUPERSEDED:
        reason = f"draft {draft.public_id} was superseded by a newer draft of {draft.flow_id}"
    else:
        by = f" by {draft.decided_by}" if draft.decided_by else ""
        at = f" at {draft.decided_at:%Y-%m-%d %H:%M} UTC" if draft.decided_at else ""
        reason = f"draft {draft.public_id} was already {draft.status}{by}{at}"
    raise Refusal(DRAFT_NOT_PENDING, reason, "Only a pending draft can be approved or discarded.")


# What a decision sets on a draft.
_DECIDED = ("status", "decided_by", "decided_at", "live_at_decision", "live_at_decision_recorded")
APPROVAL_FIELDS = (*_DECIDED, "tests_at_approval", "broken_tests_confirmed")
DISCARD_FIELDS = (*_DECIDED, "decision_reason")


def _copy_decision(source: Draft, target: Draft) -> None:
    for name in dict.fromkeys((*APPROVAL_FIELDS, *DISCARD_FIELDS)):
        setattr(target, name, getattr(source, name))


def draft_restore(
    *, flow_id: str, version: FlowVersion, reason: str, submitted_via: str, submitted_by: str
) -> DraftSubmitted:
    """Make a recorded revision of ``flow_id`` live again, the way every change goes live:
    a draft of its exact text, with ``reason``, for the same review (lint now, the live
    tests, what changes for agents) and the same approval.

    Raises InvalidInput ("reason required") for an empty reason, Refusal ("version already
    live") for the revision agents are served now, and what ``draft_create`` raises.
    """
    reason = _decision_reason(
        reason,
        "a restore",
        "Say in a sentence why this version should be live again, for the reviewer.",
    )
    live = current_catalog().flows.get(flow_id)
    if live is not None and live.content_hash == version.content_hash:
        raise Refusal(
            ALREADY_LIVE,
            f"revision {version.revision} of {flow_id} is the one agents are served now",
            "Choose an earlier revision from the flow's history.",
        )
    submitted = draft_create(
        text=version.source, submitted_via=submitted_via, submitted_by=submitted_by
    )
    draft = submitted.draft
    Draft.objects.filter(pk=draft.pk).update(restores=version, restore_reason=reason)
    draft.restores, draft.restore_reason = version, reason
    return submitted


# --- the catalog in the database: a flow's truth ----------------------------------------------


@dataclass(frozen=True)
class CatalogChange:
    """What ``catalog_put`` recorded: the new revision (None: nothing changed), the names it
    changed, and the names it left alone because the database no longer held the text the
    change was based on (``expected``)."""

    revision: int | None
    changed: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    versions: tuple[FlowVersion, ...] = field(default=())


def catalog_put(
    changes: Mapping[str, str | None],
    *,
    by: str,
    via: str,
    expected: Mapping[str, str] | None = None,
    approved_flows: Sequence[Flow] = (),
) -> CatalogChange:
    """Record changes to the catalog (file name -> text; None removes the file) in one
    transaction, under one new revision; every instance copies them within its poll
    interval. A text equal to the stored one is no change.

    ``expected`` (name -> content hash the change was based on, "" for no file): a name
    whose stored text differs from it is left alone and reported as a conflict (the
    database wins). ``approved_flows`` whose file changed are also recorded as revisions
    approved by ``by``. Joins the caller's transaction when there is one (an approval).
    """
    for name in changes:
        if not catalog_file_name(name):
            raise ValueError(f"{name!r} names no file of a catalog")
    now = timezone.now()
    with transaction.atomic():
        counter, _ = CatalogRevision.objects.select_for_update().get_or_create(pk=1)
        stored = {f.name: f for f in CatalogFile.objects.filter(name__in=list(changes))}
        real: dict[str, str | None] = {}
        conflicts: list[str] = []
        for name, text in changes.items():
            row = stored.get(name)
            held = row.content_hash if row is not None and row.text is not None else ""
            if expected is not None and held != expected.get(name, ""):
                conflicts.append(name)
                continue
            wanted = content_hash(text) if text is not None else ""
            if wanted != held:
                real[name] = text
        if not real:
            return CatalogChange(None, conflicts=tuple(conflicts))
        counter.revision += 1
        counter.save(update_fields=["revision"])
        versions: list[FlowVersion] = []
        for name, text in real.items():
            CatalogFile.objects.update_or_create(
                name=name,
                defaults={
                    "text": text,
                    "content_hash": content_hash(text) if text is not None else "",
                    "revision": counter.revision,
                    "changed_at": now,
                    "changed_by": by[:MAX_SUBMITTER_LENGTH],
                    "via": via,
                },
            )
        for flow in approved_flows:
            if flow.id in {n.removesuffix(".yaml") for n in real if "/" not in n}:
                version = flow_version_pin(flow=flow, now=now)
                version.approved_by = by[:MAX_SUBMITTER_LENGTH]
                version.approved_at = now
                version.save(update_fields=["approved_by", "approved_at"])
                versions.append(version)
    return CatalogChange(counter.revision, tuple(sorted(real)), tuple(conflicts), tuple(versions))


def catalog_seed(directory: Path, *, by: str) -> CatalogChange:
    """Import ``directory``'s catalog files into an empty catalog (the first ``serve`` of a
    deployment, or an approval before any): the directory is the seed. Files that cannot be
    read are left out. Does nothing once the database holds a catalog."""
    with transaction.atomic():
        CatalogRevision.objects.select_for_update().get_or_create(pk=1)
        if CatalogFile.objects.exists():
            return CatalogChange(None)
        # What does not lint stays out: the catalog holds only what instances may serve.
        catalog = load_catalog(directory)
        texts = {
            name: read_catalog_file(path)
            for name, path in catalog_files(directory).items()
            if "/" in name or not any(f.get("file") == str(path) for f in catalog.errors)
        }
        return catalog_put(
            {name: text for name, text in texts.items() if text is not None},
            by=by,
            via=CatalogFile.Via.SEED,
        )


# What a refused publish is called.
PUBLISH_HAS_ERRORS = "directory has lint errors"
PUBLISH_FAILS_TESTS = "directory fails its tests"


@dataclass(frozen=True)
class Published:
    """What ``catalog_publish`` did (or, with ``dry_run``, would do): the catalog's new
    revision (None: nothing changed or a dry run), and the files added, changed and
    removed, by name."""

    revision: int | None
    added: tuple[str, ...]
    changed: tuple[str, ...]
    removed: tuple[str, ...]
    versions: tuple[FlowVersion, ...] = ()


def catalog_publish(directory: Path, *, by: str, dry_run: bool = False) -> Published:
    """Make ``directory`` the live catalog of every instance (``guidepost-mcp publish DIR``),
    through the checks of an approval: every flow file lints against the directory's
    categories.yaml, and every flow passes its tests (``tests/<flow_id>.yaml``). Files of
    the catalog the directory lacks are removed. Each flow whose text changes is recorded as
    a revision approved by ``by``. Raises Refusal ("directory has lint errors", "directory
    fails its tests", the runner's lines as ``details``), and then nothing changes.
    """
    catalog = load_catalog(directory)
    errors = catalog.errors
    if errors:
        named = "; ".join(format_finding(f) for f in errors[:ERRORS_NAMED])
        more = f"; and {len(errors) - ERRORS_NAMED} more" if len(errors) > ERRORS_NAMED else ""
        raise Refusal(
            PUBLISH_HAS_ERRORS,
            f"{len(errors)} lint error{'s' if len(errors) != 1 else ''} in {directory}: "
            f"{named}{more}",
            f"Fix them (guidepost-mcp lint {directory}), then publish again; nothing changed.",
        )
    report = check_flows_dir(directory)
    if not report.ok:
        lines = [format_finding(f) for f in report.findings]
        for flow_report in report.reports:
            if not flow_report.ok:
                lines += report_lines(flow_report)
        failing = sorted(r.flow_id for r in report.reports if not r.ok)
        raise TestsFail(
            PUBLISH_FAILS_TESTS,
            f"the tests of {', '.join(failing) or 'the directory'} do not pass"
            + (f" ({len(report.findings)} tests files name no flow)" if report.findings else ""),
            f"Run guidepost-mcp test --flows {directory}, fix the flows or their tests, then "
            "publish again; nothing changed.",
            details=lines,
        )
    texts: dict[str, str | None] = {}
    for name, path in catalog_files(directory).items():
        texts[name] = read_catalog_file(path)
    stored = dict(
        CatalogFile.objects.filter(text__isnull=False).values_list("name", "content_hash")
    )
    added = tuple(sorted(n for n in texts if n not in stored))
    changed = tuple(
        sorted(
            n
            for n, t in texts.items()
            if n in stored and t is not None and content_hash(t) != stored[n]
        )
    )
    removed = tuple(sorted(n for n in stored if n not in texts))
    if dry_run or not (added or changed or removed):
        return Published(None, added, changed, removed)
    result = catalog_put(
        {**texts, **dict.fromkeys(removed)},
        by=by,
        via=CatalogFile.Via.PUBLISH,
        approved_flows=list(catalog.flows.values()),
    )
    return Published(result.revision, added, changed, removed, result.versions)


def drafts_adopt_keyless(key_name: str) -> list[str]:
    """Let the key ``key_name`` read every draft submitted without a key, as its submitter
    would (``guidepost://drafts/<id>``), in one transaction (the caller's when there is
    one): once a key exists, keyless callers are refused, and their drafts would be
    unreadable. Who submitted a draft stays as it was; each adoption is in the audit trail
    (the submitter, the key it went to). Returns the ids of the drafts adopted.
    """
    with transaction.atomic():
        drafts = list(
            Draft.objects.select_for_update()
            .filter(submitted_via=Draft.Via.KEY, submitted_by__startswith=ANONYMOUS, adopted_by="")
            .values_list("public_id", "submitted_by")
        )
        Draft.objects.filter(public_id__in=[public_id for public_id, _ in drafts]).update(
            adopted_by=KEY_OWNER + key_name
        )
        for _, submitter in drafts:
            audit.audit_record(
                audit.Entry(
                    tool="adopt keyless draft",
                    outcome="adopted",
                    status=0,
                    duration_ms=0.0,
                    key_name=key_name,
                    caller=submitter,
                )
            )
    return [public_id for public_id, _ in drafts]
