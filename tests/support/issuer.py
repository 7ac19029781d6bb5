"""A small OAuth 2.1 authorization server for the tests, over real HTTP on loopback: it
publishes OpenID Connect discovery metadata and its signing keys (JWKS) under an issuer
URL with a path (as Keycloak's realms have), signs access tokens with its own RSA keys,
rotates them, and answers token introspection (RFC 7662) for opaque tokens it handed out
to a client that authenticates with HTTP Basic. An MCP client can also register itself
(RFC 7591) and get a token through the authorization code grant with PKCE, a person
signing in as ``Issuer.person`` at once, as hosted agent platforms do."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

AUDIENCE = "https://guidepost.test/mcp"
CLIENT_ID = "guidepost-resource"
CLIENT_SECRET = "s3cret:with/odd chars"
ALL_SCOPES = "guidepost:walk guidepost:draft"


@dataclass
class SigningKey:
    kid: str
    private: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )

    def jwk(self) -> dict[str, Any]:
        public = json.loads(RSAAlgorithm.to_jwk(self.private.public_key()))
        return {**public, "kid": self.kid, "use": "sig", "alg": "RS256"}


class Issuer:
    def __init__(self, base: str, audience: str) -> None:
        self.url = base + "/realms/test"
        self.audience = audience
        self.keys = [SigningKey("k1")]
        self.opaque: dict[str, dict[str, Any]] = {}
        self.key_fetches = 0
        self.lock = threading.Lock()
        # The authorization code grant: who signs in, the codes handed out, what asked.
        self.person = "person@example.test"
        self.codes: dict[str, dict[str, str]] = {}
        self.token_requests: list[dict[str, str]] = []

    def token(
        self,
        subject: str = "agent-7",
        scope: str = ALL_SCOPES,
        *,
        key: SigningKey | None = None,
        headers: dict[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        """An access token signed with the newest key (or ``key``); ``claims`` replace the
        usual ones (a claim set to None is left out)."""
        signer = key or self.keys[-1]
        now = int(time.time())
        body = {
            "iss": self.url,
            "aud": self.audience,
            "sub": subject,
            "scope": scope,
            "iat": now,
            "exp": now + 300,
            **claims,
        }
        body = {name: value for name, value in body.items() if value is not None}
        return jwt.encode(
            body, signer.private, algorithm="RS256", headers={"kid": signer.kid, **(headers or {})}
        )

    def opaque_token(self, subject: str = "agent-9", scope: str = ALL_SCOPES, **said: Any) -> str:
        """An opaque token, and what introspection says of it (active unless ``said``
        says otherwise)."""
        token = "opaque-" + secrets.token_urlsafe(24)
        self.opaque[token] = {
            "active": True,
            "sub": subject,
            "scope": scope,
            "aud": self.audience,
            "iss": self.url,
            "exp": int(time.time()) + 300,
            **said,
        }
        return token

    def rotate(self, kid: str) -> SigningKey:
        """A new signing key, published beside the old ones; tokens are signed with it."""
        with self.lock:
            self.keys = [*self.keys, SigningKey(kid)]
        return self.keys[-1]

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "jwks_uri": self.url + "/jwks",
            "introspection_endpoint": self.url + "/introspect",
            "authorization_endpoint": self.url + "/authorize",
            "token_endpoint": self.url + "/token",
            "registration_endpoint": self.url + "/register",
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
        }

    def jwks(self) -> dict[str, Any]:
        with self.lock:
            self.key_fetches += 1
            return {"keys": [key.jwk() for key in self.keys]}

    def introspect(self, authorization: str, form: dict[str, str]) -> dict[str, Any] | None:
        """What introspection answers, or None for a client that failed to authenticate."""
        scheme, _, encoded = authorization.partition(" ")
        client_id, _, secret = base64.b64decode(encoded).decode().partition(":")
        pair = (urllib.parse.unquote(client_id), urllib.parse.unquote(secret))
        if scheme != "Basic" or pair != (CLIENT_ID, CLIENT_SECRET):
            return None
        return self.opaque.get(form.get("token", ""), {"active": False})

    def register(self, client: dict[str, Any]) -> dict[str, Any]:
        return {
            **client,
            "client_id": secrets.token_urlsafe(8),
            "token_endpoint_auth_method": "none",
        }

    def authorize(self, query: dict[str, str]) -> str:
        """Where the person's browser goes once they have signed in: the client's redirect
        URI with a code."""
        code = secrets.token_urlsafe(16)
        self.codes[code] = query
        said = {"code": code, "state": query["state"], "iss": self.url}
        return query["redirect_uri"] + "?" + urllib.parse.urlencode(said)

    def exchange(self, form: dict[str, str]) -> dict[str, Any] | None:
        """The token for a code and its PKCE verifier, or None."""
        self.token_requests.append(form)
        asked = self.codes.pop(form.get("code", ""), None)
        verifier = form.get("code_verifier", "").encode()
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=")
        if asked is None or challenge.decode() != asked["code_challenge"]:
            return None
        scope = asked.get("scope", ALL_SCOPES)
        token = self.token(self.person, scope, aud=form.get("resource", self.audience))
        return {"access_token": token, "token_type": "Bearer", "expires_in": 300, "scope": scope}


@contextmanager
def issuing(audience: str = AUDIENCE) -> Iterator[Issuer]:
    """An issuer of tokens for ``audience``, listening on loopback until the block ends."""
    holder: list[Issuer] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            issuer = holder[0]
            path, _, query = self.local_path().partition("?")
            if path == "/.well-known/openid-configuration":
                self.answer(200, issuer.metadata())
            elif path == "/jwks":
                self.answer(200, issuer.jwks())
            elif path == "/authorize":
                self.send_response(302)
                self.send_header("Location", issuer.authorize(dict(urllib.parse.parse_qsl(query))))
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self.answer(404, {"error": "not found"})

        def do_POST(self) -> None:
            issuer = holder[0]
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            path = self.local_path()
            if path == "/register":
                self.answer(201, issuer.register(json.loads(body)))
                return
            form = dict(urllib.parse.parse_qsl(body))
            if path == "/token":
                said = issuer.exchange(form)
                refused = {"error": "invalid_grant"}, 400
            else:
                said = issuer.introspect(self.headers.get("Authorization", ""), form)
                refused = {"error": "invalid_client"}, 401
            if said is None:
                self.answer(refused[1], refused[0])
            else:
                self.answer(200, said)

        def local_path(self) -> str:
            return self.path.removeprefix(urllib.parse.urlsplit(holder[0].url).path)

        def answer(self, status: int, document: dict[str, Any]) -> None:
            body = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder.append(Issuer(f"http://127.0.0.1:{server.server_address[1]}", audience))
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield holder[0]
    finally:
        server.shutdown()
        server.server_close()
