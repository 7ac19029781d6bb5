"""Agent keys and run ownership over real HTTP, against a real server that has keys
(ADR 0032): what a request without a key, with an unknown, revoked or misplaced key
gets; what the tools see of a key; and that another key's run cannot be told from a run
that never existed.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.support.mcp_http import (
    async_http_client,
    bearer,
    fail,
    http_client,
    http_refusal,
    ok,
    outcome,
    post,
)
from tests.support.servers import REPO, Server, django_eval, guidepost_command, serving

pytestmark = pytest.mark.slow

# The revocation latency docs/tools.md and ADR 0032 state: how long a worker may still
# accept a key after it was revoked (or say no key exists after the first was created).
REVOCATION_SECONDS = 1.0

KEY = re.compile(r"gpk_[A-Za-z0-9_-]{43}")
ORDER = {"order_number": "A00118"}


def create_key(server: Server, name: str) -> str:
    done = guidepost_command(server.database_url, "createkey", name)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1]


def revoke_key(server: Server, name: str) -> None:
    done = guidepost_command(server.database_url, "revokekey", name)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, str]]]:
    """A server (default GUIDEPOST_AUTH=auto, on loopback) and two keys, alpha and beta:
    since keys exist, every call needs one."""
    tmp = tmp_path_factory.mktemp("keys")
    with serving(tmp) as running:
        keys = {name: create_key(running, name) for name in ("alpha", "beta")}
        yield running, keys


@pytest.fixture
def server(keyed: tuple[Server, dict[str, str]]) -> Server:
    return keyed[0]


@pytest.fixture
def alpha(keyed: tuple[Server, dict[str, str]]) -> str:
    return keyed[1]["alpha"]


@pytest.fixture
def beta(keyed: tuple[Server, dict[str, str]]) -> str:
    return keyed[1]["beta"]


def start(server: Server, key: str, **values: str) -> str:
    started = ok(
        server.base, "guide_start", {"flow_id": "refund_request", "values": values}, key=key
    )
    return str(started["run_id"])


# --- createkey ---------------------------------------------------------------------------------


def test_createkey_prints_the_key_alone_as_the_last_line_and_stores_only_its_digest(
    server: Server,
) -> None:
    done = guidepost_command(server.database_url, "createkey", "gamma")

    assert done.returncode == 0, done.stderr
    *before, last = done.stdout.splitlines()
    assert KEY.fullmatch(last), last
    assert last not in "\n".join(before) + done.stderr
    assert "gamma" in before[0] and last[:12] in before[0]  # the name and the shown prefix
    stored = django_eval(
        server.database_url,
        "from access_app.models import AgentKey\n"
        "result = list(AgentKey.objects.filter(name='gamma').values_list('display', 'digest'))",
    )
    digest = hashlib.sha256(last.encode()).hexdigest()
    assert stored == [[last[:12], digest]]
    again = guidepost_command(server.database_url, "createkey", "gamma")
    assert again.returncode != 0 and "already has an active key" in again.stderr
    assert not KEY.search(again.stdout)


def test_revokekey_of_a_name_never_created_fails_and_of_a_revoked_key_says_so(
    server: Server,
) -> None:
    create_key(server, "delta")
    first = guidepost_command(server.database_url, "revokekey", "delta")
    second = guidepost_command(server.database_url, "revokekey", "delta")
    unknown = guidepost_command(server.database_url, "revokekey", "no-such-key")

    assert first.returncode == 0 and "Revoked the agent key delta" in first.stdout
    assert second.returncode == 0 and "already revoked" in second.stdout
    assert unknown.returncode != 0 and "no key is named 'no-such-key'" in unknown.stderr


# --- 401 ---------------------------------------------------------------------------------------


def challenged(response: httpx2.Response, error: str, *, invalid_token: bool) -> None:
    http_refusal(response, 401, error)
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer "), challenge
    assert ('error="invalid_token"' in challenge) is invalid_token


def api_get(server: Server, path: str, headers: dict[str, str]) -> httpx2.Response:
    with http_client(timeout=30) as http:
        return http.get(server.base + path, headers=headers)


def test_a_keys_own_burst_reaches_the_server_with_the_key(server: Server) -> None:
    """`createkey --rate-burst` is applied over HTTP: the gate hands the key's limits,
    cached with the key, to the guards (the server's own burst is a million here)."""
    done = guidepost_command(
        server.database_url, "createkey", "zeta", "--rate-burst", "2", "--rate-per-second", "0.01"
    )
    assert done.returncode == 0, done.stderr
    key = done.stdout.splitlines()[-1]
    ok(server.base, "guide_flows", {}, key=key)
    ok(server.base, "guide_flows", {}, key=key)

    assert fail(server.base, "guide_flows", {}, key=key)["error"] == "rate limited"


def test_a_call_without_a_key_is_refused_401_with_a_bearer_challenge(server: Server) -> None:
    response = post(server.base, "guide_flows", {})

    challenged(response, "key required", invalid_token=False)
    assert "Authorization: Bearer" in response.json()["next"]
    # docs/tools.md shows this body as it is.
    assert f"    {response.text}\n" in (REPO / "docs" / "tools.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("key", ["gpk_" + "x" * 43, "not-a-key", "gpk_"])
def test_an_unknown_key_is_refused_401_on_mcp_and_on_the_api(server: Server, key: str) -> None:
    challenged(post(server.base, "guide_flows", {}, key=key), "invalid key", invalid_token=True)
    challenged(api_get(server, "/api/runs", bearer(key)), "invalid key", invalid_token=True)


def test_a_revoked_key_is_refused_401_on_mcp_and_on_the_api(server: Server) -> None:
    key = create_key(server, "epsilon")
    ok(server.base, "guide_flows", {}, key=key)
    revoke_key(server, "epsilon")
    time.sleep(REVOCATION_SECONDS + 0.5)  # the server remembers a key at most this long

    challenged(post(server.base, "guide_flows", {}, key=key), "key revoked", invalid_token=True)
    challenged(api_get(server, "/api/runs", bearer(key)), "key revoked", invalid_token=True)


@pytest.mark.parametrize("parameter", ["access_token", "key", "token", "api_key"])
def test_a_key_in_the_query_string_is_never_read(
    server: Server, alpha: str, parameter: str
) -> None:
    response = post(server.base, "guide_flows", {}, path=f"/mcp/?{parameter}={alpha}")
    challenged(response, "key required", invalid_token=False)
    api = api_get(server, f"/api/runs?{parameter}={alpha}", {})
    assert api.status_code == 401 and api.headers["www-authenticate"].startswith("Bearer ")


@pytest.mark.parametrize("header", ["Basic YWxwaGE6eA==", "Bearer", "Token {key}", "{key}"])
def test_a_key_not_sent_as_bearer_is_not_a_key(server: Server, alpha: str, header: str) -> None:
    response = post(
        server.base, "guide_flows", {}, headers={"Authorization": header.format(key=alpha)}
    )
    challenged(response, "key required", invalid_token=False)


def test_no_tool_runs_for_a_refused_request(server: Server) -> None:
    count = "from runs_app.models import Run\nresult = Run.objects.count()"
    before = django_eval(server.database_url, count)
    post(server.base, "guide_start", {"flow_id": "refund_request"})
    post(server.base, "guide_start", {"flow_id": "refund_request"}, key="gpk_unknown")
    assert django_eval(server.database_url, count) == before


# --- what the tools see of a key -----------------------------------------------------------------


def test_a_run_belongs_to_the_key_that_started_it_and_each_step_names_its_caller(
    server: Server, alpha: str
) -> None:
    run_id = start(server, alpha)
    ok(server.base, "guide_answer", {"run_id": run_id, "values": ORDER}, key=alpha)

    stored = django_eval(
        server.database_url,
        "from runs_app.models import Run\n"
        f"run = Run.objects.get(public_id={run_id!r})\n"
        "result = [run.owner, [s.caller for s in run.steps.order_by('seq')]]",
    )
    assert stored == ["key:alpha", ["key:alpha", "key:alpha"]]


def test_failures_are_counted_per_key(server: Server, alpha: str, beta: str) -> None:
    ok(server.base, "guide_flows", {}, key=alpha)
    ok(server.base, "guide_flows", {}, key=beta)
    # One conversation (its ref: each request comes on a connection of its own).
    call = {"flow_id": "zz", "ref": "T-1"}
    for attempt in (1, 2, 3):
        error = fail(server.base, "guide_start", call, key=alpha)
        assert error["attempt"] == attempt
    first_of_beta = fail(server.base, "guide_start", call, key=beta)
    assert (first_of_beta["attempt"], first_of_beta["retryable"]) == (1, True)
    assert "repeated" not in first_of_beta


# --- ownership -----------------------------------------------------------------------------------


def without(error: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The error object with the run id it names replaced, so two can be compared."""
    return {k: v.replace(run_id, "<id>") if isinstance(v, str) else v for k, v in error.items()}


CALLS = {
    "guide_status": {},
    "guide_answer": {"choice": "damaged"},
    "guide_back": {},
    "guide_close": {"reason": "test"},
}


@pytest.mark.parametrize("tool", CALLS)
def test_another_keys_run_is_refused_exactly_like_a_run_that_never_existed(
    server: Server, alpha: str, beta: str, tool: str
) -> None:
    theirs = start(server, alpha, **ORDER)
    never = "r_" + "Q" * 22

    ok(server.base, "guide_flows", {}, key=beta)  # a new streak
    on_theirs = fail(server.base, tool, {"run_id": theirs, **CALLS[tool]}, key=beta)
    ok(server.base, "guide_flows", {}, key=beta)
    on_none = fail(server.base, tool, {"run_id": never, **CALLS[tool]}, key=beta)

    assert on_theirs["error"] == "run not found"
    assert without(on_theirs, theirs) == without(on_none, never)
    status = ok(server.base, "guide_status", {"run_id": theirs}, key=alpha)
    assert (status["state"], status["node"]["id"]) == ("active", "n_reason")  # untouched


def test_the_failure_count_on_another_keys_run_is_that_of_a_run_that_never_existed(
    server: Server, alpha: str, beta: str
) -> None:
    """A streak is on a run only when the caller may see it, so ``attempt`` does not tell
    that a run exists: another key's id counts like a random one, on the call's
    connection (each request here has its own), never on that run."""
    theirs = start(server, alpha)

    ok(server.base, "guide_flows", {}, key=beta)
    first = [fail(server.base, "guide_status", {"run_id": theirs}, key=beta) for _ in "abc"]
    ok(server.base, "guide_flows", {}, key=beta)
    never = "r_" + "B" * 22
    second = [fail(server.base, "guide_status", {"run_id": never}, key=beta) for _ in "abc"]

    assert [e["attempt"] for e in first] == [e["attempt"] for e in second] == [1, 1, 1]
    assert not any("on this run" in e["next"] for e in first + second)


def test_not_found_candidates_come_only_from_the_callers_own_runs(
    server: Server, alpha: str, beta: str
) -> None:
    theirs = start(server, alpha)
    near = theirs[:-1] + ("A" if theirs[-1] != "A" else "B")

    own = fail(server.base, "guide_status", {"run_id": near}, key=alpha)
    other = fail(server.base, "guide_status", {"run_id": near}, key=beta)

    assert theirs in own["candidates"]
    assert theirs not in str(other)


def test_the_api_with_a_key_lists_and_reads_only_that_keys_runs(
    server: Server, alpha: str, beta: str
) -> None:
    mine = start(server, beta)
    theirs = start(server, alpha)

    listed = api_get(server, "/api/runs?per_page=200", bearer(beta))
    assert listed.status_code == 200, listed.text
    assert {row["owner"] for row in listed.json()["items"]} == {"key:beta"}
    assert mine in {row["run_id"] for row in listed.json()["items"]}
    assert api_get(server, f"/api/runs/{mine}", bearer(beta)).status_code == 200
    on_theirs = api_get(server, f"/api/runs/{theirs}", bearer(beta))
    on_none = api_get(server, "/api/runs/r_" + "Z" * 22, bearer(beta))
    assert on_theirs.status_code == on_none.status_code == 404
    assert without(on_theirs.json(), theirs) == without(on_none.json(), "r_" + "Z" * 22)


def test_the_api_with_a_key_does_not_read_flows(server: Server, alpha: str) -> None:
    response = api_get(server, "/api/flows", bearer(alpha))
    http_refusal(response, 403, "permission denied")


def test_a_key_sent_with_every_call_of_an_sdk_client_reaches_the_tools(
    server: Server, alpha: str
) -> None:
    """The MCP SDK's client, with the key on its HTTP client, both protocol eras."""
    import anyio
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import Implementation

    async def walk() -> str:
        async with (
            async_http_client(headers=bearer(alpha)) as http,
            Client(
                streamable_http_client(server.url, http_client=http),
                client_info=Implementation(name="keys-test", version="1.2"),
            ) as client,
        ):
            result = await client.call_tool("guide_start", {"flow_id": "refund_request"})
            assert not result.is_error, result.content
            return str(result.structured_content["run_id"])  # type: ignore[index]

    run_id = anyio.run(walk)
    owner = django_eval(
        server.database_url,
        f"from runs_app.models import Run\nresult = Run.objects.get(public_id={run_id!r}).owner",
    )
    assert owner == "key:alpha"
    is_error, _ = outcome(post(server.base, "guide_status", {"run_id": run_id}, key=alpha))
    assert not is_error


def test_the_smoke_script_walks_with_a_key_and_says_when_one_is_missing(
    server: Server, alpha: str
) -> None:
    script = [sys.executable, str(REPO / "scripts" / "mcp_smoke.py"), "--url", server.url]
    env = {k: v for k, v in os.environ.items() if k != "GUIDEPOST_KEY"}

    with_key = subprocess.run(
        [*script, "--key", alpha], capture_output=True, text=True, timeout=120, env=env
    )
    without = subprocess.run(script, capture_output=True, text=True, timeout=120, env=env)

    assert with_key.returncode == 0, with_key.stdout + with_key.stderr
    assert without.returncode == 1
    assert "refused the key: key required; pass --key" in without.stderr
