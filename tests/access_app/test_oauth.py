"""OAuth access tokens as the resource server judges them (``access_app.oauth``), against a
real issuer on loopback (tests/support/issuer.py): what is accepted, what is refused and
why, key rotation, opaque tokens by introspection, and the settings that may not start."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import jwt
import pytest

from access_app import guards, oauth
from access_app.callers import Transport
from flowcore.common.errors import NotAuthenticated, Unavailable
from runs_app.selectors import may_see
from tests.support.issuer import AUDIENCE, CLIENT_ID, CLIENT_SECRET, Issuer, issuing
from tests.support.waiting import wait_until

pytestmark = pytest.mark.database_free


@pytest.fixture
def issuer(settings: Any) -> Iterator[Issuer]:
    with issuing() as running:
        settings.GUIDEPOST_OAUTH_ISSUER = running.url
        settings.GUIDEPOST_OAUTH_AUDIENCE = AUDIENCE
        settings.GUIDEPOST_OAUTH_CLIENT_ID = CLIENT_ID
        settings.GUIDEPOST_OAUTH_CLIENT_SECRET = CLIENT_SECRET
        yield running


def verify(token: str) -> oauth.Principal:
    """As the gate does: from what is kept, else asking the issuer."""
    try:
        return oauth.verify(token, fetch=False)
    except oauth.NeedsFetch:
        return oauth.verify(token, fetch=True)


def refusal(token: str) -> str:
    with pytest.raises(NotAuthenticated) as refused:
        verify(token)
    assert refused.value.error == "invalid token"
    return refused.value.reason


def test_a_signed_token_names_its_subject_and_scopes(issuer: Issuer) -> None:
    principal = verify(issuer.token("agent-7", "openid guidepost:walk"))
    assert principal == oauth.Principal("agent-7", frozenset({"guidepost:walk"}))


def test_scopes_named_as_microsoft_entra_names_them_are_guideposts(
    issuer: Issuer, settings: Any
) -> None:
    settings.GUIDEPOST_OAUTH_SCOPES = ["api://guidepost/walk", "api://guidepost/draft"]
    token = issuer.token("entra-user", scope=None, scp="walk", roles=["draft"])
    assert verify(token).scopes == {oauth.SCOPE_WALK, oauth.SCOPE_DRAFT}


def test_keys_are_fetched_once_and_then_checked_without_io(issuer: Issuer) -> None:
    verify(issuer.token())
    assert oauth.verify(issuer.token("another"), fetch=False).subject == "another"
    assert issuer.key_fetches == 1


def test_a_client_credentials_token_without_a_subject_is_its_client(issuer: Issuer) -> None:
    assert verify(issuer.token(sub=None, client_id="billing-bot")).subject == "billing-bot"


def test_an_expired_token_is_refused_as_expired_and_retryable(issuer: Issuer) -> None:
    token = issuer.token(exp=1_700_000_000, iat=1_699_999_000)
    with pytest.raises(NotAuthenticated) as refused:
        verify(token)
    assert refused.value.reason == "the token expired at 2023-11-14T22:13:20+00:00"
    assert refused.value.retryable is True


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"aud": "https://elsewhere.test/mcp"}, "the token is for another audience, not "),
        ({"iss": "https://evil.test/realms/test"}, "the token was issued by another issuer"),
        ({"exp": None}, "the token has no exp claim"),
        ({"aud": None}, "the token has no aud claim"),
        ({"sub": None}, "the token names no subject (sub) or client (client_id)"),
        ({"sub": "x" * 151}, "the token's subject is over 150 characters"),
    ],
)
def test_a_token_for_another_audience_or_issuer_or_without_claims_is_refused(
    issuer: Issuer, claims: dict[str, Any], reason: str
) -> None:
    assert refusal(issuer.token(**claims)).startswith(reason)


def test_a_token_with_an_unknown_key_id_is_refused(issuer: Issuer) -> None:
    token = issuer.token(headers={"kid": "nobody"})
    assert refusal(token) == "the token's key id 'nobody' is not one of the issuer's keys"


def test_unknown_key_ids_do_not_make_the_server_ask_the_issuer_on_every_call(
    issuer: Issuer,
) -> None:
    for n in range(5):
        refusal(issuer.token(headers={"kid": f"made-up-{n}"}))
    assert issuer.key_fetches == 1


def test_an_unsigned_token_is_refused(issuer: Issuer) -> None:
    token = jwt.encode(
        {"iss": issuer.url, "aud": AUDIENCE, "sub": "mallory", "exp": 4_000_000_000},
        key=None,
        algorithm="none",
    )
    assert refusal(token).startswith("the token is signed with 'none'; this server accepts RS256")


def test_a_token_signed_with_the_public_key_as_a_shared_secret_is_refused(issuer: Issuer) -> None:
    verify(issuer.token())  # the keys are fetched: the attacker has them too
    header = {"alg": "HS256", "kid": "k1", "typ": "JWT"}
    body = {"iss": issuer.url, "aud": AUDIENCE, "sub": "mallory", "exp": 4_000_000_000}
    token = ".".join(
        base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()
        for part in (header, body)
    )
    assert refusal(token + ".c2lnbmF0dXJl").startswith("the token is signed with 'HS256'")


def test_a_tampered_token_is_refused(issuer: Issuer) -> None:
    header, body, signature = issuer.token("agent-7").split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    forged = base64.urlsafe_b64encode(json.dumps({**claims, "sub": "admin"}).encode())
    token = ".".join((header, forged.rstrip(b"=").decode(), signature))
    assert refusal(token) == "the token's signature does not verify"


def test_a_rotated_key_is_picked_up(issuer: Issuer) -> None:
    verify(issuer.token())
    new = issuer.rotate("k2")
    token = issuer.token("after-rotation", key=new)

    def accepted() -> str | None:
        try:
            return verify(token).subject
        except NotAuthenticated:
            return None  # within a second of the last fetch: asked again only after it

    assert wait_until(accepted, 5, 0.1) == "after-rotation"
    assert issuer.key_fetches == 2


def test_an_opaque_token_is_asked_about_once_and_believed_a_while(issuer: Issuer) -> None:
    token = issuer.opaque_token("agent-9", "guidepost:walk")
    assert verify(token) == oauth.Principal("agent-9", frozenset({"guidepost:walk"}))
    issuer.opaque[token]["active"] = False
    assert oauth.verify(token, fetch=False).subject == "agent-9"


@pytest.mark.parametrize(
    ("said", "reason"),
    [
        ({"active": False}, "the issuer says the token is not active"),
        ({"aud": ["https://elsewhere.test/mcp"]}, "the token is for another audience"),
        ({"iss": "https://evil.test"}, "the token was issued by another issuer"),
    ],
)
def test_an_opaque_token_the_issuer_does_not_vouch_for_is_refused(
    issuer: Issuer, said: dict[str, Any], reason: str
) -> None:
    assert refusal(issuer.opaque_token(**said)).startswith(reason)


def test_an_opaque_token_is_refused_without_client_credentials(
    issuer: Issuer, settings: Any
) -> None:
    settings.GUIDEPOST_OAUTH_CLIENT_ID = settings.GUIDEPOST_OAUTH_CLIENT_SECRET = ""
    assert refusal(issuer.opaque_token()).startswith("the token is not a JWT")


def test_an_issuer_that_cannot_be_reached_makes_the_server_busy_not_the_token_invalid(
    settings: Any,
) -> None:
    with issuing() as gone:
        url = gone.url
    settings.GUIDEPOST_OAUTH_ISSUER = url
    settings.GUIDEPOST_OAUTH_AUDIENCE = AUDIENCE
    with pytest.raises(Unavailable) as refused:
        verify(gone.token())
    assert (refused.value.error, refused.value.retryable) == ("server busy", True)
    assert refused.value.retry_after == oauth.ISSUER_RETRY_AFTER


@pytest.mark.parametrize(
    ("config", "auth_mode", "problem"),
    [
        (oauth.Config("https://id.test", ""), "auto", "without GUIDEPOST_OAUTH_AUDIENCE"),
        (oauth.Config("http://id.test", "a"), "auto", "reached over https"),
        (oauth.Config("https://id.test?x=1", "a"), "auto", "no query or fragment"),
        (oauth.Config("https://id.test", "a", "client"), "auto", "go together"),
        (oauth.Config("https://id.test", "a", scopes=("x",)), "auto", "two scopes"),
        (oauth.Config("https://id.test", "a", scopes=("x", "x")), "auto", "two scopes"),
        (oauth.Config("https://id.test", "a"), "off", "GUIDEPOST_AUTH=off is refused"),
        (oauth.Config("", "a"), "auto", "need GUIDEPOST_OAUTH_ISSUER"),
    ],
)
def test_settings_that_cannot_work_stop_the_server_at_start(
    config: oauth.Config, auth_mode: str, problem: str
) -> None:
    assert problem in (oauth.configuration_problem(config, auth_mode) or "")


def test_a_tokens_runs_are_a_keys_which_callers_without_a_key_never_see() -> None:
    """Should tokens be turned off later, the runs they started stay their subjects'."""
    caller = guards.authenticate(Transport(key_name="oauth:agent-7", token_scopes=frozenset()))
    assert (caller.key, caller.key_name) == ("key:oauth:agent-7", "oauth:agent-7")
    assert may_see(caller, caller.key)
    assert not may_see(guards.authenticate(Transport(peer="10.0.0.1")), caller.key)
    assert not may_see(guards.key_caller("oauth:agent-8", scopes=frozenset()), caller.key)
