"""Agent keys as services (ADR 0032): creating, refusing and revoking them, called
directly (the commands and the admin only call these)."""

from __future__ import annotations

import pytest

from access_app import services
from access_app.agent_keys import KEY_NAME_HELP, key_digest
from access_app.models import AgentKey
from access_app.services import KeyRefused

pytestmark = pytest.mark.django_db


def test_a_new_key_is_the_prefix_and_43_url_safe_characters_stored_only_as_its_digest() -> None:
    key, secret = services.key_create(name="support-bot")

    assert secret.startswith("gpk_")
    assert len(secret) == 4 + 43  # 32 random bytes in URL-safe base64
    stored = AgentKey.objects.get(name="support-bot")
    assert stored.pk == key.pk
    assert stored.digest == key_digest(secret)
    assert stored.display == secret[:12]
    assert stored.revoked_at is None


def test_a_bad_key_name_is_refused_with_what_a_name_has() -> None:
    with pytest.raises(KeyRefused) as refused:
        services.key_create(name="two words")

    assert str(refused.value) == f"'two words' is not a key name: a name has {KEY_NAME_HELP}"
    assert not AgentKey.objects.exists()


def test_a_second_active_key_of_a_name_is_refused_and_says_how_to_revoke_the_first() -> None:
    services.key_create(name="support-bot")

    with pytest.raises(KeyRefused) as refused:
        services.key_create(name="support-bot")

    assert str(refused.value) == (
        "support-bot already has an active key: revoke it first "
        "(guidepost-mcp revokekey support-bot), or choose another name"
    )
    assert AgentKey.objects.count() == 1


def test_revoking_a_name_nobody_has_is_refused() -> None:
    with pytest.raises(KeyRefused) as refused:
        services.key_revoke(name="nobody")

    assert str(refused.value) == "no key is named 'nobody'"


def test_revoking_a_name_revokes_its_active_key_only() -> None:
    key, _ = services.key_create(name="support-bot")
    other, _ = services.key_create(name="other-bot")

    revoked = services.key_revoke(name="support-bot")

    assert [k.pk for k in revoked] == [key.pk]
    key.refresh_from_db()
    other.refresh_from_db()
    assert key.revoked_at is not None
    assert revoked[0].revoked_at == key.revoked_at
    assert other.revoked_at is None


def test_revoking_a_revoked_name_again_revokes_nothing_and_keeps_the_first_time() -> None:
    key, _ = services.key_create(name="support-bot")
    services.key_revoke(name="support-bot")
    key.refresh_from_db()
    first = key.revoked_at

    assert services.key_revoke(name="support-bot") == []
    key.refresh_from_db()
    assert key.revoked_at == first


def test_after_revoking_a_name_a_new_key_of_that_name_can_be_created() -> None:
    services.key_create(name="support-bot")
    services.key_revoke(name="support-bot")

    key, _ = services.key_create(name="support-bot")

    assert AgentKey.objects.filter(name="support-bot").count() == 2
    assert key.revoked_at is None


def test_revoking_keys_from_the_admin_counts_only_those_still_active() -> None:
    first, _ = services.key_create(name="one")
    second, _ = services.key_create(name="two")
    untouched, _ = services.key_create(name="three")
    services.key_revoke(name="two")  # elsewhere: `second` here still looks active
    revoked_at = AgentKey.objects.get(pk=second.pk).revoked_at

    assert services.keys_revoke([first, second]) == 1
    first.refresh_from_db()
    second.refresh_from_db()
    untouched.refresh_from_db()
    assert first.revoked_at is not None
    assert second.revoked_at == revoked_at
    assert untouched.revoked_at is None
