"""OAuth access tokens at /mcp of a real server (GUIDEPOST_OAUTH_ISSUER set), from a real
issuer on loopback (tests/support/issuer.py): the official MCP SDK's OAuth client finds the
way in from the 401 alone and walks a flow; tokens own runs as keys do; scopes bound the
tools; refusals are 401s in the error shape; agent keys keep working."""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.auth.oauth2 import AuthorizationCodeResult
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from tests.support.issuer import CLIENT_ID, CLIENT_SECRET, Issuer, issuing
from tests.support.mcp_http import (
    async_http_client,
    fail,
    http_get,
    http_refusal,
    ok,
    post,
)
from tests.support.servers import Server, free_port, guidepost_command, serving

pytestmark = pytest.mark.slow


@dataclass
class Deployment:
    server: Server
    issuer: Issuer


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    port = free_port()
    # The audience is the resource's own URL, as an MCP client asks for it (RFC 8707).
    with issuing(audience=f"http://127.0.0.1:{port}/mcp") as issuer:
        env = {
            "GUIDEPOST_OAUTH_ISSUER": issuer.url,
            "GUIDEPOST_OAUTH_AUDIENCE": issuer.audience,
            "GUIDEPOST_OAUTH_CLIENT_ID": CLIENT_ID,
            "GUIDEPOST_OAUTH_CLIENT_SECRET": CLIENT_SECRET,
        }
        with serving(tmp_path_factory.mktemp("oauth"), env=env, port=port) as server:
            yield Deployment(server, issuer)


def test_a_request_without_a_token_is_told_where_to_get_one(deployment: Deployment) -> None:
    server, issuer = deployment.server, deployment.issuer
    answer = post(server.base, "guide_flows", {})
    body = http_refusal(answer, 401, "key required")
    assert "access token" in body["reason"]
    metadata_url = f"{server.base}/.well-known/oauth-protected-resource/mcp"
    assert answer.headers["www-authenticate"] == (
        f'Bearer realm="guidepost", resource_metadata="{metadata_url}"'
    )
    for url in (metadata_url, f"{server.base}/.well-known/oauth-protected-resource"):
        document = http_get(url)
        assert document.status_code == 200
        assert document.headers["access-control-allow-origin"] == "*"
        assert document.json() == {
            "resource": f"{server.base}/mcp",
            "authorization_servers": [issuer.url],
            "scopes_supported": ["guidepost:walk", "guidepost:draft"],
            "bearer_methods_supported": ["header"],
            "resource_name": "guidepost",
        }


class Memory(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_sdks_oauth_client_signs_in_from_the_401_alone_and_walks_a_flow(
    deployment: Deployment,
) -> None:
    """What a hosted agent platform does: the 401 names the metadata, which names the
    issuer; the client registers, a person signs in, and the token it gets walks a flow."""
    server, issuer = deployment.server, deployment.issuer
    redirected: list[str] = []

    async def redirect(authorization_url: str) -> None:
        async with async_http_client() as http:  # the person's browser, signing in at once
            redirected.append((await http.get(authorization_url)).headers["location"])

    async def callback() -> AuthorizationCodeResult:
        said = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(redirected[-1]).query))
        return AuthorizationCodeResult(code=said["code"], state=said["state"], iss=said["iss"])

    auth = OAuthClientProvider(
        server_url=server.url,
        client_metadata=OAuthClientMetadata(
            client_name="an agent platform",
            redirect_uris=["http://127.0.0.1:1/callback"],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=Memory(),
        redirect_handler=redirect,
        callback_handler=callback,
    )
    async with (
        async_http_client(auth=auth, timeout=30) as http,
        streamable_http_client(server.url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        started = await session.call_tool("guide_start", {"flow_id": "refund_request"})
        assert not started.is_error, started
        run_id = json.loads(started.content[0].text)["run_id"]  # type: ignore[union-attr]
        status = await session.call_tool("guide_status", {"run_id": run_id})
        assert not status.is_error, status
    asked = issuer.token_requests[-1]
    assert asked["resource"] == f"{server.base}/mcp"
    # The run is the signed-in person's: another subject's token does not find it.
    other = fail(server.base, "guide_status", {"run_id": run_id}, key=issuer.token("someone"))
    assert other["error"] == "run not found"
    mine = ok(server.base, "guide_status", {"run_id": run_id}, key=issuer.token(issuer.person))
    assert mine["run_id"] == run_id


def test_runs_of_a_token_are_its_subjects_and_no_agent_keys(deployment: Deployment) -> None:
    server, issuer = deployment.server, deployment.issuer
    made = guidepost_command(server.database_url, "createkey", "platform")
    assert made.returncode == 0, made.stderr
    key = made.stdout.splitlines()[-1]
    run_id = ok(server.base, "guide_start", {"flow_id": "refund_request"}, key=issuer.token("a"))[
        "run_id"
    ]
    assert fail(server.base, "guide_status", {"run_id": run_id}, key=key)["error"] == (
        "run not found"
    )
    keyed = ok(server.base, "guide_start", {"flow_id": "refund_request"}, key=key)["run_id"]
    assert fail(server.base, "guide_status", {"run_id": keyed}, key=issuer.token("a"))["error"] == (
        "run not found"
    )
    # The access line names the token's subject as the caller.
    line = rf"key=oauth:a client=\S+ peer=127\.0\.0\.1 tool=guide_start run={run_id} outcome=ok"
    assert re.search(line, server.output()), server.output()[-2000:]


def test_an_opaque_token_is_asked_about_and_walks(deployment: Deployment) -> None:
    server, issuer = deployment.server, deployment.issuer
    token = issuer.opaque_token("agent-9", "guidepost:walk")
    started = ok(server.base, "guide_start", {"flow_id": "refund_request"}, key=token)
    assert ok(server.base, "guide_status", {"run_id": started["run_id"]}, key=token)


@pytest.mark.parametrize(
    ("scope", "tool", "args", "needed"),
    [
        ("guidepost:walk", "guide_draft", {"yaml": "id: x"}, "guidepost:draft"),
        ("guidepost:draft", "guide_start", {"flow_id": "refund_request"}, "guidepost:walk"),
    ],
)
def test_a_tool_outside_the_tokens_scopes_is_refused(
    deployment: Deployment, scope: str, tool: str, args: dict[str, Any], needed: str
) -> None:
    server, issuer = deployment.server, deployment.issuer
    refused = fail(server.base, tool, args, key=issuer.token("scoped", scope))
    assert (refused["error"], refused["retryable"]) == ("insufficient scope", False)
    assert refused["reason"] == f"{tool} needs the scope {needed}; the token's scopes are '{scope}'"


def test_a_forged_token_is_a_401_saying_the_token_is_invalid(deployment: Deployment) -> None:
    server, issuer = deployment.server, deployment.issuer
    header, body, signature = issuer.token().split(".")
    answer = post(server.base, "guide_flows", {}, key=f"{header}.{body}x.{signature}")
    refused = http_refusal(answer, 401, "invalid token")
    assert refused["next"].startswith(f"Get an access token from {issuer.url}")
    assert 'error="invalid_token", resource_metadata="' in answer.headers["www-authenticate"]


def test_an_unknown_agent_key_is_still_a_key_refusal(deployment: Deployment) -> None:
    answer = post(deployment.server.base, "guide_flows", {}, key="gpk_" + "x" * 43)
    http_refusal(answer, 401, "invalid key")
