"""``drafts``, ``approve``, ``discard`` and ``draft``: the review from a shell, over the same
services as the admin. In process through call_command, and once as real processes."""

from __future__ import annotations

import getpass
import os
import subprocess
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from flowcore.flow.building import content_hash
from flowcore.flow.files import load_catalog
from flows_app.models import Draft, FlowVersion
from flows_app.services import draft_create
from tests.support import forks
from tests.support.drafting import (
    BROKEN_GUARANTEE,
    BROKEN_SCENARIO,
    REFUND,
    REFUND_CHANGE,
    REFUND_CHANGE_WITHOUT_HANDOVER,
    REFUND_REWORDED,
    REFUND_TEXT,
    add_broken_scenario_copy,
    edited,
    new_flow,
)
from tests.support.servers import fresh_database

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def submit(text: str) -> Draft:
    return draft_create(text=text, submitted_via="key", submitted_by="anon:127.0.0.1:agent").draft


def test_drafts_lists_pending_drafts_oldest_first_with_lint_status(live_flows: Path) -> None:
    change = submit(REFUND_CHANGE)
    broken = submit(new_flow("gift_card", target="n_nowhere"))
    discarded = submit(new_flow("loyalty_points"))
    call_command("discard", "loyalty_points", "--reason", "no", stdout=StringIO())
    lines = run("drafts").splitlines()
    assert lines[-1] == "2 pending drafts"
    assert lines[0].startswith(
        f"{change.public_id}  {REFUND}  change  ok  by anonymous (127.0.0.1, agent)"
    )
    assert lines[1].startswith(f"{broken.public_id}  gift_card  new flow  2 errors  ")
    assert discarded.public_id not in "".join(lines)


@pytest.mark.parametrize("by", ["flow and revision", "draft"])
def test_approve_by_draft_id_or_flow_id_and_revision_publishes_and_records_the_approver(
    live_flows: Path, by: str
) -> None:
    draft = submit(REFUND_REWORDED)
    named = ["--revision", draft.revision[:6]] if by == "flow and revision" else []
    out = run("approve", REFUND if named else draft.public_id, *named, "--as", "maria")
    assert out.startswith(
        f"approved {draft.public_id}: {REFUND} is live, version 2024.4, revision "
        f"{content_hash(REFUND_REWORDED)[:12]} (approved by maria)"
    )
    assert out.count("\n") == 1  # nothing broke, nothing more to say
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_REWORDED
    assert FlowVersion.objects.get(draft=draft).approved_by == "maria"


def test_approve_records_the_operating_system_user_by_default(live_flows: Path) -> None:
    draft = submit(REFUND_REWORDED)
    run("approve", draft.public_id)
    assert Draft.objects.get(pk=draft.pk).decided_by == getpass.getuser()


def test_approve_of_a_draft_that_breaks_tests_fails_and_prints_what_breaks(
    live_flows: Path,
) -> None:
    draft = submit(REFUND_CHANGE_WITHOUT_HANDOVER)
    err = StringIO()
    with pytest.raises(CommandError) as refused:
        call_command("approve", draft.public_id, "--as", "maria", stdout=StringIO(), stderr=err)
    assert str(refused.value).startswith(
        f"draft breaks tests: against tests/{REFUND}.yaml, the draft fails 1 of 17 scenarios "
        f"({BROKEN_SCENARIO!r}) and breaks 1 of 5 guarantees ({BROKEN_GUARANTEE!r}). "
    )
    assert "approve --break-tests" in str(refused.value)
    printed = err.getvalue().splitlines()
    assert printed[0].startswith(f"FAIL {REFUND} › {BROKEN_SCENARIO} › call 1: answer: price")
    assert "    node: expected n_agent_review, got n_price_match" in printed
    assert any(f"guarantee {BROKEN_GUARANTEE!r}" in line for line in printed)
    assert any(line.strip().startswith("n_order  stalled (escalate)") for line in printed)
    assert Draft.objects.get(pk=draft.pk).status == "pending"
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT


def test_approve_quotes_each_broken_scenario_whole_even_with_commas_in_its_name(
    live_flows: Path,
) -> None:
    commas = "price dropped, late, store credit"
    add_broken_scenario_copy(live_flows / "tests" / f"{REFUND}.yaml", commas)
    draft = submit(REFUND_CHANGE)
    with pytest.raises(CommandError) as refused:
        call_command(
            "approve", draft.public_id, "--as", "maria", stdout=StringIO(), stderr=StringIO()
        )
    assert f"the draft fails 2 of 18 scenarios ({BROKEN_SCENARIO!r}, {commas!r})" in str(
        refused.value
    )
    assert "late and store credit" not in str(refused.value)


