"""A run's hash chain (ADR 0067): each step hashes its content and the step before it, a
run records the hash of its last step (``head_hash``), and every field of the run that a
person or an agent relies on is checked against what its steps recorded.

A step's hash has one of two formats, recorded on the step (``Step.format``); a run's
steps all have the format its first step has, so steps recorded before digests keep
verifying exactly as they did:

1. over the step's input and result as they are (runs recorded before digests);
2. over their **digest form**: every scalar leaf of the input and of the result (a string,
   number or boolean: what a caller sent, its echoes such as ``rejected``, and the flow's
   own text alike) replaced by its digest, keyed by the run's salt; keys, nulls and the
   shape stay. The hash commits to one digest of that form (``payload_digest``), and to the
   flow version the first step pins the run to (``Step.flow_hash``). Erasing a run's
   values can then keep each step's payload digest and drop the values and the salt: the
   chain still proves the path, statuses, times and who acted, and a short value cannot
   be guessed from what is left.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from access_app.callers import STAFF
from flowcore.common.jsontext import canonical_json
from flowcore.run.results import ADOPT, MOVE, RESOLVE, stalled_since
from runs_app.models import GENESIS_HASH, Run, Step

FORMAT_VALUES = 1
FORMAT_DIGESTS = 2


def chain_append(
    run: Run, step: Step, *, result: Mapping[str, Any] | None = None, keyed: bool = True
) -> None:
    """Link ``step`` to the run's head and make it the new head (nothing is saved).
    ``result`` is the step's result as a mapping, when the caller has it (else it is read
    from ``step.result_text``).

    ``keyed`` False hashes the step's digest form without the run's salt, and keeps that
    digest on the step (``payload``): an erase step, whose run loses its salt, is then
    still checked from what it holds."""
    step.prev_hash = run.head_hash
    if keyed:
        step.format = FORMAT_DIGESTS if run.salt else FORMAT_VALUES
        step.hash = step_hash(step, run, result=result)
    else:
        step.format = FORMAT_DIGESTS
        step.payload = payload_digest(step.input, step.result if result is None else result, "")
        step.hash = digests_hash(step, run.public_id, step.payload)
    run.head_hash = step.hash


def step_hash(step: Step, run: Run, *, result: Mapping[str, Any] | None = None) -> str:
    """SHA-256 over the step's content and the previous step's hash, in the step's format."""
    if result is None:
        result = step.result
    if step.format == FORMAT_VALUES:
        return _values_hash(step, run.public_id, result)
    return digests_hash(step, run.public_id, payload_digest(step.input, result, run.salt))


def _values_hash(step: Step, run_public_id: str, result: Mapping[str, Any]) -> str:
    """Format 1. The caller is hashed when the step has one; steps recorded before steps
    named their caller have none, so their hashes are computed exactly as they were."""
    content: list[object] = [
        step.prev_hash,
        run_public_id,
        step.seq,
        step.tool,
        step.input,
        result,
        step.status,
        step.node_before,
        step.node_after,
        iso(step.created_at),
    ]
    if step.caller:
        content.append(step.caller)
    return _sha256(content)


def digests_hash(step: Step, run_public_id: str, payload: str) -> str:
    """Format 2: the step's own columns in clear, what was sent and answered through
    ``payload`` (``payload_digest``)."""
    return _sha256(
        [
            FORMAT_DIGESTS,
            step.prev_hash,
            run_public_id,
            step.seq,
            step.tool,
            step.status,
            step.node_before,
            step.node_after,
            iso(step.created_at),
            step.caller,
            step.flow_hash,
            payload,
        ]
    )


def payload_digest(given: Mapping[str, Any], result: Mapping[str, Any], salt: str) -> str:
    """SHA-256 over the digest form of a step's input and result, keyed by ``salt``."""
    key = hashlib.blake2b(key=bytes.fromhex(salt), digest_size=32)
    return _sha256([digest_form(given, key), digest_form(result, key)])


