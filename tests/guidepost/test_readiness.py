"""``/readyz`` follows the database (docs/deploy.md): 200 on a healthy start, 503 ``not
ready`` once the database goes away, and 200 again once it is back, without a restart;
``/healthz`` answers throughout. A load balancer relies on both turns: one that never
came would keep sending calls to an instance that cannot serve them, or never send any
again to one that can.

How the database goes away, on the pass's database: SQLite's directory is moved away (a
volume gone) and back; PostgreSQL is reached through a TCP proxy that is cut (new
connections refused, open ones reset) and restored.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.mcp_http import http_get
from tests.support.servers import Server, copy_flows, fresh_database, start_server, uses_postgres
from tests.support.tcp_proxy import TcpProxy
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

# Seconds the turn may take: a readiness check is kept 1 s, waits 2 s for the database,
# and PostgreSQL's pool tries again to connect after about a second.
TURN = 10.0


@contextmanager
def served(tmp_path: Path) -> Iterator[tuple[Server, Callable[[], None], Callable[[], None]]]:
    """A server, and how to take its database away and bring it back."""
    (tmp_path / "database").mkdir()
    with fresh_database(tmp_path / "database") as database_url:
        if uses_postgres():
            parts = urlsplit(database_url)
            proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
            down, up = proxy.cut, proxy.restore
            database_url = proxy.url(database_url)
        else:
            where = Path(database_url.removeprefix("sqlite:///")).parent
            away = where.with_name("database.away")

            def down() -> None:
                os.rename(where, away)

            def up() -> None:
                os.rename(away, where)

        server = start_server(
            database_url=database_url,
            flows_dir=copy_flows(tmp_path / "flows"),
            log=tmp_path / "server.log",
        )
        try:
            yield server, down, up
        finally:
            server.stop()
            if uses_postgres():
                proxy.cut()


def readiness(server: Server) -> int:
    return http_get(server.base + "/readyz", timeout=10).status_code


def turns_to(server: Server, status: int) -> None:
    wait_until(lambda: readiness(server) == status, TURN, 0.05, message=server.output)


def test_readyz_is_503_while_the_database_is_away_and_200_once_it_is_back(
    tmp_path: Path,
) -> None:
    with served(tmp_path) as (server, down, up):
        assert readiness(server) == 200

        down()
        turns_to(server, 503)
        body = http_get(server.base + "/readyz", timeout=10).json()
        assert (body["error"], body["retryable"]) == ("not ready", True)
        assert http_get(server.base + "/healthz", timeout=10).status_code == 200

        up()
        turns_to(server, 200)
        assert "Traceback" not in server.output()
