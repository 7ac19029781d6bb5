"""GUIDEPOST_AUTH, listening beyond loopback, trusted proxies and revocation across
workers, each against real servers over real HTTP (ADR 0032)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import forks
from tests.support.mcp_http import http_refusal, ok, outcome, post
from tests.support.servers import (
    Server,
    copy_flows,
    django_eval,
    free_port,
    fresh_database,
    guidepost_command,
    serving,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

# The revocation latency docs/tools.md and ADR 0032 state: how long a worker may still
# accept a key after it was revoked (or say no key exists after the first was created).
REVOCATION_SECONDS = 1.0


@pytest.fixture
def open_server(tmp_path: Path) -> Iterator[Server]:
    with serving(tmp_path) as server:
        yield server


def create_key(server: Server, name: str) -> str:
    done = guidepost_command(server.database_url, "createkey", name)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1]


def unkeyed_calls_refused(server: Server, calls: int = 10) -> bool:
    """Whether ``calls`` calls without a key, each on a fresh connection, are all refused."""
    return all(post(server.base, "guide_flows", {}).status_code == 401 for _ in range(calls))


def test_a_loopback_server_without_keys_is_open_until_the_first_key_is_created(
    open_server: Server,
) -> None:
    ok(open_server.base, "guide_flows", {})

    key = create_key(open_server, "first")
    time.sleep(REVOCATION_SECONDS + 0.5)  # each worker remembers "no key yet" at most this long

    assert unkeyed_calls_refused(open_server)
    ok(open_server.base, "guide_flows", {}, key=key)


def test_revoking_every_key_does_not_open_the_server_again(open_server: Server) -> None:
    create_key(open_server, "only")
    assert guidepost_command(open_server.database_url, "revokekey", "only").returncode == 0
    time.sleep(REVOCATION_SECONDS + 0.5)

    assert unkeyed_calls_refused(open_server)


def test_required_refuses_calls_without_a_key_before_any_key_exists(tmp_path: Path) -> None:
    with serving(tmp_path, env={"GUIDEPOST_AUTH": "required"}) as server:
        http_refusal(post(server.base, "guide_flows", {}), 401, "key required")
        key = create_key(server, "agent")
        ok(server.base, "guide_flows", {}, key=key)


def test_off_on_loopback_takes_calls_without_a_key_but_never_a_bad_key(tmp_path: Path) -> None:
    with serving(tmp_path, env={"GUIDEPOST_AUTH": "off"}) as server:
        key = create_key(server, "agent")
        time.sleep(REVOCATION_SECONDS + 0.5)

        ok(server.base, "guide_flows", {})
        ok(server.base, "guide_flows", {}, key=key)
        http_refusal(post(server.base, "guide_flows", {}, key="gpk_bad"), 401, "invalid key")


@pytest.mark.parametrize("entry", [["-m", "guidepost.cli"], ["manage.py"]])
def test_off_is_refused_at_start_up_when_listening_beyond_loopback(
    tmp_path: Path, entry: list[str]
) -> None:
    """Through guidepost-mcp and manage.py alike: --host reaches the settings first."""
    port = free_port()
    with fresh_database(tmp_path) as database_url:
        done = forks.run(
            [*entry, "serve", "--host", "0.0.0.0"]
            + ["--port", str(port), "--flows", str(copy_flows(tmp_path / "flows"))],
            env={**os.environ, "DATABASE_URL": database_url, "GUIDEPOST_AUTH": "off"},
        )

    assert done.returncode != 0
    assert "guidepost: " not in done.stdout  # refused before it announces itself
    [line] = done.stderr.strip().splitlines()
    assert "GUIDEPOST_AUTH=off is refused when listening on 0.0.0.0" in line
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), 2):
        pass


def test_a_server_listening_beyond_loopback_requires_keys_before_any_exists(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, host="0.0.0.0") as server:
        http_refusal(post(server.base, "guide_flows", {}), 401, "key required")
        key = create_key(server, "agent")
        ok(server.base, "guide_flows", {}, key=key)


# --- forwarded addresses ------------------------------------------------------------------------

FORWARDED = {"X-Forwarded-For": "203.0.113.7"}
PEERS = (
    "from access_app.models import AuditRecord\n"
    "result = list(AuditRecord.objects.filter(tool='guide_flows').values_list('peer', flat=True))"
)


def test_a_forwarded_address_from_loopback_is_ignored_by_default(open_server: Server) -> None:
    started = ok(open_server.base, "guide_start", {"flow_id": "refund_request"}, headers=FORWARDED)
    ok(open_server.base, "guide_flows", {}, headers=FORWARDED)

    assert django_eval(open_server.database_url, PEERS) == ["127.0.0.1"]
    owner = django_eval(
        open_server.database_url,
        "from runs_app.models import Run\n"
        f"result = Run.objects.get(public_id={started['run_id']!r}).owner",
    )
    assert owner.startswith("anon:127.0.0.1")


def test_a_forwarded_address_from_a_trusted_proxy_is_the_peer(tmp_path: Path) -> None:
    """Behind trusted proxies keys are required (requests come from elsewhere)."""
    with serving(tmp_path, env={"GUIDEPOST_TRUSTED_PROXIES": "127.0.0.1"}) as server:
        http_refusal(post(server.base, "guide_flows", {}), 401, "key required")
        key = create_key(server, "behind-proxy")

        ok(server.base, "guide_flows", {}, key=key, headers=FORWARDED)

        assert django_eval(server.database_url, PEERS) == ["203.0.113.7"]


# --- revocation across workers ----------------------------------------------------------------


def test_a_revoked_key_stops_working_in_every_worker_within_the_cache_time(
    tmp_path: Path,
) -> None:
    """Two workers, each caching the key: after ``revokekey`` returns, no call with the key
    is accepted once REVOCATION_SECONDS have passed (the documented revocation latency)."""
    with serving(tmp_path, workers=2) as server:
        key = create_key(server, "soon-revoked")
        time.sleep(REVOCATION_SECONDS + 0.5)
        for _ in range(20):  # fresh connections: both workers cache the key as valid
            ok(server.base, "guide_flows", {}, key=key)

        done = guidepost_command(server.database_url, "revokekey", "soon-revoked")
        assert done.returncode == 0, done.stderr
        time.sleep(REVOCATION_SECONDS + 0.2)

        answers = [post(server.base, "guide_flows", {}, key=key) for _ in range(20)]
        assert [r.status_code for r in answers] == [401] * 20
        assert {r.json()["error"] for r in answers} == {"key revoked"}
        is_error, _ = outcome(post(server.base, "guide_flows", {}, key=create_key(server, "new")))
        assert not is_error


# --- uvicorn run by hand ------------------------------------------------------------------------


def outside_address() -> str | None:
    """An address of this machine that is not loopback (no packet is sent), if any."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_the_asgi_app_refuses_off_with_a_host_beyond_loopback(tmp_path: Path) -> None:
    """uvicorn run by hand (not serve) with GUIDEPOST_AUTH=off and GUIDEPOST_HOST=0.0.0.0."""
    with fresh_database(tmp_path) as database_url:
        done = forks.run(
            ["-m", "uvicorn", "guidepost.asgi:application"]
            + ["--host", "127.0.0.1", "--port", str(free_port())],
            env={
                **os.environ,
                "DATABASE_URL": database_url,
                "GUIDEPOST_AUTH": "off",
                "GUIDEPOST_HOST": "0.0.0.0",
            },
        )
    assert done.returncode != 0
    assert "GUIDEPOST_AUTH=off is refused when listening on 0.0.0.0" in done.stderr


