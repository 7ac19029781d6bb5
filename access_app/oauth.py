"""Access tokens of one OAuth 2.1 authorization server (``GUIDEPOST_OAUTH_ISSUER``), as a
resource server checks them: a JWT against the issuer's published keys, an opaque token by
asking the issuer (RFC 7662 introspection, when the server has client credentials for it).

The issuer's metadata (OpenID Connect discovery, else RFC 8414) and its keys are fetched
when first needed and kept: the keys for ``KEYS_SECONDS``, and fetched again at once for a
token signed with a key id not among them (a rotation), at most once a
``REFETCH_SECONDS``, so tokens with made-up key ids cannot make this server hammer the
issuer. When the issuer cannot be reached, keys already fetched keep being used.
``verify(token, fetch=False)`` answers from what is kept, with no I/O (``NeedsFetch``
otherwise): the ASGI gate calls it on the event loop and goes to a thread only to fetch.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import jwt
from django.conf import settings

from access_app.agent_keys import KEY_PREFIX, is_loopback
from flowcore.common.errors import NotAuthenticated, Unavailable
from flowcore.common.limits import (
    MAX_ISSUER_DOCUMENT_BYTES,
    MAX_TOKEN_SUBJECT_LENGTH,
    TOKENS_REMEMBERED,
)
from flowcore.common.text import CONTROLS, shown

logger = logging.getLogger(__name__)

# What a token's scopes let its bearer do: walk flows (every tool and resource but
# guide_draft), and propose flows (guide_draft).
SCOPE_WALK: Final = "guidepost:walk"
SCOPE_DRAFT: Final = "guidepost:draft"
SCOPES: Final = (SCOPE_WALK, SCOPE_DRAFT)
# Signatures with the issuer's public keys only: never "none", never a shared secret
# (HS256 would let anyone holding the public key sign).
ALGORITHMS: Final = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
# Clocks of the issuer and this server may differ by this much.
LEEWAY_SECONDS: Final = 30
METADATA_SECONDS: Final = 3600.0
KEYS_SECONDS: Final = 600.0
REFETCH_SECONDS: Final = 1.0
KEYS_RETRY_SECONDS: Final = 30.0
# An opaque token the issuer said was active is believed this long (or until it expires).
INTROSPECTED_SECONDS: Final = 60.0
FETCH_TIMEOUT_SECONDS: Final = 5.0
# Retry a call refused because the issuer could not be reached after this many seconds.
ISSUER_RETRY_AFTER: Final = 5.0


@dataclass(frozen=True)
class Principal:
    """Who an accepted token speaks for: its subject (or client id), and its scopes."""

    subject: str
    scopes: frozenset[str]


@dataclass(frozen=True)
class Config:
    issuer: str
    audience: str
    client_id: str = ""
    client_secret: str = ""
    # guidepost's scopes (SCOPES, in order) as the issuer names them in a request.
    scopes: tuple[str, ...] = SCOPES


class NeedsFetch(Exception):
    """The token cannot be checked without asking the issuer: do it off the event loop."""


def settings_config() -> Config:
    return Config(
        issuer=settings.GUIDEPOST_OAUTH_ISSUER,
        audience=settings.GUIDEPOST_OAUTH_AUDIENCE,
        client_id=settings.GUIDEPOST_OAUTH_CLIENT_ID,
        client_secret=settings.GUIDEPOST_OAUTH_CLIENT_SECRET,
        scopes=tuple(settings.GUIDEPOST_OAUTH_SCOPES),
    )


def config() -> Config | None:
    """The authorization server the settings name, or None when tokens are not accepted."""
    return settings_config() if settings.GUIDEPOST_OAUTH_ISSUER else None


def configuration_problem(config: Config, auth_mode: str) -> str | None:
    """Why the server must not start with these settings, or None.

    >>> configuration_problem(Config("", ""), "auto") is None
    True
    >>> configuration_problem(Config("https://id.example.com/realms/a", "guidepost"), "auto")
    >>> configuration_problem(Config("http://id.example.com", "guidepost"), "auto")
    'GUIDEPOST_OAUTH_ISSUER=http://id.example.com: an issuer is reached over https (http only on this machine)'
    >>> configuration_problem(Config("https://id.example.com", ""), "auto")
    'GUIDEPOST_OAUTH_ISSUER is set without GUIDEPOST_OAUTH_AUDIENCE: set it to the audience the issuer writes into tokens for this server'
    """  # noqa: E501
    issuer = config.issuer
    if not issuer:
        if config.audience or config.client_id or config.client_secret:
            return "GUIDEPOST_OAUTH_AUDIENCE and _CLIENT_* need GUIDEPOST_OAUTH_ISSUER"
        return None
    parts = urllib.parse.urlsplit(issuer)
    if not (
        parts.scheme == "https" or (parts.scheme == "http" and is_loopback(parts.hostname or ""))
    ):
        return (
            f"GUIDEPOST_OAUTH_ISSUER={issuer}: an issuer is reached over https "
            "(http only on this machine)"
        )
    if parts.query or parts.fragment or not parts.hostname:
        return f"GUIDEPOST_OAUTH_ISSUER={issuer}: an issuer is a URL with no query or fragment"
    if not config.audience:
        return (
            "GUIDEPOST_OAUTH_ISSUER is set without GUIDEPOST_OAUTH_AUDIENCE: set it to the "
            "audience the issuer writes into tokens for this server"
        )
    if bool(config.client_id) != bool(config.client_secret):
        return "GUIDEPOST_OAUTH_CLIENT_ID and GUIDEPOST_OAUTH_CLIENT_SECRET go together"
    names = config.scopes
    if (
        len(names) != len(SCOPES)
        or len(set(names)) != len(names)
        or not all(name and name.isprintable() and " " not in name for name in names)
    ):
        return (
            f"GUIDEPOST_OAUTH_SCOPES={','.join(names)}: two scopes, walking then drafting, "
            "as the issuer names them (guidepost:walk,guidepost:draft)"
        )
    if auth_mode == "off":
        return "GUIDEPOST_AUTH=off is refused with GUIDEPOST_OAUTH_ISSUER: tokens are required"
    return None


def settings_problem() -> str | None:
    return configuration_problem(settings_config(), settings.GUIDEPOST_AUTH)


def is_access_token(token: str) -> bool:
    """Whether a bearer token is the issuer's to judge: tokens are accepted, and it is not
    an agent key."""
    return bool(settings.GUIDEPOST_OAUTH_ISSUER) and not token.startswith(KEY_PREFIX)


def metadata_url(scheme: str, host: str) -> str:
    """Where this server's Protected Resource Metadata is (RFC 9728, section 3.1, for /mcp).

    >>> metadata_url("https", "guide.example.com")
    'https://guide.example.com/.well-known/oauth-protected-resource/mcp'
    """
    return f"{scheme}://{host}/.well-known/oauth-protected-resource/mcp"


def resource_metadata(scheme: str, host: str, config: Config) -> dict[str, Any]:
    """This server's Protected Resource Metadata (RFC 9728): what a client needs to get a
    token for it."""
    return {
        "resource": f"{scheme}://{host}/mcp",
        "authorization_servers": [config.issuer],
        "scopes_supported": list(config.scopes),
        "bearer_methods_supported": ["header"],
        "resource_name": "guidepost",
    }


def token_howto(issuer: str) -> str:
    return (
        f"Get an access token from {issuer} (this server's /.well-known/oauth-protected-"
        "resource says how) and send it as Authorization: Bearer <token>, or send an agent key."
    )


def verify(token: str, *, fetch: bool) -> Principal:
    """The principal ``token`` speaks for. Raises NotAuthenticated ("invalid token") for a
    token this server must not accept, Unavailable ("server busy") when the issuer cannot
    be reached to tell, and NeedsFetch when ``fetch`` is False and telling needs the issuer."""
    current = config()
    if current is None:
        raise RuntimeError("tokens are not accepted: GUIDEPOST_OAUTH_ISSUER is not set")
    return _issuer(current).verify(token, fetch=fetch)


_issuers: dict[Config, _Issuer] = {}
_issuers_lock = threading.Lock()


def _issuer(current: Config) -> _Issuer:
    found = _issuers.get(current)
    if found is None:
        with _issuers_lock:
            found = _issuers.setdefault(current, _Issuer(current))
    return found


def _refused(reason: str, config: Config, *, retryable: bool = False) -> NotAuthenticated:
    return NotAuthenticated(
        "invalid token", reason, token_howto(config.issuer), retryable=retryable
    )


class _Issuer:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.lock = threading.Lock()
        self.metadata: dict[str, Any] | None = None
        self.metadata_at = 0.0
        self.keys: dict[str, jwt.PyJWK] = {}
        self.keys_at = -KEYS_SECONDS
        self.keys_tried_at = -REFETCH_SECONDS
        self.introspected: dict[bytes, tuple[float, Principal]] = {}

    def verify(self, token: str, *, fetch: bool) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return self._introspect(token, fetch=fetch)
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            raise _refused(
                f"the token is signed with {shown(str(algorithm))}; this server accepts "
                f"{', '.join(ALGORITHMS)}",
                self.config,
            )
        key = self._key(header.get("kid"), fetch=fetch)
        try:
            claims = jwt.decode(
                token,
                key=key,
                algorithms=[algorithm],
                audience=self.config.audience,
                issuer=self.config.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            raise self._why(exc, token) from None
        return self._principal(claims)

    def _why(self, exc: jwt.PyJWTError, token: str) -> NotAuthenticated:
        if isinstance(exc, jwt.ExpiredSignatureError):
            expired = jwt.decode(token, options={"verify_signature": False}).get("exp")
            at = datetime.fromtimestamp(float(expired), UTC).isoformat() if expired else "?"
            return _refused(f"the token expired at {at}", self.config, retryable=True)
        if isinstance(exc, jwt.InvalidAudienceError):
            return _refused(
                f"the token is for another audience, not {shown(self.config.audience)}",
                self.config,
            )
        if isinstance(exc, jwt.InvalidIssuerError):
            return _refused(
                f"the token was issued by another issuer, not {shown(self.config.issuer)}",
                self.config,
            )
        if isinstance(exc, jwt.MissingRequiredClaimError):
            return _refused(f"the token has no {exc.claim} claim", self.config)
        if isinstance(exc, jwt.ImmatureSignatureError):
            return _refused("the token is not valid yet", self.config, retryable=True)
        if isinstance(exc, jwt.InvalidSignatureError):
            return _refused("the token's signature does not verify", self.config)
        return _refused(f"the token cannot be read ({type(exc).__name__})", self.config)

    def _principal(self, claims: Mapping[str, Any]) -> Principal:
        subject = claims.get("sub") or claims.get("client_id") or claims.get("azp")
        if not isinstance(subject, str) or not subject:
            raise _refused("the token names no subject (sub) or client (client_id)", self.config)
        if len(subject) > MAX_TOKEN_SUBJECT_LENGTH or CONTROLS.search(subject):
            raise _refused(
                f"the token's subject is over {MAX_TOKEN_SUBJECT_LENGTH} characters or holds a "
                "control character",
                self.config,
            )
        return Principal(subject=subject, scopes=granted(scopes_of(claims), self.config.scopes))

    # --- the issuer's keys ------------------------------------------------------------

    def _key(self, key_id: object, *, fetch: bool) -> jwt.PyJWK:
        now = time.monotonic()
        stale = now - self.keys_at >= KEYS_SECONDS
        found = self._find(key_id)
        if found is not None and not stale:
            return found
        may_refetch = now - self.keys_tried_at >= REFETCH_SECONDS
        if stale or (found is None and may_refetch):
            if not fetch:
                raise NeedsFetch
            self._fetch_keys()
            found = self._find(key_id)
        if found is None:
            raise _refused(
                f"the token's key id {shown(str(key_id))} is not one of the issuer's keys",
                self.config,
                retryable=True,
            )
        return found

    def _find(self, key_id: object) -> jwt.PyJWK | None:
        if key_id is None and len(self.keys) == 1:
            return next(iter(self.keys.values()))
        return self.keys.get(key_id) if isinstance(key_id, str) else None

    def _fetch_keys(self) -> None:
        with self.lock:
            now = time.monotonic()
            if now - self.keys_tried_at < REFETCH_SECONDS:
                return  # another thread has just fetched them
            self.keys_tried_at = now
            try:
                document = _get_json(self._metadata()["jwks_uri"])
                keys = jwt.PyJWKSet.from_dict(document).keys
            except (OSError, ValueError, KeyError, jwt.PyJWTError) as exc:
                if self.keys:
                    # Kept, and asked for again in a while, not by every call meanwhile.
                    logger.warning("the issuer's keys could not be fetched again: %s", exc)
                    self.keys_at = now - KEYS_SECONDS + KEYS_RETRY_SECONDS
                    return
                raise self._unreachable(exc) from None
            self.keys = {
                key.key_id: key for key in keys if key.key_id and key.public_key_use != "enc"
            } or ({"": keys[0]} if len(keys) == 1 else {})
            self.keys_at = now

    def _metadata(self) -> dict[str, Any]:
        """The issuer's metadata (OpenID Connect discovery, else RFC 8414), which must name
        this issuer (RFC 8414, section 3.3). Called with the lock held."""
        if self.metadata is not None and time.monotonic() - self.metadata_at < METADATA_SECONDS:
            return self.metadata
        issuer = self.config.issuer.rstrip("/")
        parts = urllib.parse.urlsplit(issuer)
        places = (
            f"{issuer}/.well-known/openid-configuration",
            f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server{parts.path}",
        )
        failure: Exception = ValueError("no metadata")
        for place in places:
            try:
                metadata = _get_json(place)
            except (OSError, ValueError) as exc:
                failure = exc
                continue
            if metadata.get("issuer") != self.config.issuer:
                raise ValueError(
                    f"{place} names the issuer {metadata.get('issuer')!r}, "
                    f"not {self.config.issuer!r}"
                )
            self.metadata, self.metadata_at = metadata, time.monotonic()
            return metadata
        raise failure

    def _unreachable(self, exc: Exception) -> Unavailable:
        logger.warning("the authorization server could not be asked: %s", exc)
        return Unavailable(
            "server busy",
            "the authorization server that issued the token could not be reached to check it",
            "Call again after retry_after seconds.",
            retryable=True,
            retry_after=ISSUER_RETRY_AFTER,
        )

    # --- opaque tokens ----------------------------------------------------------------

    def _introspect(self, token: str, *, fetch: bool) -> Principal:
        if not self.config.client_id:
            raise _refused(
                "the token is not a JWT, and this server is not set to ask the issuer about "
                "other tokens",
                self.config,
            )
        digest = hashlib.sha256(token.encode()).digest()
        remembered = self.introspected.get(digest)
        if remembered is not None and time.monotonic() < remembered[0]:
            return remembered[1]
        if not fetch:
            raise NeedsFetch
        try:
            with self.lock:
                endpoint = self._metadata()["introspection_endpoint"]
            said = _post_form(
                endpoint,
                {"token": token, "token_type_hint": "access_token"},
                (self.config.client_id, self.config.client_secret),
            )
        except (OSError, ValueError, KeyError) as exc:
            raise self._unreachable(exc) from None
        if said.get("active") is not True:
            raise _refused(
                "the issuer says the token is not active (expired, revoked or not its own)",
                self.config,
            )
        audience = said.get("aud")
        if audience is not None and self.config.audience not in (
            [audience] if isinstance(audience, str) else audience
        ):
            raise _refused(
                f"the token is for another audience, not {shown(self.config.audience)}",
                self.config,
            )
        if said.get("iss", self.config.issuer) != self.config.issuer:
            raise _refused(
                f"the token was issued by another issuer, not {shown(self.config.issuer)}",
                self.config,
            )
        principal = self._principal(said)
        until = time.monotonic() + INTROSPECTED_SECONDS
        if isinstance(said.get("exp"), int | float):
            until = min(until, time.monotonic() + float(said["exp"]) - time.time())
        if len(self.introspected) >= TOKENS_REMEMBERED:
            self.introspected.pop(next(iter(self.introspected)))
        self.introspected[digest] = (until, principal)
        return principal


def scopes_of(claims: Mapping[str, Any]) -> frozenset[str]:
    """A token's scopes: ``scope`` (RFC 9068, space-separated), ``scp`` (Microsoft Entra's
    delegated scopes, a string or a list) and ``roles`` (Entra's application roles, which
    an application granted them has instead).

    >>> sorted(scopes_of({"scope": "openid guidepost:walk", "scp": ["a"], "roles": "x"}))
    ['a', 'guidepost:walk', 'openid']
    """
    found: set[str] = set()
    for name in ("scope", "scp", "roles"):
        value = claims.get(name)
        if isinstance(value, str) and name != "roles":
            found.update(value.split())
        elif isinstance(value, list):
            found.update(item for item in value if isinstance(item, str))
    return frozenset(found)


def granted(held: frozenset[str], names: tuple[str, ...]) -> frozenset[str]:
    """guidepost's scopes among ``held``, the issuer naming them ``names``: in full, or its
    last path segment alone (Microsoft Entra asks for ``api://guidepost/walk`` and writes
    ``walk`` into the token).

    >>> sorted(granted(frozenset({"openid", "guidepost:walk"}), SCOPES))
    ['guidepost:walk']
    >>> sorted(granted(frozenset({"walk", "draft"}), ("api://guidepost/walk", "api://guidepost/draft")))
    ['guidepost:draft', 'guidepost:walk']
    """  # noqa: E501
    return frozenset(
        ours
        for ours, theirs in zip(SCOPES, names, strict=True)
        if theirs in held or theirs.rsplit("/", 1)[-1] in held
    )


def _get_json(url: str) -> dict[str, Any]:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    return _json_of(request)


def _post_form(url: str, form: Mapping[str, str], client: tuple[str, str]) -> dict[str, Any]:
    # The client's id and secret are form-encoded before they are joined (RFC 6749, 2.3.1).
    pair = ":".join(urllib.parse.quote(part, safe="") for part in client)
    request = urllib.request.Request(
        url,
        data=urllib.parse.urlencode(form).encode(),
        headers={
            "Accept": "application/json",
            "Content-Type": "application/x-www-form-urlencoded",
            "Authorization": "Basic " + base64.b64encode(pair.encode()).decode(),
        },
    )
    return _json_of(request)


def _json_of(request: urllib.request.Request) -> dict[str, Any]:
    # urllib goes through the egress proxy HTTPS_PROXY / NO_PROXY name, as webhooks do.
    with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_SECONDS) as response:  # noqa: S310
        body = response.read(MAX_ISSUER_DOCUMENT_BYTES + 1)
    if len(body) > MAX_ISSUER_DOCUMENT_BYTES:
        raise ValueError(f"{request.full_url} answered over {MAX_ISSUER_DOCUMENT_BYTES} bytes")
    document = json.loads(body)
    if not isinstance(document, dict):
        raise ValueError(f"{request.full_url} did not answer a JSON object")
    return document
