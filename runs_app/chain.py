"""The steps' hash chain: each step hashes its content and the step before it.

A run records the hash of its last step (``head_hash``), so an edited, forged,
deleted or cut-off step is detected by ``steps_verify``.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from flows_app.domain.jsontext import canonical_json
from runs_app.models import GENESIS_HASH, Run, Step


def chain_append(run: Run, step: Step) -> None:
    """Link ``step`` to the run's head and make it the new head (nothing is saved)."""
    step.prev_hash = run.head_hash
    step.hash = step_hash(step, run.public_id)
    run.head_hash = step.hash


def step_hash(step: Step, run_public_id: str) -> str:
    """SHA-256 over the step's content and the previous step's hash.

    The caller is hashed too when the step has one; steps recorded before steps named
    their caller have none, so their hashes are computed exactly as they were (ADR 0032).
    """
    content: list[object] = [
        step.prev_hash,
        run_public_id,
        step.seq,
        step.tool,
        step.input,
        step.result,
        step.status,
        step.node_before,
        step.node_after,
        iso(step.created_at),
    ]
    if step.caller:
        content.append(step.caller)
    return hashlib.sha256(canonical_json(content).encode("utf-8")).hexdigest()


def steps_verify(run: Run) -> int | None:
    """Check the run's hash chain against its head; the seq of the first step that does not
    fit (``revision + 1`` when steps are missing at the end), or None when it is intact."""
    prev = GENESIS_HASH
    expected_seq = 1
    for step in run.steps.order_by("seq"):
        if (
            step.seq != expected_seq
            or step.prev_hash != prev
            or step.hash != step_hash(step, run.public_id)
        ):
            return step.seq
        prev = step.hash
        expected_seq += 1
    if prev != run.head_hash or expected_seq - 1 != run.revision:
        return expected_seq
    return None


def iso(moment: datetime) -> str:
    """A time as clients see it: ISO 8601 in UTC with a ``Z``."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
