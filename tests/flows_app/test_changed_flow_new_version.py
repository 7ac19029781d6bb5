"""A changed flow cannot keep its version: lint says so when the draft comes in
(``unchanged_version``), the draft page shows it beside the ``version`` line with Approve
disabled, and approval refuses it in the admin and from the shell, also when the live
flow took the draft's version after it came in."""

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

from access_app.callers import Transport
from flows_app.models import Draft
from flows_app.services import draft_create
from guidepost.mcp.dispatch import dispatch
from tests.support.drafting import REFUND, REFUND_REWORDED, REFUND_TEXT, edited

pytestmark = pytest.mark.django_db

# New wording under the live flow's own version, 2024.3.
KEPT_VERSION = edited(
    REFUND_TEXT,
    {"say: Ask why they want a refund for this order": "say: Ask what went wrong, in their words"},
)
VERSION_LINE = REFUND_TEXT.splitlines().index('version: "2024.3"') + 1
SAID = (
    f"the live flow {REFUND} is version 2024.3 and this draft changes it under the same "
    "version, so runs and the flow's history could not tell the two apart: set version: "
    "2024.4 (or any version other than 2024.3)"
)


def submit(text: str) -> Draft:
    return draft_create(text=text, submitted_via="key", submitted_by="anon:127.0.0.1:agent").draft


@pytest.fixture
def lead(migrated_groups: None) -> Client:
    user = User.objects.create_user("maria", is_staff=True)
    user.groups.add(Group.objects.get(name="Support lead"))
    client = Client()
    client.force_login(user)
    return client


def test_a_draft_that_keeps_the_live_version_is_told_so_when_it_comes_in(
    live_flows: Path,
) -> None:
    draft = submit(KEPT_VERSION)
    assert draft.ok is False
    assert draft.findings == [
        {
            "level": "error",
            "code": "unchanged_version",
            "where": REFUND,
            "message": SAID,
            "line": VERSION_LINE,
        }
    ]


def test_an_agent_is_told_by_guide_draft_to_set_a_new_version(live_flows: Path) -> None:
    result = dispatch("guide_draft", {"yaml": KEPT_VERSION}, Transport(peer="127.0.0.1"))
    assert not result.is_error, result.payload
    assert result.payload["ok"] is False
    assert [f["code"] for f in result.payload["findings"]] == ["unchanged_version"]
    assert result.payload["findings"][0]["message"] == SAID
    assert result.payload["next"].startswith("Stored, but it has lint errors: fix every error")


def test_the_draft_page_shows_it_beside_the_version_line_and_approve_is_disabled(
    live_flows: Path, lead: Client
) -> None:
    draft = submit(KEPT_VERSION)
    html = lead.get(reverse("admin:flows_app_draft_change", args=[draft.pk])).content.decode()
    row = re.search(rf'<tr id="L{VERSION_LINE}"[^>]*>.*?</tr>', html, re.S)
    assert row is not None and "unchanged_version" in row.group(0)
    assert re.search(r'<button type="submit" id="approve" class="default" disabled', html)
    assert "Cannot be approved: the draft has 1 lint error" in html
    # What it changes is still shown, so the reviewer sees why it needs a new version.
    assert "Ask what went wrong, in their words" in html


def test_the_admin_refuses_to_approve_it_with_the_version_to_set(
    live_flows: Path, lead: Client
) -> None:
    draft = submit(KEPT_VERSION)
    response = lead.post(reverse("admin:flows_app_draft_approve", args=[draft.pk]))
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert len(said) == 1 and said[0].startswith(
        f"Not approved {draft.public_id} ({REFUND}): 1 lint error: "
    )
    assert SAID in said[0]
    assert Draft.objects.get(pk=draft.pk).status == Draft.Status.PENDING
    assert (live_flows / f"{REFUND}.yaml").read_text(encoding="utf-8") == REFUND_TEXT


def test_approval_refuses_it_when_the_live_flow_took_its_version_after_it_came_in(
    live_flows: Path,
) -> None:
    draft = submit(REFUND_REWORDED)  # 2024.4, while the live flow is 2024.3
    assert draft.ok is True
    # Meanwhile the live flow became another 2024.4.
    other = REFUND_TEXT.replace('version: "2024.3"', 'version: "2024.4"').replace(
        "title: ", "title: (new) ", 1
    )
    (live_flows / f"{REFUND}.yaml").write_text(other, encoding="utf-8")
    with pytest.raises(CommandError) as refused:
        call_command("approve", draft.public_id, "--as", "maria", stdout=StringIO())
    assert str(refused.value).startswith("draft has lint errors: 1 lint error: ")
    assert "is version 2024.4 and this draft changes it under the same version" in str(
        refused.value
    )
    assert "set version: 2024.5" in str(refused.value)
    assert Draft.objects.get(pk=draft.pk).status == Draft.Status.PENDING


def test_a_new_version_of_the_same_change_is_approved(live_flows: Path, lead: Client) -> None:
    draft = submit(KEPT_VERSION.replace('version: "2024.3"', 'version: "2024.4"'))
    assert draft.ok is True
    lead.post(reverse("admin:flows_app_draft_approve", args=[draft.pk]))
    assert Draft.objects.get(pk=draft.pk).status == Draft.Status.APPROVED
