"""Runs and their append-only steps.

A run is pinned to the exact flow content it started on (``flows_app.FlowVersion``),
so it can be continued and rendered on that version after the flow file changes.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from django.db import models

from flowcore.common.jsontext import compact_json
from runs_app.fields import HexDigestField
from runs_app.packing import pack_json, unpack_json

GENESIS_HASH = "0" * 64  # what the first step of a run chains to


def new_run_id() -> str:
    """An opaque run handle with 128 random bits (spec §4: run ids like ``r_<random>``)."""
    return "r_" + secrets.token_urlsafe(16)


def new_salt() -> str:
    """A run's key for the digests of what callers sent (128 random bits, hex)."""
    return secrets.token_hex(16)


def unpacked_state(packed: bytes | memoryview) -> dict[str, Any]:
    """The engine state a run's ``packed_state`` column holds."""
    state: dict[str, Any] = json.loads(unpack_json(packed))
    return state


class Run(models.Model):
    class State(models.TextChoices):
        ACTIVE = "active"
        COMPLETED = "completed"
        STALLED = "stalled"
        CLOSED = "closed"

    public_id = models.CharField(max_length=32, unique=True, default=new_run_id, editable=False)
    flow_version = models.ForeignKey(
        "flows_app.FlowVersion", on_delete=models.PROTECT, related_name="runs"
    )
    flow_id = models.CharField(max_length=64)
    state = models.CharField(max_length=16, choices=State.choices)
    node = models.CharField(max_length=64, blank=True, default="")
    outcome = models.CharField(max_length=64, blank=True, default="")
    # The engine's whole RunState (values, path, counts), as RunState.to_dict() gives it:
    # its JSON text packed (runs_app.packing, ADR 0095). Read and written through
    # ``engine_state``.
    packed_state = models.BinaryField()
    ref = models.CharField(max_length=200, blank=True, default="")
    # Who started the run (the caller's key: "key:NAME" for an agent key, "anon:..." for
    # a caller without one). Another key's caller cannot see the run (selectors.run_get).
    owner = models.CharField(max_length=200, db_index=True)
    # guide_start's request_id: a retry with the same owner and request_id returns this run.
    request_id = models.CharField(max_length=64, blank=True, default="")
    close_reason = models.CharField(max_length=500, blank=True, default="")
    # Bumped by every transition: a call that saw an older version lost a race.
    revision = models.PositiveIntegerField(default=0)
    # The hash of the run's last step, which the next step chains to.
    head_hash = HexDigestField(default=GENESIS_HASH, editable=True)
    # The key of the digests through which the chain binds what callers sent (ADR 0067).
    # Set at start; "" on runs recorded before digests, whose steps hash values as they are.
    salt = HexDigestField(blank=True, default="")
    # The content hash of the version a person moved the run from (ADR 0083), until the
    # agent's next answer or back, whose ``next`` then says the procedure changed.
    moved_from = HexDigestField(blank=True, default="")
    started_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # Since when a stalled run has waited for a person: the time of the step that stalled
    # it, kept through adopt and move steps (which change updated_at); None unless stalled.
    # Set by ``step_record``, bound to the steps by verify (``results.stalled_since``).
    stalled_at = models.DateTimeField(null=True, blank=True, editable=False)
    # When the run's values were erased (runs_app.erasure, ADR 0086); bound by its erase step.
    erased_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-updated_at"]
        # No index holds a column every step changes (updated_at, revision, head_hash,
        # packed_state): on PostgreSQL a step's UPDATE of the run is then heap-only, with
        # no new index entries, unless it changes the run's state (ADR 0095). Plain
        # indexes, without the LIKE copies Django adds beside an indexed CharField on
        # PostgreSQL (only public_id and owner are searched by prefix).
        indexes = [
            models.Index(fields=["flow_id"], name="run_flow_id"),
            models.Index(fields=["state"], name="run_state"),
            models.Index(fields=["ref"], name="run_ref"),
        ]
        permissions = [
            ("capture_run", "Can save a run as a scenario in the flows' tests"),
            ("resolve_run", "Can claim a stalled run, answer it or close it"),
            ("erase_run", "Can erase runs"),
            ("see_personal_values", "Can see personal values"),
        ]
        constraints = [
            # Two starts racing with the same request_id: one run, the other gets it back.
            models.UniqueConstraint(
                fields=["owner", "request_id"],
                condition=~models.Q(request_id=""),
                name="run_unique_request_id",
            )
        ]

    def __str__(self) -> str:
        return self.public_id

    @property
    def engine_state(self) -> dict[str, Any]:
        """The engine's state as ``RunState.to_dict()`` gave it (a new dict on each read)."""
        return unpacked_state(self.packed_state)

    @engine_state.setter
    def engine_state(self, state: dict[str, Any]) -> None:
        self.packed_state = pack_json(compact_json(state))

    @property
    def handoff(self) -> str | None:
        """The hand-over note of a stalled run (``RunState.handoff``), None without one."""
        note: str | None = self.engine_state.get("handoff")
        return note


