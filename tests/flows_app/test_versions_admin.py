"""Versions in flight (issue 23): a flow's history in the admin lists every revision with
its approvals and its runs by state; "make this version live again" (and ``guidepost-mcp
restore``) creates a draft of that revision's text, with the reason, for the same review
and approval as any change (ADR 0084); any two revisions compare; the runs on older
revisions move to the live one from the admin, dry run first (ADR 0083).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from access_app.callers import Caller
from access_app.models import AuditRecord
from flowcore.flow.building import content_hash
from flows_app.catalog import current_catalog
from flows_app.models import Draft, FlowVersion
from flows_app.services import draft_approve, draft_create
from runs_app import agent_steps
from runs_app.models import Run
from tests.flows_app.test_review_admin import client_for, lead, messages_of, reader
from tests.support.commands import typed
from tests.support.drafting import REFUND, REFUND_REWORDED, REFUND_TEXT, edited

pytestmark = pytest.mark.django_db

__all__ = ["lead", "reader"]  # fixtures
AGENT = Caller(key="test:versions", name="pytest")
ORDER = {"order_number": "A00118"}


def history(flow_id: str = REFUND) -> str:
    return reverse("admin:flows_app_liveflow_history", args=[flow_id])


def start() -> str:
    started = agent_steps.run_start(caller=AGENT, flow_id=REFUND, values=ORDER, ref=None)
    return str(started["run_id"])


def reworded_live(live_flows: Path) -> tuple[str, str]:
    """A run on the bundled text, then REFUND_REWORDED approved by maria: (old, new) hashes."""
    start()
    draft = draft_create(text=REFUND_REWORDED, submitted_via="key", submitted_by="key:bot").draft
    draft_approve(draft=draft, approved_by="maria", confirm_broken_tests=True)
    return content_hash(REFUND_TEXT), content_hash(REFUND_REWORDED)


def test_the_history_lists_each_revision_with_its_approvals_and_runs_by_state(
    live_flows: Path, lead: User
) -> None:
    old, new = reworded_live(live_flows)
    start()
    Run.objects.filter(flow_version__content_hash=old).update(state=Run.State.STALLED)

    live = client_for(lead).get("/admin/flows_app/liveflow/").content.decode()
    assert f'<a href="{history()}">history</a>' in live
    html = client_for(lead).get(history()).content.decode()

    new_row = html[html.index(f'id="rev-{new[:12]}"') :]
    new_row = new_row[: new_row.index("</tr>")]
    old_row = html[html.index(f'id="rev-{old[:12]}"') :]
    old_row = old_row[: old_row.index("</tr>")]
    assert "<strong>live</strong>" in new_row and "by maria" in new_row
    assert "2024.4" in new_row and "no review on record" in old_row
    cells = lambda row: [c for c in row.split('<td class="num">')[1:]]  # noqa: E731
    assert [c[: c.index("<")] for c in cells(new_row)] == ["1", "0", "0", "0"]
    assert [c[: c.index("<")] for c in cells(old_row)] == ["0", "1", "0", "0"]
    assert "Make this version live again" in old_row
    assert "Make this version live again" not in new_row
    assert "1 active or stalled run of refund_request is on a revision that is not live" in html


def test_a_reader_sees_the_history_without_restore_or_move(live_flows: Path, reader: User) -> None:
    reworded_live(live_flows)

    html = client_for(reader).get(history()).content.decode()

    assert "Make this version live again" not in html
    assert "Move them to the live version" not in html
    restore = reverse("admin:flows_app_liveflow_restore", args=[REFUND])
    assert client_for(reader).post(restore, {"version": "1", "reason": "x"}).status_code == 403
    migrate = reverse("admin:runs_app_run_migrate", args=[REFUND])
    assert client_for(reader).get(migrate).status_code == 403


def test_make_this_version_live_again_submits_its_text_for_the_same_review(
    live_flows: Path, lead: User
) -> None:
    old, _ = reworded_live(live_flows)
    version = FlowVersion.objects.get(content_hash=old)
    client = client_for(lead, csrf=False)

    response = client.post(
        reverse("admin:flows_app_liveflow_restore", args=[REFUND]),
        {"version": str(version.pk), "reason": "the new wording confuses agents"},
    )

    draft = Draft.objects.get(status=Draft.Status.PENDING)
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:flows_app_draft_change", args=[draft.pk])
    assert (draft.yaml, draft.restores_id, draft.restore_reason) == (
        REFUND_TEXT,
        version.pk,
        "the new wording confuses agents",
    )
    assert (draft.submitted_via, draft.submitted_by) == ("user", "maria")
    page = client.get(response["Location"]).content.decode()
    assert 'id="draft-restores"' in page and "the new wording confuses agents" in page
    assert "Approve" in page
    # Rolling back is an approval like any other.
    draft_approve(draft=draft, approved_by="maria")
    assert current_catalog().flows[REFUND].content_hash == old
    html = client.get(history()).content.decode()
    row = html[html.index(f'id="rev-{old[:12]}"') :]
    assert "(a restore)" in row[: row.index("</tr>")]


def test_restoring_needs_a_reason_and_refuses_the_live_revision(
    live_flows: Path, lead: User
) -> None:
    old, new = reworded_live(live_flows)
    client = client_for(lead)
    restore = reverse("admin:flows_app_liveflow_restore", args=[REFUND])
    live = FlowVersion.objects.get(content_hash=new)

    no_reason = client.post(restore, {"version": str(live.pk), "reason": " "})
    is_live = client.post(restore, {"version": str(live.pk), "reason": "why not"})

    assert [m for _, m in messages_of(no_reason)][0].startswith("reason required")
    assert [m for _, m in messages_of(is_live)][-1].startswith("version already live")
    assert not Draft.objects.filter(status=Draft.Status.PENDING).exists()


def test_the_restore_command_names_a_version_by_revision_or_version_value(
    live_flows: Path,
) -> None:
    old, _ = reworded_live(live_flows)
    out = io.StringIO()

    call_command(
        "restore",
        REFUND,
        "2024.3",
        "--reason",
        "back to the old words",
        "--as",
        "maria",
        stdout=out,
    )

    draft = Draft.objects.get(status=Draft.Status.PENDING)
    assert out.getvalue().startswith(
        f"stored {draft.public_id}: refund_request back to version 2024.3"
    )
    assert draft.restores is not None and draft.restores.content_hash == old
    again = io.StringIO()
    call_command(
        "restore", REFUND, old[:8], "--reason", "same, by revision", "--as", "maria", stdout=again
    )
    assert "Nothing" not in again.getvalue()
    with pytest.raises(CommandError, match="version not found: no revision of refund_request"):
        call_command("restore", REFUND, "1999.1", "--reason", "x", "--as", "maria")


def test_restore_by_a_version_two_revisions_share_refuses_and_names_both(
    live_flows: Path,
) -> None:
    """New wording saved in the flows directory without a new version (approval refuses
    that, an edited file does not): "2024.3" names two revisions, and the command restores
    neither, naming both."""
    start()  # the bundled text, version 2024.3, recorded as a revision
    reworded = edited(REFUND_REWORDED, {'version: "2024.4"': 'version: "2024.3"'})
    (live_flows / f"{REFUND}.yaml").write_text(reworded, encoding="utf-8")
    start()  # the edited text, recorded as a revision of its own
    revisions = {v.revision for v in FlowVersion.objects.filter(flow_id=REFUND)}
    assert len(revisions) == 2

    with pytest.raises(CommandError) as refused:
        typed("restore", REFUND, "2024.3", "--reason", "back to the old words", "--as", "maria")

    message = str(refused.value)
    assert message.startswith(
        "version not found: 2 revisions of refund_request have version '2024.3': name one "
        "by its revision."
    )
    assert all(revision in message for revision in revisions), message
    assert not Draft.objects.filter(status=Draft.Status.PENDING).exists()


def test_any_two_revisions_compare_with_what_changes_for_agents_and_the_lines(
    live_flows: Path, reader: User
) -> None:
    old, new = reworded_live(live_flows)
    a, b = (FlowVersion.objects.get(content_hash=h).pk for h in (old, new))

    html = (
        client_for(reader)
        .get(reverse("admin:flows_app_liveflow_diff", args=[REFUND]), {"a": a, "b": b})
        .content.decode()
    )

    assert "From version 2024.3" in html and "to version 2024.4" in html
    changes = html[html.index('id="changes"') : html.index("<h3>Lines</h3>")]
    assert "n_reason" in changes
    assert "Ask what went wrong with this order" in html
    missing = client_for(reader).get(
        reverse("admin:flows_app_liveflow_diff", args=[REFUND]), {"a": a, "b": "999999"}
    )
    assert missing.status_code == 404


def test_the_admin_moves_runs_after_a_dry_run_and_audits_each(live_flows: Path, lead: User) -> None:
    old, new = reworded_live(live_flows)
    run_id = Run.objects.get(flow_version__content_hash=old).public_id
    page = reverse("admin:runs_app_run_migrate", args=[REFUND])
    client = client_for(lead)

    dry = client.get(page).content.decode()

    assert f"{run_id} moves: waits at n_reason (replayed 0 answers)" in dry
    assert "(dry run: nothing changed)" in dry
    assert Run.objects.get(public_id=run_id).flow_version.content_hash == old
    done = client.post(page, {"run": [run_id]})
    assert done.status_code == 200
    assert Run.objects.get(public_id=run_id).flow_version.content_hash == new
    assert f"{run_id} moves: waits at n_reason" in done.content.decode()
    assert AuditRecord.objects.filter(tool="move run", run_id=run_id, caller="staff:maria").exists()