def test_approve_with_break_tests_publishes_and_records_the_confirmation(
    live_flows: Path,
) -> None:
    draft = submit(REFUND_CHANGE)
    out = run("approve", draft.public_id, "--break-tests", "--as", "maria").splitlines()
    assert out[0].startswith(f"approved {draft.public_id}: {REFUND} is live, version 2024.4, ")
    assert out[1] == (
        f"the draft fails 1 of 17 scenarios ({BROKEN_SCENARIO!r}) (confirmed with --break-tests, "
        f"recorded); tests/{REFUND}.yaml stays as it is: update it in a later change"
    )
    stored = Draft.objects.get(pk=draft.pk)
    assert (stored.status, stored.broken_tests_confirmed) == ("approved", True)
    assert stored.tests_at_approval["summary"]["failed_scenarios"] == [BROKEN_SCENARIO]
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_CHANGE


def test_approve_of_a_draft_with_errors_fails_and_names_them(live_flows: Path) -> None:
    draft = submit(
        edited(REFUND_CHANGE, {"      lost: n_refund_method\n": "      lost: n_nowhere\n"})
    )
    with pytest.raises(CommandError, match="draft has lint errors: 1 lint error: error bad_target"):
        run("approve", draft.public_id, "--as", "maria")
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT


def test_approve_of_a_draft_named_categories_fails_and_leaves_categories_yaml(
    live_flows: Path,
) -> None:
    categories = (live_flows / "categories.yaml").read_bytes()
    draft = submit(new_flow("categories"))
    with pytest.raises(
        CommandError, match="draft has lint errors: 1 lint error: error schema categories: flow id"
    ):
        run("approve", draft.public_id, "--as", "maria")
    assert (live_flows / "categories.yaml").read_bytes() == categories
    assert load_catalog(live_flows).errors == ()


def test_approve_of_an_unknown_reference_offers_the_closest_pending_ones(live_flows: Path) -> None:
    submit(REFUND_CHANGE)
    with pytest.raises(CommandError, match="draft not found: no draft has id 'refund_reqest'"):
        run("approve", "refund_reqest", "--as", "maria")


def test_discard_keeps_the_reason_and_a_second_decision_fails(live_flows: Path) -> None:
    draft = submit(REFUND_CHANGE)
    assert run("discard", draft.public_id, "--reason", "duplicate", "--as", "maria") == (
        f"discarded {draft.public_id} ({REFUND}) by maria\n"
    )
    stored = Draft.objects.get(pk=draft.pk)
    assert (stored.status, stored.decision_reason) == ("discarded", "duplicate")
    with pytest.raises(CommandError, match="draft not pending"):
        run("approve", draft.public_id, "--as", "maria")


def test_draft_submits_a_file_as_a_person_and_repeats_are_not_stored(
    live_flows: Path, tmp_path: Path
) -> None:
    path = tmp_path / "refund_request.yaml"
    path.write_text(REFUND_CHANGE, encoding="utf-8")
    first = run("draft", str(path), "--as", "maria")
    draft = Draft.objects.get()
    assert first.splitlines()[-1] == f"{draft.public_id} ({REFUND}) stored for review"
    assert (draft.submitted_via, draft.submitted_by) == ("cli", "maria")
    again = run("draft", str(path), "--as", "maria")
    assert again.splitlines()[-1] == f"{draft.public_id} ({REFUND}) already waits for review"
    assert Draft.objects.count() == 1


def test_draft_of_a_file_without_an_id_fails_and_stores_nothing(
    live_flows: Path, tmp_path: Path
) -> None:
    path = tmp_path / "nameless.yaml"
    path.write_text("title: 名前のない手順\n", encoding="utf-8")
    with pytest.raises(CommandError, match="draft refused: the flow has no 'id'"):
        run("draft", str(path))
    assert not Draft.objects.exists()


@pytest.mark.slow
def test_the_console_script_submits_lists_and_approves_against_its_flows_directory(
    flows_copy: Path, tmp_path: Path
) -> None:
    path = tmp_path / "gift_card.yaml"
    path.write_text(new_flow("gift_card"), encoding="utf-8")
    with fresh_database(tmp_path) as database_url:
        env = {**os.environ, "DATABASE_URL": database_url, "PYTHONIOENCODING": "utf-8"}

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return forks.run(["-m", "guidepost.cli", *args], env=env)

        migrated = forks.run(["manage.py", "migrate", "-v", "0"], env=env)
        assert migrated.returncode == 0, migrated.stderr
        submitted = cli("draft", str(path), "--flows", str(flows_copy), "--as", "maria")
        assert submitted.returncode == 0, submitted.stderr
        listed = cli("drafts", "--flows", str(flows_copy))
        assert "gift_card  new flow  ok  by maria (command line)" in listed.stdout, listed.stderr
        draft_id = submitted.stdout.splitlines()[-1].split()[0]
        approved = cli("approve", draft_id, "--flows", str(flows_copy), "--as", "maria")
        assert approved.returncode == 0, approved.stderr
        assert "gift_card" in load_catalog(flows_copy).flows
        again = cli("approve", "gift_card", "--flows", str(flows_copy), "--as", "maria")
        assert again.returncode == 1
        assert "draft not found: flow 'gift_card' has no pending draft" in again.stderr
