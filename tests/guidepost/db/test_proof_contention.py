"""Proof (issue 11, point 7): 8 agents × 50 answers at once on one file SQLite database,
through a real server with 2 workers: every call is answered (no "database is locked",
no "server busy" reaching a client), and every acknowledged step is stored, once
(ADR 0028).

SQLite has one writer at a time: each call's transaction starts IMMEDIATE and waits up
to GUIDEPOST_SQLITE_TIMEOUT (20 s) for the lock, and every call (the rate-limit bucket
included) writes. The proof is that under this load none of those waits runs out.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.support.agents import STEPS_OF_RUNS, Agent, steps_problems
from tests.support.servers import (
    copy_flows,
    django_eval,
    guidepost_command,
    start_server,
    uses_postgres,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(uses_postgres(), reason="a SQLite proof (it runs in the SQLite pass)"),
]

AGENTS = 8
ANSWERS = 50


def test_8_agents_answering_50_times_at_once_on_sqlite_are_all_answered_and_stored(
    tmp_path: Path,
) -> None:
    database_url = f"sqlite:///{tmp_path / 'contention.sqlite3'}"
    server = start_server(
        database_url=database_url,
        flows_dir=copy_flows(tmp_path / "flows"),
        log=tmp_path / "server.log",
        workers=2,
    )
    stop = threading.Event()
    agents = [Agent(server.base, f"agent{n}", ANSWERS, stop) for n in range(AGENTS)]
    try:
        threads = [threading.Thread(target=agent.run) for agent in agents]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
        stop.set()  # an agent still running after that (it never should) stops at once
        log = server.output()
    finally:
        server.stop()
    stored = django_eval(database_url, STEPS_OF_RUNS)
    verified = guidepost_command(database_url, "verify")

    assert [f for agent in agents for f in agent.failures] == []
    assert "database is locked" not in log
    assert [agent.answered() for agent in agents] == [ANSWERS] * AGENTS
    assert steps_problems(agents, stored) == []
    assert verified.returncode == 0, verified.stdout + verified.stderr
