"""How the chain module shows a step's time to clients."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

from runs_app.chain import iso


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
