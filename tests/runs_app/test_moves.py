"""Moving runs onto the live version (spec §4, issue 23, ADR 0083), as transcripts: a run
started on one version, the flow file changed, a dry run, then the move; each run moves
only when its recorded inputs replay the same way on the live version, else it stays
with the first input that no longer fits; a moved run's chain, replay and ``verify`` stay
clean, and its agent is told the procedure changed.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from access_app.callers import Caller
from access_app.models import AuditRecord
from flowcore.flow.building import content_hash
from runs_app import agent_steps, moves, resolve, selectors
from runs_app.chain import steps_verify
from runs_app.models import Run, Step
from runs_app.verification import verify
from tests.support.commands import typed
from tests.support.drafting import FLOW_ON_STUCK, REFUND_REWORDED, edited

pytestmark = pytest.mark.django_db

AGENT = Caller(key="test:moves", name="pytest")
ORDER = {"order_number": "A00118"}
LEAD = "staff:maria"


@pytest.fixture
def live_flows(flows_copy: Path, settings: Any) -> Path:
    """The bundled flows as the live directory, read on every call (no poll interval)."""
    settings.GUIDEPOST_FLOWS_DIR = flows_copy
    settings.GUIDEPOST_FLOWS_POLL = 0
    return flows_copy


def publish(flows: Path, flow_id: str, text: str) -> str:
    """Make ``text`` the live version of ``flow_id``; its content hash."""
    (flows / f"{flow_id}.yaml").write_text(text, encoding="utf-8")
    return content_hash(text)


def text_of(flows: Path, flow_id: str) -> str:
    return (flows / f"{flow_id}.yaml").read_text(encoding="utf-8")


def start(flow_id: str = "refund_request", values: dict[str, str] | None = None) -> str:
    started = agent_steps.run_start(caller=AGENT, flow_id=flow_id, values=values, ref=None)
    return str(started["run_id"])


def answer(run_id: str, choice: str | None = None, **values: str) -> dict[str, Any]:
    return agent_steps.run_answer(
        caller=AGENT, run_id=run_id, choice=choice, values=values or None, at=None
    )


def move(flow_id: str = "refund_request", *runs: str, dry_run: bool = False) -> list[str]:
    return moves.runs_move(flow_id=flow_id, by=LEAD, run_ids=runs, dry_run=dry_run).lines()


def clean(run_id: str) -> None:
    verdict = verify([run_id])
    assert verdict.problems == []


# --- moves ------------------------------------------------------------------------------------


def test_a_dry_run_lists_where_each_run_would_wait_and_changes_nothing(live_flows: Path) -> None:
    run_id = start(values=ORDER)
    answer(run_id, "damaged")
    before = Run.objects.get(public_id=run_id)
    new = publish(live_flows, "refund_request", REFUND_REWORDED)

    lines = move(dry_run=True)

    assert lines == [
        f"{run_id} moves: waits at n_photos (replayed 1 answer)",
        f"1 run of refund_request on older versions: 1 would move to revision {new[:12]}, "
        "0 would stay (dry run: nothing changed)",
    ]
    after = Run.objects.get(public_id=run_id)
    assert (after.revision, after.flow_version_id) == (before.revision, before.flow_version_id)


def test_a_run_whose_answers_still_fit_moves_with_one_step_and_verifies(
    live_flows: Path,
) -> None:
    run_id = start(values=ORDER)
    answer(run_id, "damaged")
    old = Run.objects.get(public_id=run_id).flow_version.content_hash
    new = publish(live_flows, "refund_request", REFUND_REWORDED)

    lines = move()

    assert lines[0] == f"{run_id} moves: waits at n_photos (replayed 1 answer)"
    assert lines[1].endswith("1 moved to revision " + new[:12] + ", 0 stayed")
    run = Run.objects.get(public_id=run_id)
    assert (run.flow_version.content_hash, run.node, run.revision) == (new, "n_photos", 3)
    step = run.steps.get(seq=3)
    assert (step.tool, step.caller, step.input) == ("move", LEAD, {"from": old, "to": new})
    assert (step.status, step.node_before, step.node_after, step.flow_hash) == (
        "moved",
        "n_photos",
        "n_photos",
        new,
    )
    assert steps_verify(run) is None
    clean(run_id)
    assert AuditRecord.objects.filter(tool="move run", run_id=run_id, caller=LEAD).count() == 1


def test_the_agents_next_result_says_the_procedure_changed_and_verify_stays_clean(
    live_flows: Path,
) -> None:
    run_id = start(values=ORDER)
    answer(run_id, "damaged")
    old = Run.objects.get(public_id=run_id).flow_version.content_hash
    new = publish(live_flows, "refund_request", REFUND_REWORDED)
    move()

    status = selectors.run_status(caller=AGENT, run_id=run_id)
    assert status["next"].startswith("The procedure was changed while this run waited")
    assert f"revision {new[:12]} (it was on {old[:12]})" in status["next"]
    assert "it waits at n_photos" in status["next"]
    result = answer(run_id, "yes")
    assert result["next"].startswith("The procedure was changed while this run waited")
    assert result["node"]["id"] == "n_refund_method"
    later = answer(run_id, "original")
    assert not later["next"].startswith("The procedure was changed")
    assert Run.objects.get(public_id=run_id).moved_from == ""
    clean(run_id)


def test_back_after_a_move_reopens_on_the_live_version(live_flows: Path) -> None:
    run_id = start(values=ORDER)
    answer(run_id, "damaged")
    publish(live_flows, "refund_request", REFUND_REWORDED)
    move()

    back = agent_steps.run_back(caller=AGENT, run_id=run_id, to="n_reason")

    assert back["node"]["say"] == "Ask what went wrong with this order, in their own words"
    assert back["next"].startswith("The procedure was changed while this run waited")
    answer(run_id, "wrong_item")
    clean(run_id)


def test_a_run_stalled_on_the_old_version_moves_stalled_and_resumes_on_the_new_one(
    live_flows: Path,
) -> None:
    run_id = start(values=ORDER)
    stalled = answer(run_id, "__unknown__")
    assert stalled["status"] == "stalled"
    publish(live_flows, "refund_request", REFUND_REWORDED)

    assert move()[0] == f"{run_id} moves: waits at n_reason for a person (replayed 1 answer)"

    run = Run.objects.get(public_id=run_id)
    assert (run.state, run.node) == (Run.State.STALLED, "n_reason")
    reopened = agent_steps.run_back(caller=AGENT, run_id=run_id, to="n_reason")
    assert reopened["node"]["say"].startswith("Ask what went wrong")
    assert answer(run_id, "changed_mind")["node"]["id"] == "n_within_window"
    clean(run_id)


def test_a_person_resolves_a_moved_stalled_run_and_a_resolve_replays_in_a_move(
    live_flows: Path,
) -> None:
    """Resolving and moves together: a stalled run moved can still be resolved on the new
    version, and a resolve step is one of the inputs a move replays."""
    from django.contrib.auth.models import Permission, User

    from access_app import guards

    user = User.objects.create_user("maria", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["resolve_run", "view_run"]))
    person = guards.authenticate_person(user)
    answered, moved = start(values=ORDER), start(values=ORDER)
    for run_id in (answered, moved):
        assert answer(run_id, "__unknown__")["status"] == "stalled"
    resolve.run_resolve(
        caller=person, run_id=answered, choice="damaged", values=None, note="Seen the photo."
    )
    publish(live_flows, "refund_request", REFUND_REWORDED)

    lines = move()

    assert f"{answered} moves: waits at n_photos (replayed 2 answers)" in lines
    assert f"{moved} moves: waits at n_reason for a person (replayed 1 answer)" in lines
    result = resolve.run_resolve(
        caller=person, run_id=moved, choice="changed_mind", values=None, note="Asked again."
    )
    assert result["node"]["id"] == "n_within_window"
    clean(answered)
    clean(moved)


def test_a_collect_run_moves_when_its_slot_values_still_fit(live_flows: Path) -> None:
    run_id = start()
    assert answer(run_id, order_number="X1")["status"] == "unmatched"
    answer(run_id, order_number="A00042")
    new_slot = edited(
        text_of(live_flows, "refund_request"),
        {
            "      order_email: Ask which email": (
                "      order_phone: Ask for the phone number on the order, if they have it\n"
                "      order_email: Ask which email"
            )
        },
    )
    publish(live_flows, "refund_request", new_slot)

    assert move()[0] == f"{run_id} moves: waits at n_reason (replayed 2 answers)"
    clean(run_id)


def test_a_folded_run_moves_when_the_fold_still_folds(live_flows: Path) -> None:
    run_id = start("payment_failed")
    answer(run_id, "E01")
    assert answer(run_id, "__unknown__")["status"] == "branched"
    text = text_of(live_flows, "payment_failed")
    publish(live_flows, "payment_failed", text + "\n# reviewed\n")

    [line, _] = move("payment_failed")

    assert line == f"{run_id} moves: waits at n_retry (replayed 2 answers)"
    clean(run_id)


# --- stays, with the first input that no longer fits --------------------------------------------


def test_a_run_stays_when_an_answer_is_no_longer_a_label(live_flows: Path) -> None:
    run_id = start(values=ORDER)
    answer(run_id, "wrong_item")  # waits at n_refund_method
    kept = start(values=ORDER)
    answer(kept, "damaged")  # waits at n_photos, past the label that changes
    renamed = edited(
        text_of(live_flows, "refund_request"),
        {
            "      wrong_item: They received": "      wrong_product: They received",
            "      wrong_item: n_return_label": "      wrong_product: n_return_label",
        },
    )
    publish(live_flows, "refund_request", renamed)

    lines = move(dry_run=True)

    assert f"{run_id} stays: answer 'wrong_item' at n_reason is no longer a label" in lines
    assert f"{kept} moves: waits at n_photos (replayed 1 answer)" in lines
    assert lines[-1].startswith("2 runs of refund_request on older versions: 1 would move")
    move()
    assert Run.objects.get(public_id=run_id).revision == 2  # untouched
    assert Run.objects.get(public_id=kept).revision == 3


def test_a_run_stays_when_a_slot_value_no_longer_fits_its_pattern(live_flows: Path) -> None:
    run_id = start(values=ORDER)
    stricter = edited(text_of(live_flows, "refund_request"), {'"A[0-9]{5}"': '"B[0-9]{5}"'})
    publish(live_flows, "refund_request", stricter)

    assert move(dry_run=True)[0] == (
        f"{run_id} stays: the start's values now end unmatched at n_order (they ended advanced)"
    )


def test_a_run_stays_when_the_live_version_asks_something_else_before_its_answer(
    live_flows: Path,
) -> None:
    run_id = start(values=ORDER)
    answer(run_id, "damaged")
    asked_first = edited(
        text_of(live_flows, "refund_request"),
        {
            "    next: n_reason\n": "    next: n_channel\n\n"
            "  - id: n_channel\n    kind: ask\n    say: Ask where they bought it\n"
            "    accepts:\n      web: On the web shop\n      store: In a store\n"
            "    next:\n      web: n_reason\n      store: n_reason\n",
        },
    )
    publish(live_flows, "refund_request", asked_first)

    assert move(dry_run=True)[0] == (
        f"{run_id} stays: answer 'damaged' at n_reason: on the live version it waits at "
        "n_channel there"
    )


def test_a_folded_run_stays_when_the_node_no_longer_folds(live_flows: Path) -> None:
    run_id = start("payment_failed")
    answer(run_id, "E01")
    answer(run_id, "__unknown__")
    narrow = edited(
        text_of(live_flows, "payment_failed"),
        {"max_branch_fanout: 3 ": "max_branch_fanout: 2 "},
    )
    publish(live_flows, "payment_failed", narrow)

    assert move("payment_failed", dry_run=True)[0] == (
        f"{run_id} stays: answer '__unknown__' at n_card_age is now stalled (it was branched)"
    )


def test_a_run_stays_when_a_guarantee_would_not_hold_on_its_path(live_flows: Path) -> None:
    run_id = start(values=ORDER)
    answer(run_id, "changed_mind")  # waits at n_within_window, then n_unused
    # Without the flow's own on_stuck, a stall at n_unused (which has none of its own)
    # hands over with the generic text: the live tests' last guarantee breaks on its path.
    publish(
        live_flows,
        "refund_request",
        edited(text_of(live_flows, "refund_request"), {FLOW_ON_STUCK: ""}),
    )

    [line, _] = move(dry_run=True)

    assert line == (
        f"{run_id} stays: guarantee \"every stall hands over with the refunds team's own "
        'text" would not hold on its path: the stall at n_unused hands over with the generic '
        "text: neither n_unused nor the flow sets on_stuck"
    )


def test_chosen_runs_move_alone_and_others_are_named_with_why_they_cannot(
    live_flows: Path,
) -> None:
    one, two = start(values=ORDER), start(values=ORDER)
    publish(live_flows, "refund_request", REFUND_REWORDED)
    fresh = start(values=ORDER)

    lines = move("refund_request", one, fresh, "r_nope")

    assert lines[:3] == [
        f"{one} moves: waits at n_reason (replayed 0 answers)",
        f"{fresh} stays: it is on the live version already",
        "r_nope stays: no such run",
    ]
    assert Run.objects.get(public_id=two).revision == 1


def test_the_migrate_command_prints_the_dry_run_and_refuses_an_unknown_flow(
    live_flows: Path,
) -> None:
    run_id = start(values=ORDER)
    publish(live_flows, "refund_request", REFUND_REWORDED)
    out = io.StringIO()

    call_command("moveruns", "refund_request", "--dry-run", "--as", "maria", stdout=out)

    assert (
        out.getvalue().splitlines()[0] == f"{run_id} moves: waits at n_reason (replayed 0 answers)"
    )
    with pytest.raises(CommandError, match="flow not found"):
        call_command("moveruns", "refund_requets", "--as", "maria", stdout=io.StringIO())


def test_guidepost_mcp_migrate_dry_run_writes_nothing(live_flows: Path) -> None:
    """As an operator types it: the dry run says what would move, and no run, step or
    audit record changes."""
    run_id = start(values=ORDER)
    answer(run_id, "damaged")
    publish(live_flows, "refund_request", REFUND_REWORDED)
    before = list(Run.objects.values().order_by("pk"))
    steps, records = Step.objects.count(), AuditRecord.objects.count()

    lines = typed("migrate", "refund_request", "--dry-run", "--as", "maria").splitlines()

    assert list(Run.objects.values().order_by("pk")) == before
    assert (Step.objects.count(), AuditRecord.objects.count()) == (steps, records)
    assert lines[0] == f"{run_id} moves: waits at n_photos (replayed 1 answer)"
    assert lines[-1].endswith("0 would stay (dry run: nothing changed)")


def test_the_run_page_shows_the_move_on_its_timeline_and_draws_the_new_version(
    live_flows: Path, ops_client: Any
) -> None:
    run_id = start(values=ORDER)
    answer(run_id, "damaged")
    new = publish(live_flows, "refund_request", REFUND_REWORDED)
    move()

    page = ops_client.get(f"/r/{run_id}").content.decode()

    assert "moved from revision " in page
    assert f"to {new[:12]}; waits at n_photos (by {LEAD})" in page
    assert f"· {new[:12]}</span>" in page


def test_a_flow_without_runs_on_older_versions_has_nothing_to_move(live_flows: Path) -> None:
    start(values=ORDER)

    assert move(dry_run=True) == [
        "no active or stalled run of refund_request is on an older version"
    ]