def test_a_request_reaching_an_outside_address_needs_a_key_even_under_a_loopback_setting(
    tmp_path: Path,
) -> None:
    """uvicorn run by hand on 0.0.0.0, GUIDEPOST_HOST left at 127.0.0.1 and no key: a call
    through loopback is served, the same call through the machine's outside address is
    refused (the request arrived beyond loopback)."""
    outside = outside_address()
    if outside is None:
        pytest.skip("this machine has no address beyond loopback to call through")
    port = free_port()
    with fresh_database(tmp_path) as database_url:
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "GUIDEPOST_ALLOWED_HOSTS": f"127.0.0.1,{outside}",
        }
        migrated = forks.run(["manage.py", "migrate", "-v0"], env=env)
        assert migrated.returncode == 0, migrated.stderr
        log = (tmp_path / "uvicorn.log").open("wb")
        process = forks.start(
            ["-m", "uvicorn", "guidepost.asgi:application"]
            + ["--host", "0.0.0.0", "--port", str(port)],
            env=env,
            output=log,
        )
        try:
            inside = f"http://127.0.0.1:{port}"

            def listening() -> bool:
                try:
                    socket.create_connection(("127.0.0.1", port), 1).close()
                except OSError:
                    return False
                return True

            wait_until(listening, 60, 0.2, message=(tmp_path / "uvicorn.log").read_text)
            ok(inside, "guide_flows", {})
            http_refusal(post(f"http://{outside}:{port}", "guide_flows", {}), 401, "key required")
        finally:
            process.terminate()
            process.wait(timeout=30)
            log.close()