def digest_form(value: object, key: hashlib.blake2b) -> object:
    """``value`` with every scalar leaf replaced by its keyed digest (hex): keyed BLAKE2b-256
    (RFC 7693's keyed mode, a MAC) over the leaf tagged with its type, so ``"1"`` and ``1``
    differ. Keys, nulls and the shape stay; a tuple is a list, as it reads back from JSON.

    >>> key = hashlib.blake2b(key=bytes(16), digest_size=32)
    >>> form = digest_form({"values": {"age": "42"}, "n": None, "ok": [True]}, key)
    >>> sorted(form), form["n"], len(form["values"]["age"]), len(form["ok"][0])
    (['n', 'ok', 'values'], None, 64, 64)
    """
    if isinstance(value, str):
        leaf = key.copy()
        leaf.update(b"s" + value.encode("utf-8", "surrogatepass"))
        return leaf.hexdigest()
    if isinstance(value, dict):
        return {k: digest_form(v, key) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [digest_form(v, key) for v in value]
    if value is None:
        return None
    leaf = key.copy()
    leaf.update(b"j" + canonical_json(value).encode("utf-8"))
    return leaf.hexdigest()


def _sha256(content: object) -> str:
    return hashlib.sha256(canonical_json(content).encode("utf-8")).hexdigest()


def steps_verify(run: Run, steps: Sequence[Step] | None = None) -> int | None:
    """Check the run's hash chain against its head; the seq of the first step that does not
    fit (``revision + 1`` when steps are missing at the end), or None when it is intact.
    ``steps`` are the run's steps in order, when the caller has read them."""
    if steps is None:
        steps = list(run.steps.order_by("seq"))
    expected_format = FORMAT_DIGESTS if run.salt else FORMAT_VALUES
    prev = GENESIS_HASH
    expected_seq = 1
    for step in steps:
        if (
            step.seq != expected_seq
            or step.format != expected_format
            or step.prev_hash != prev
            or step.hash != step_hash(step, run)
        ):
            return step.seq
        prev = step.hash
        expected_seq += 1
    if prev != run.head_hash or expected_seq - 1 != run.revision:
        return expected_seq
    return None


def run_differences(run: Run, steps: Sequence[Step], content_hash: str) -> list[str]:
    """Each field of ``run`` that differs from what its steps recorded, as ``"FIELD ..."``;
    empty when all agree. ``content_hash`` is the content hash of the run's flow version.

    A run's start, owner, ``ref``, ``request_id``, flow and version are what its first step
    recorded (its owner changed only by an ``adopt`` step, its version only by a ``move``
    step), its close reason what its close step recorded, its ``updated_at`` its last
    step's time, its ``stalled_at`` the time of the step that stalled it
    (``stalled_since``); a ``resolve`` step names a person (``staff:NAME``) and carries
    their note. The state, node, outcome and engine state are the replay's to check. Values a person
    may have given (``ref``, ``request_id``, the close reason) are not repeated in what
    this returns.
    """
    if not steps:
        return []
    first, last = steps[0], steps[-1]
    given = first.input
    owner = first.caller
    close_reason = ""
    people: list[str] = []
    pinned = first.flow_hash if first.format >= FORMAT_DIGESTS else ""
    for step in steps:
        if step.tool == ADOPT:
            owner = str(step.input.get("owner", ""))
        elif step.tool == MOVE:
            pinned = step.flow_hash if step.format >= FORMAT_DIGESTS else str(step.input.get("to"))
        elif step.tool == "guide_close":
            close_reason = str(step.input.get("reason", ""))
        elif step.tool == RESOLVE and not (
            step.caller.startswith(STAFF) and str(step.input.get("note") or "").strip()
        ):
            # A person resolved the run: the step must say who, and why (their note).
            people.append(f"step {step.seq} answers for a person without naming one and a note")
    shown: dict[str, tuple[object, object]] = {
        "started_at": (run.started_at, first.created_at),
        "updated_at": (run.updated_at, last.created_at),
        "stalled_at": (run.stalled_at, stalled_since(map(stall_mark, steps))),
        "flow_id": (run.flow_id, given.get("flow_id")),
    }
    if owner:  # steps recorded before callers were named leave the owner unbound
        shown["owner"] = (run.owner, owner)
    if pinned:
        shown["flow revision"] = (content_hash, pinned)
    differences = [
        f"{field} is {_shown(stored)}; its steps say {_shown(recorded)}"
        for field, (stored, recorded) in shown.items()
        if stored != recorded
    ]
    differences += people
    if run.ref != (given.get("ref") or ""):
        differences.append("ref differs from what step 1 recorded")
    if run.request_id != (given.get("request_id") or ""):
        differences.append("request_id differs from what step 1 recorded")
    if run.close_reason != close_reason:
        differences.append(
            "close_reason differs from what its close step recorded"
            if close_reason
            else "close_reason is set, but no step closed the run"
        )
    return differences


def stall_mark(step: Step) -> tuple[str, str, str, datetime]:
    """What ``stalled_since`` reads of a step: a move's state is in its result."""
    moved_to = str(step.result.get("state", "")) if step.tool == MOVE else ""
    return step.tool, step.status, moved_to, step.created_at


def _shown(value: object) -> str:
    return repr(iso(value)) if isinstance(value, datetime) else repr(value)


def iso(moment: datetime) -> str:
    """A time as clients see it: ISO 8601 in UTC with a ``Z``."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
