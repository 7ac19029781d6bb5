from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import Server, copy_flows, fresh_database, start_server

# Run in an environment of its own by test_langchain_client (it needs langchain and mcp<2);
# never imported here, not even to look for doctests.
collect_ignore = ["runs_app/langchain_probe.py"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real server per test module, on its own database and flows copy."""
    tmp = tmp_path_factory.mktemp("server")
    with fresh_database(tmp) as database_url:
        running = start_server(
            database_url=database_url, flows_dir=copy_flows(tmp / "flows"), log=tmp / "server.log"
        )
        try:
            yield running
        finally:
            running.stop()


@pytest.fixture
def flows_copy(tmp_path: Path) -> Path:
    return copy_flows(tmp_path / "flows")
