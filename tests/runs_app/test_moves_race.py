"""A run answered while it is being moved (issue 23, ADR 0083): it moves with that answer
or not at all, never half. The move decides each run under the same lock as the step
services, from its steps as they are then; the hook of ``test_concurrency`` makes the
answer commit at the exact moment the move has read the runs but not locked one (and the
other way round), on SQLite and on PostgreSQL alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runs_app import agent_steps, moves
from runs_app.models import Run
from runs_app.verification import verify
from tests.runs_app.test_concurrency import CALLER, ORDER, assert_chain, overtaken_before_the_lock
from tests.runs_app.test_moves import publish, text_of
from tests.support.drafting import REFUND_REWORDED, edited

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def live_flows(flows_copy: Path, settings: Any) -> Path:
    settings.GUIDEPOST_FLOWS_DIR = flows_copy
    settings.GUIDEPOST_FLOWS_POLL = 0
    return flows_copy


def at_photos() -> str:
    """A run waiting at n_photos (order given in advance, answered ``damaged``)."""
    started = agent_steps.run_start(caller=CALLER, flow_id="refund_request", values=ORDER, ref=None)
    run_id = str(started["run_id"])
    agent_steps.run_answer(caller=CALLER, run_id=run_id, choice="damaged", values=None, at=None)
    return run_id


def answer_yes(run_id: str) -> dict[str, Any]:
    return agent_steps.run_answer(caller=CALLER, run_id=run_id, choice="yes", values=None, at=None)


def move_all() -> list[str]:
    return moves.runs_move(flow_id="refund_request", by="staff:maria").lines()


def test_an_answer_that_commits_before_the_move_locks_the_run_moves_with_it(
    live_flows: Path,
) -> None:
    run_id = at_photos()
    new = publish(live_flows, "refund_request", REFUND_REWORDED)

    with overtaken_before_the_lock(lambda: answer_yes(run_id)):
        lines = move_all()

    assert lines[0] == f"{run_id} moves: waits at n_refund_method (replayed 2 answers)"
    run = Run.objects.get(public_id=run_id)
    assert (run.flow_version.content_hash, run.node) == (new, "n_refund_method")
    assert assert_chain(run) == [1, 2, 3, 4]
    assert list(run.steps.order_by("seq").values_list("tool", flat=True))[2:] == [
        "guide_answer",
        "move",
    ]
    assert verify([run_id]).problems == []


def test_an_answer_that_no_longer_fits_and_commits_first_keeps_the_run_where_it_is(
    live_flows: Path,
) -> None:
    run_id = at_photos()
    old = Run.objects.get(public_id=run_id).flow_version.content_hash
    no_yes = edited(
        text_of(live_flows, "refund_request"),
        {
            '      "yes": They can take': "      have_photo: They can take",
            '      "yes": n_photo_upload': "      have_photo: n_photo_upload",
        },
    )
    publish(live_flows, "refund_request", no_yes)

    with overtaken_before_the_lock(lambda: answer_yes(run_id)):
        lines = move_all()

    assert lines[0] == f"{run_id} stays: answer 'yes' at n_photos is no longer a label"
    run = Run.objects.get(public_id=run_id)
    assert (run.flow_version.content_hash, run.node) == (old, "n_refund_method")
    assert assert_chain(run) == [1, 2, 3]
    assert verify([run_id]).problems == []


def test_an_answer_that_reaches_the_lock_after_the_move_applies_to_the_moved_run(
    live_flows: Path,
) -> None:
    run_id = at_photos()
    new = publish(live_flows, "refund_request", REFUND_REWORDED)

    with overtaken_before_the_lock(lambda: {"lines": move_all()}):
        result = answer_yes(run_id)

    assert result["node"]["id"] == "n_refund_method"
    assert result["next"].startswith("The procedure was changed while this run waited")
    run = Run.objects.get(public_id=run_id)
    assert run.flow_version.content_hash == new
    assert list(run.steps.order_by("seq").values_list("tool", flat=True))[2:] == [
        "move",
        "guide_answer",
    ]
    assert assert_chain(run) == [1, 2, 3, 4]
    assert verify([run_id]).problems == []
