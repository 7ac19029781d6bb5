"""Since when a run has waited for a person, read from its steps (``stalled_since``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from flowcore.run.results import stalled_since

T = [datetime(2026, 12, 7, 9, tzinfo=UTC) + timedelta(minutes=m) for m in range(6)]


@pytest.mark.parametrize(
    ("steps", "since"),
    [
        ([("guide_start", "advanced", ""), ("guide_answer", "stalled", "")], T[1]),
        ([("guide_start", "stalled", ""), ("adopt", "adopted", "")], T[0]),
        ([("guide_start", "stalled", ""), ("move", "moved", "stalled")], T[0]),
        ([("guide_start", "advanced", ""), ("move", "moved", "stalled")], T[1]),
        ([("guide_start", "stalled", ""), ("move", "moved", "active")], None),
        ([("guide_start", "stalled", ""), ("resolve", "stalled", "")], T[1]),
        ([("guide_start", "stalled", ""), ("resolve", "advanced", "")], None),
        ([("guide_start", "stalled", ""), ("guide_close", "closed", "")], None),
    ],
)
def test_the_wait_begins_with_the_step_that_stalled_the_run(
    steps: list[tuple[str, str, str]], since: datetime | None
) -> None:
    assert stalled_since((*step, T[i]) for i, step in enumerate(steps)) == since