# The states of a run that can still go on: moved to a new version, adopted by a key.
OPEN_STATES = (Run.State.ACTIVE, Run.State.STALLED)


class Claim(models.Model):
    """A person taking a stalled run on ("taken by NAME", ADR 0080): shown to everyone on
    the inbox and the run's page, released by a person or when the run is answered or
    closed. Not part of the run's history (no step, no hash): who claimed and released
    what is in the audit trail."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="claim")
    by = models.CharField(max_length=150)  # the person's user name
    at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.run_id} taken by {self.by}"


class Step(models.Model):
    """One accepted call on a run. Append-only; each step hashes its content and the
    previous step's hash, so a run's history is tamper-evident."""

    # No index of its own: the unique (run, seq) index below leads with it.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps", db_index=False)
    seq = models.PositiveIntegerField()
    tool = models.CharField(max_length=32)
    input = models.JSONField()
    # The result exactly as the agent received it, its JSON text packed (runs_app.packing,
    # ADR 0095): PostgreSQL's jsonb would reorder its keys, and a retry with `at` must
    # return the same result. Read and written through ``result_text``.
    packed_result = models.BinaryField()
    status = models.CharField(max_length=16)
    node_before = models.CharField(max_length=64, blank=True, default="")
    node_after = models.CharField(max_length=64, blank=True, default="")
    # Who made the call (the caller's key, as Run.owner); "" on steps older than keys.
    caller = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField()
    # How the step's hash is computed (runs_app.chain): 1 over its values as they are, 2
    # over their keyed digests and the run's fields it sets (ADR 0067). A run's steps all
    # have the format its first step has.
    format = models.PositiveSmallIntegerField(default=1)
    # The content hash of the flow version the step pins the run to: its first step's (in
    # format 2), "" on any other step.
    flow_hash = HexDigestField(blank=True, default="", editable=True)
    # The digest of what the step's input and result were (chain.payload_digest), kept
    # when they are erased (ADR 0086); "" on a step that still holds them.
    payload = HexDigestField(blank=True, default="", editable=True)
    prev_hash = HexDigestField(editable=True)
    hash = HexDigestField(editable=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="step_unique_seq")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.tool}"

    @property
    def result_text(self) -> str:
        """The result's JSON text, as the agent received it."""
        return unpack_json(self.packed_result)

    @result_text.setter
    def result_text(self, text: str) -> None:
        self.packed_result = pack_json(text)

    @property
    def result(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.result_text)
        return result


class Seal(models.Model):
    """One block of the ledger (ADR 0067): what was recorded in a window of time, sealed
    once no transaction can still add to it, and chained to the block before.

    It lists every run whose last change falls in the window (its id, revision and head
    hash then), so a deleted or rewritten run is named; and it holds a mark of each audit
    record of the window, so an edited, deleted or added record is named. Written by
    ``runs_app.ledger.seal``; never changed, but for ``pruned_at``.
    """

    seq = models.PositiveIntegerField(unique=True)
    format = models.PositiveSmallIntegerField(default=1)
    # The window [since, until): runs by their updated_at, audit records by their at.
    since = models.DateTimeField()
    until = models.DateTimeField()
    sealed_at = models.DateTimeField()
    # [[public_id, revision, head_hash], ...], in the order of their updated_at.
    runs = models.JSONField()
    # The audit records' ids as ranges [[first, last], ...], and one mark (32 hex digits)
    # per record, in id order.
    audit_ids = models.JSONField()
    audit_marks = models.TextField(blank=True, default="")
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)
    # When retention removed the window's audit records; not hashed (ADR 0067).
    pruned_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["seq"]

    def __str__(self) -> str:
        return f"seal {self.seq}"
