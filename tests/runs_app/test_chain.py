"""The chain module: a step's hash in format 2 (keyed digests of every leaf), and how it
shows a step's time to clients."""

from __future__ import annotations

import hashlib
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from flowcore.common.jsontext import canonical_json
from runs_app.chain import (
    FORMAT_DIGESTS,
    digest_form,
    digests_hash,
    iso,
    payload_digest,
    step_hash,
)
from runs_app.models import Run, Step


def test_iso_shows_a_time_in_utc_with_a_z() -> None:
    assert iso(datetime(2026, 11, 30, 17, 5, 9, tzinfo=UTC)) == "2026-11-30T17:05:09Z"


def test_iso_converts_a_time_with_another_offset_to_utc() -> None:
    two_hours_east = timezone(timedelta(hours=2))
    moment = datetime(2026, 1, 1, 1, 30, 0, 250000, tzinfo=two_hours_east)

    assert iso(moment) == "2025-12-31T23:30:00.250000Z"


def test_iso_is_utc_whatever_the_servers_local_time_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        moment = datetime(2026, 11, 30, 17, 5, 9, tzinfo=UTC)

        assert iso(moment) == "2026-11-30T17:05:09Z"
    finally:
        monkeypatch.undo()
        time.tzset()


# --- format 2: what a step's hash commits to (ADR 0067) ---------------------------------------

SALT = "00112233445566778899aabbccddeeff"
MOMENT = datetime(2026, 12, 1, 9, 30, 0, 125000, tzinfo=UTC)


ANSWERED = (
    '{"run_id":"r_chain","status":"unmatched","rejected":"maybe","attempt":1,"other":true,'
    '"candidates":["yes","no"]}'
)


def a_step(**changes: Any) -> tuple[Run, Step]:
    run = Run(public_id="r_chain", salt=SALT)
    step = Step(
        seq=2,
        tool="guide_answer",
        input={"choice": "maybe", "values": {"n_photos": None}},
        result_text=ANSWERED,
        status="unmatched",
        node_before="n_photos",
        node_after="n_photos",
        caller="key:support",
        created_at=MOMENT,
        prev_hash="ab" * 32,
        format=FORMAT_DIGESTS,
    )
    for name, value in changes.items():
        setattr(step, name, value)
    return run, step


def leaf(salt: str, tag: bytes, text: str) -> str:
    return hashlib.blake2b(tag + text.encode(), key=bytes.fromhex(salt), digest_size=32).hexdigest()


def test_a_format_2_hash_commits_to_its_columns_in_clear_and_to_keyed_digests_of_every_leaf() -> (
    None
):
    """The formula, written out: a change to it would fail every run recorded since."""
    run, step = a_step()
    given = {"choice": leaf(SALT, b"s", "maybe"), "values": {"n_photos": None}}
    answered = {
        "run_id": leaf(SALT, b"s", "r_chain"),
        "status": leaf(SALT, b"s", "unmatched"),
        "rejected": leaf(SALT, b"s", "maybe"),
        "attempt": leaf(SALT, b"j", "1"),
        "other": leaf(SALT, b"j", "true"),
        "candidates": [leaf(SALT, b"s", "yes"), leaf(SALT, b"s", "no")],
    }
    payload = hashlib.sha256(canonical_json([given, answered]).encode()).hexdigest()
    content = [
        2,
        "ab" * 32,
        "r_chain",
        2,
        "guide_answer",
        "unmatched",
        "n_photos",
        "n_photos",
        "2026-12-01T09:30:00.125000Z",
        "key:support",
        "",
        payload,
    ]

    assert payload_digest(step.input, step.result, SALT) == payload
    assert step_hash(step, run) == hashlib.sha256(canonical_json(content).encode()).hexdigest()


def test_a_value_is_bound_through_a_digest_keyed_by_its_runs_salt() -> None:
    """The same short value has another digest in every run, and none is its plain hash:
    a digest left after erasure does not tell the value without the salt."""
    key = hashlib.blake2b(key=bytes.fromhex(SALT), digest_size=32)
    other = hashlib.blake2b(key=bytes.fromhex("ff" * 16), digest_size=32)

    mine, theirs = digest_form("1984-02-29", key), digest_form("1984-02-29", other)

    assert mine != theirs
    assert mine not in (
        hashlib.sha256(b"1984-02-29").hexdigest(),
        hashlib.sha256(b"s1984-02-29").hexdigest(),
    )
    assert digest_form("1", key) != digest_form(1, key) != digest_form(True, key)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("input", {"choice": "maybe?", "values": {"n_photos": None}}),
        ("input", {"choice": "maybe", "values": {"n_other": None}}),
        ("result_text", ANSWERED.replace('"attempt":1', '"attempt":2')),
        ("result_text", ANSWERED.replace('"other":true', '"other":false')),
        ("result_text", ANSWERED.replace('"no"]', '"nope"]')),
        ("result_text", ANSWERED.replace('"rejected":"maybe"', '"rejected":"maybe "')),
        ("status", "advanced"),
        ("node_after", "n_refund_method"),
        ("caller", "key:mallory"),
        ("created_at", MOMENT.replace(microsecond=0)),
        ("flow_hash", "cd" * 32),
        ("prev_hash", "cd" * 32),
        ("seq", 3),
        ("tool", "guide_back"),
    ],
)
def test_every_leaf_key_and_column_of_a_format_2_step_changes_its_hash(
    name: str, value: Any
) -> None:
    run, step = a_step()
    before = step_hash(step, run)

    setattr(step, name, value)

    assert step_hash(step, run) != before


def test_a_step_verifies_from_its_payload_digest_once_its_values_and_salt_are_gone() -> None:
    """What erasure will keep: each step's payload digest. The values and the salt go;
    the step's hash, and with it the path, statuses, times and callers, still verify."""
    run, step = a_step()
    stored = step_hash(step, run)
    kept = payload_digest(step.input, step.result, run.salt)

    step.input, step.result_text, run.salt = {}, "{}", ""

    assert digests_hash(step, run.public_id, kept) == stored
