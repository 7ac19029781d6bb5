"""The catalog (``CatalogFile`` rows, raised by ``CatalogRevision``: a flow's truth), flow
versions (every exact text a run was ever pinned to) and drafts (flows waiting for
review). Nothing in a draft reaches agents until a person approves it.
"""

from __future__ import annotations

import secrets

from django.db import models

from flowcore.flow.drafts import submitter_shown
from flowcore.flow.model import REVISION_DIGITS, version_and_revision


def new_draft_id() -> str:
    return "d_" + secrets.token_urlsafe(12)


def new_catalog_id() -> str:
    return secrets.token_hex(8)


class FlowVersion(models.Model):
    """One exact flow text, stored once by its SHA-256; runs are pinned to it.

    People call it a *revision* ("revision b6ace70912ba": the hash's first 12 digits);
    ``version`` is the flow's own ``version`` key, as its author wrote it.
    """

    content_hash = models.CharField(max_length=64, unique=True)
    flow_id = models.CharField(max_length=64, db_index=True)
    title = models.CharField(max_length=500)
    version = models.CharField(max_length=100, blank=True, default="")
    source = models.TextField()
    created_at = models.DateTimeField()
    # Set when a person approved this exact text (a version first pinned by a run
    # from a hand-placed file has none until then).
    approved_by = models.CharField(max_length=200, blank=True, default="")
    approved_at = models.DateTimeField(null=True, blank=True)
    draft = models.ForeignKey(
        "Draft", null=True, blank=True, on_delete=models.PROTECT, related_name="flow_versions"
    )

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "flow revision"
        # Created by runs_app before flow versions moved here; the table kept its name.
        db_table = "runs_app_flowversion"

    def __str__(self) -> str:
        return f"{self.flow_id}@{self.revision}"

    @property
    def revision(self) -> str:
        return self.content_hash[:REVISION_DIGITS]

    @property
    def named(self) -> str:
        """ "version 2024.2, revision b6ace70912ba" (the revision alone without a version)."""
        return version_and_revision(self.version, self.content_hash)


class Draft(models.Model):
    """A submitted flow text waiting for (or past) a person's decision.

    Only ``flows_app.services`` changes a draft's status: at most one draft per flow is
    pending; a newer submission supersedes it.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        DISCARDED = "discarded"
        SUPERSEDED = "superseded"

    class Via(models.TextChoices):
        KEY = "key", "agent key"
        USER = "user", "admin user"
        CLI = "cli", "command line"

    public_id = models.CharField(max_length=32, unique=True, default=new_draft_id, editable=False)
    flow_id = models.CharField(max_length=64, db_index=True)
    title = models.CharField(max_length=500, blank=True, default="")
    yaml = models.TextField()
    content_hash = models.CharField(max_length=64)
    # Lint at submission, against the categories of that moment.
    ok = models.BooleanField()
    findings = models.JSONField(default=list, blank=True)
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    submitted_via = models.CharField(max_length=8, choices=Via.choices, default=Via.KEY)
    submitted_by = models.CharField(max_length=200)
    # The agent key ("key:NAME") that adopted a draft submitted without a key
    # (createkey --adopt-keyless): it reads the draft as its submitter would.
    adopted_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField()
    decided_by = models.CharField(max_length=200, blank=True, default="")
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True, default="")
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="superseded"
    )
    # Set by approval: the live tests checked on the draft's flow at that moment
    # (FlowTestReport.summary() and the runner's lines), None when the flow had no tests
    # file; and whether the approver confirmed approving although they did not all pass.
    tests_at_approval = models.JSONField(null=True, blank=True)
    broken_tests_confirmed = models.BooleanField(default=False)
    # Set by approval and discard: the live revision of the flow at that moment
    # (for an approved draft, the one it replaced; None: no live flow had this id), so a
    # decided draft still reads as what it changed. ``live_at_decision_recorded`` is False
    # for drafts decided before migration flows_app/0008 (nothing was recorded) and for
    # superseded ones (no person decided them).
    live_at_decision = models.ForeignKey(
        FlowVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    live_at_decision_recorded = models.BooleanField(default=False)
    # Set by a restore: the revision whose text this draft makes live again, and
    # why; the draft then takes the same review as any other.
    restores = models.ForeignKey(
        FlowVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    restore_reason = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
        permissions = [("approve_draft", "Can approve or discard drafts")]
        constraints = [
            models.UniqueConstraint(
                fields=["flow_id"],
                condition=models.Q(status="pending"),
                name="draft_one_pending_per_flow",
            )
        ]

    def __str__(self) -> str:
        return f"{self.public_id} ({self.flow_id})"

    @property
    def submitter(self) -> str:
        """Who submitted it, as a person reads it ("anonymous (127.0.0.1)" for a keyless
        agent, "support-bot (agent key)", "maria (admin user)")."""
        return submitter_shown(self.submitted_by, self.get_submitted_via_display())

    @property
    def revision(self) -> str:
        """What its review page calls it beside its id: the first digits of its text's hash."""
        return self.content_hash[:REVISION_DIGITS]

    @property
    def pending(self) -> bool:
        return self.status == self.Status.PENDING


class CatalogFile(models.Model):
    """One file of the catalog, a flow's truth: each instance's flows directory is a copy
    of these rows, kept in line by ``flows_app.catalog_sync``.

    ``name`` is the file's path in a flows directory: ``categories.yaml``,
    ``<flow_id>.yaml`` or ``tests/<flow_id>.yaml``. ``text`` None: the file was removed
    (kept, so an instance that last read an older revision removes its copy).
    ``revision`` is the catalog's revision that last changed it.
    """

    class Via(models.TextChoices):
        SEED = "seed", "imported from a flows directory at start"
        APPROVAL = "approval", "a draft approved"
        PUBLISH = "publish", "guidepost-mcp publish"
        EDIT = "edit", "a file edited on an instance"

    name = models.CharField(max_length=200, unique=True)
    text = models.TextField(null=True, blank=True)  # noqa: DJ001 (None: removed, not empty)
    content_hash = models.CharField(max_length=64, blank=True, default="")
    revision = models.BigIntegerField(db_index=True)
    changed_at = models.DateTimeField()
    changed_by = models.CharField(max_length=200, blank=True, default="")
    via = models.CharField(max_length=8, choices=Via.choices)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name}@{self.revision}"


class CatalogRevision(models.Model):
    """The catalog's revision: one row, raised by one in every transaction that changes a
    catalog file. Instances read it once per poll interval; its row lock orders writers."""

    revision = models.BigIntegerField(default=0)
    # Names this database's catalog: a directory copied from another database's (a
    # restored backup, a developer's second database) is not taken for an edited copy.
    catalog_id = models.CharField(max_length=32, default=new_catalog_id)

    def __str__(self) -> str:
        return f"catalog revision {self.revision}"


class LiveFlow(FlowVersion):
    """The admin's "Live flows" entry: its page lists the live catalog, not these rows.

    A proxy gives the live flows a place in the admin index and reuses the flow version
    permissions (see ``flows_app.admin.LiveFlowAdmin``).
    """

    class Meta:
        proxy = True
        verbose_name = "live flow"
        default_permissions = ()
