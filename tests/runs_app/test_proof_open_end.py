"""The proof has no open end. Deleting the last seals and then a run they listed passed
``verify``, and records 8 minutes old were "not sealed yet", past the documented window:
what no seal covers past the sealing window is a failure, and so is a ledger whose end
is older than the window while later records exist. ``verify --since`` names a ledger
shorter than its heads, and ``verify`` covers the events a step wrote."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from events_app.models import Event, Subscription
from runs_app import ledger
from runs_app.erasure import run_erase
from runs_app.models import Run, Seal
from runs_app.verification import verify as check
from tests.runs_app.test_verify import call, seal_everything, verify, walked

pytestmark = [pytest.mark.django_db, pytest.mark.hostile]

LATER = timedelta(minutes=8)  # past the sealing window of the default settings (7 min)


def ledger_lines(problems: list[str]) -> list[str]:
    return [line for line in problems if line.startswith("ledger: ")]


def test_deleting_the_last_seals_and_a_run_they_listed_fails_verify() -> None:
    kept = walked(ref="T-1")
    seal_everything()
    deleted = walked(ref="T-2")
    seal_everything()
    Seal.objects.filter(seq=Seal.objects.order_by("-seq").values("seq")[:1]).delete()
    Run.objects.filter(public_id=deleted).delete()

    verdict = check(now=timezone.now() + LATER)

    [line] = ledger_lines(verdict.problems)
    assert line.startswith("ledger: it ends with seal 1, whose window ends at ")
    assert ", longer ago than the sealing window (7 min), and 0 runs and 3 audit records " in line
    assert line.endswith(
        "written before it are in no seal: seals are missing from its end, or no sealer runs"
    )
    assert not [p for p in verdict.problems if p.startswith(kept)]


def test_a_record_in_no_seal_is_not_sealed_yet_within_the_window_and_a_failure_past_it() -> None:
    walked()
    assert check().problems == [] and check().ledger.unsealed == 3
    [line] = ledger_lines(check(now=timezone.now() + LATER).problems)
    assert line.startswith(
        "ledger: it ends with no seal at all, longer ago than the sealing window"
    )
    assert "1 runs and 3 audit records written before it are in no seal" in line


def test_a_last_seal_older_than_the_window_with_later_records_fails() -> None:
    ledger.seal_all(now=timezone.now() - LATER, margin=0)  # the sealer stopped 8 min ago
    walked()  # what happened since is young, but no sealer will seal it

    [line] = ledger_lines(check().problems)

    assert line.startswith("ledger: it ends with seal 1, whose window ends at ")
    assert "and later records are in no seal" in line


def test_a_ledger_that_keeps_up_with_time_verifies() -> None:
    walked()
    seal_everything()
    walked(ref="T-2")
    assert check().problems == []


def test_without_a_sealer_what_no_seal_covers_is_a_note(settings: object) -> None:
    settings.GUIDEPOST_SEAL_INTERVAL = 0  # type: ignore[attr-defined]
    walked()
    verdict = check(now=timezone.now() + LATER)
    assert verdict.problems == []
    assert "ledger: serve does not seal (GUIDEPOST_SEAL_INTERVAL is 0)" in verdict.notes[0]


def test_verify_since_heads_names_a_ledger_shorter_than_the_heads(tmp_path: Path) -> None:
    walked()
    heads = tmp_path / "heads.json"
    assert verify("--heads", str(heads))[0]
    written = ledger.heads_read(heads)
    Seal.objects.filter(seq=written.seq).delete()

    ok, lines, _ = verify("--since", str(heads))

    assert not ok
    assert (
        f"ledger: it ends at seal {written.seq - 1}, shorter than the heads of "
        f"{written.written_at}, which name seal {written.seq}: seals were deleted from its end"
    ) in lines


# --- the events a step wrote ------------------------------------------------------------------


@pytest.fixture
def subscribed() -> None:
    Subscription.objects.create(
        url="https://hooks.example.com/", events=["run.stalled", "run.completed", "run.closed"]
    )


def stalled() -> tuple[str, Event]:
    run_id = str(call("guide_start", {"flow_id": "identity_check"})["run_id"])
    call("guide_answer", {"run_id": run_id, "choice": "__unknown__"})
    return run_id, Event.objects.get(data__run_id=run_id, kind="run.stalled")


def test_the_events_a_step_wrote_verify_as_they_were_written(subscribed: None) -> None:
    stalled()
    walked(close=True)
    assert Event.objects.count() == 2
    assert check().problems == []


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("reason", "the customer asked for a refund of 10,000", "its reason differs from step 2"),
        ("state", "completed", "its state differs from step 2"),
        ("node", "n_done", "its node differs from step 2"),
    ],
)
def test_an_event_edited_before_it_is_sent_is_named(
    subscribed: None, field: str, value: str, says: str
) -> None:
    run_id, event = stalled()
    event.data[field] = value
    Event.objects.filter(pk=event.pk).update(data=event.data)

    problems = check().problems

    assert f"{run_id}: event {event.message_id}: {says}" in problems


def test_an_event_moved_to_another_run_is_named(subscribed: None) -> None:
    _, event = stalled()
    event.data["run_id"] = "r_someone_else"
    Event.objects.filter(pk=event.pk).update(data=event.data)

    problems = check().problems

    assert f"event {event.message_id}: run.stalled of r_someone_else, which does not exist" in (
        problems
    )


def test_an_event_of_a_run_that_does_not_exist_or_at_no_steps_time_is_named(
    subscribed: None,
) -> None:
    run_id, event = stalled()
    Event.objects.filter(pk=event.pk).update(created_at=event.created_at - timedelta(seconds=1))
    forged = Event.objects.create(
        kind="run.completed", data={"run_id": "r_never_ran"}, created_at=timezone.now()
    )

    problems = check().problems

    assert f"event {event.message_id}: run.stalled at " in " ".join(problems)
    assert any(p.endswith(", no step's time") for p in problems)
    assert (
        f"event {forged.message_id}: run.completed of r_never_ran, which does not exist" in problems
    )


def test_an_erased_runs_events_keep_none_of_its_words(subscribed: None) -> None:
    run_id = walked(close=True)
    assert run_erase(run_id=run_id, reason="GDPR request", by="operator:test", keep_ref=False)
    assert check().problems == []
    event = Event.objects.get(data__run_id=run_id)
    Event.objects.filter(pk=event.pk).update(values={"order_number": "A00118"})

    said = f"{run_id}: event {event.message_id}: holds what the erased run's people said"
    assert said in check().problems
