"""What a person reviewed is what goes live. Key beta's draft of a flow replaced key alpha's
while an operator was reviewing alpha's, and `approve FLOW_ID` published beta's text,
which nobody had read. Approval names the draft: its id, or its flow's id with the
revision its page shows; a draft replaced since is refused, and the page of the draft
that replaced another says when the other came from someone else."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from flows_app.models import Draft, FlowVersion
from flows_app.services import draft_create
from tests.support.drafting import REFUND, REFUND_CHANGE, REFUND_REWORDED, REFUND_TEXT

pytestmark = [pytest.mark.django_db, pytest.mark.hostile]


def submit(text: str, key: str) -> Draft:
    return draft_create(text=text, submitted_via="key", submitted_by=key).draft


def approve(*args: str) -> str:
    out = StringIO()
    call_command("approve", *args, "--as", "maria", "--break-tests", stdout=out)
    return out.getvalue()


@pytest.fixture
def replaced(live_flows: Path) -> tuple[Draft, Draft]:
    """Alpha's draft, under review, then beta's draft of the same flow, replacing it."""
    alpha = submit(REFUND_REWORDED, "alpha")
    beta = submit(REFUND_CHANGE, "beta")
    return alpha, beta


def test_a_flow_id_alone_publishes_nothing_and_names_the_pending_draft(
    replaced: tuple[Draft, Draft], live_flows: Path
) -> None:
    _, beta = replaced
    with pytest.raises(CommandError) as refused:
        approve(REFUND)
    assert str(refused.value) == (
        f"draft not named: {REFUND} names a flow, not the draft you reviewed: its pending draft "
        f"now is {beta.public_id}, revision {beta.revision}, submitted by beta (agent key). "
        f"Name the draft you reviewed: approve {beta.public_id}, or {REFUND} --revision with "
        "the revision its page shows."
    )
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT
    assert not FlowVersion.objects.filter(draft__isnull=False).exists()


def test_the_reviewed_revision_of_a_replaced_draft_is_refused_naming_the_new_one(
    replaced: tuple[Draft, Draft], live_flows: Path
) -> None:
    alpha, beta = replaced
    with pytest.raises(CommandError, match=r"^draft changed: ") as refused:
        approve(REFUND, "--revision", alpha.revision)
    assert f"draft {beta.public_id} of {REFUND} is revision {beta.revision}" in str(refused.value)
    assert f"not revision '{alpha.revision}'" in str(refused.value)
    with pytest.raises(CommandError, match=f"draft not pending: draft {alpha.public_id} was "):
        approve(alpha.public_id)
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT


def test_a_revision_too_short_to_tell_drafts_apart_is_refused(
    replaced: tuple[Draft, Draft],
) -> None:
    _, beta = replaced
    with pytest.raises(CommandError, match=r"^draft changed: "):
        approve(REFUND, "--revision", beta.revision[:5])


def test_the_draft_named_by_its_flow_and_revision_goes_live(
    replaced: tuple[Draft, Draft], live_flows: Path
) -> None:
    _, beta = replaced
    out = approve(REFUND, "--revision", beta.revision.upper())
    assert out.startswith(f"approved {beta.public_id}: {REFUND} is live")
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_CHANGE


def test_in_the_admin_approving_the_replaced_draft_is_refused_and_the_new_page_says_who(
    replaced: tuple[Draft, Draft], live_flows: Path, migrated_groups: None
) -> None:
    alpha, beta = replaced
    lead = User.objects.create_user("maria", is_staff=True)
    lead.groups.add(Group.objects.get(name="Support lead"))
    client = Client()
    client.force_login(lead)

    response = client.post(reverse("admin:flows_app_draft_approve", args=[alpha.pk]))

    texts = [str(m) for m in get_messages(response.wsgi_request)]
    assert any(f"superseded by a newer draft of {REFUND}" in text for text in texts), texts
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT
    html = client.get(reverse("admin:flows_app_draft_change", args=[beta.pk])).content.decode()
    assert f'id="draft-revision">{beta.revision}<' in html
    replaces = re.sub(r"<.*?>", "", re.search(r'class="gp-replaces">(.*?)</td>', html).group(1))
    assert replaces.startswith(f"{alpha.public_id} (")
    assert "by alpha (agent key)) — submitted by someone else" in replaces


def test_a_draft_replacing_its_own_authors_earlier_one_says_nothing_of_another(
    live_flows: Path, migrated_groups: None
) -> None:
    submit(REFUND_REWORDED, "alpha")
    again = submit(REFUND_CHANGE, "alpha")
    lead = User.objects.create_user("maria", is_staff=True)
    lead.groups.add(Group.objects.get(name="Support lead"))
    client = Client()
    client.force_login(lead)
    html = client.get(reverse("admin:flows_app_draft_change", args=[again.pk])).content.decode()
    assert 'class="gp-replaces"' in html and "someone else" not in html
