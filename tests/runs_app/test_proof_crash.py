"""Proof (issue 11, point 7): a server killed with SIGKILL at random moments, 10 times,
while 4 agents advance runs, loses no acknowledged step and adds none (ADR 0028). The
10 kills are 5 rounds of 2, each round a test of its own on a database of its own.

The agents retry every call that got no answer with the same arguments (``request_id``
on a start, ``at`` on an answer) until it is acknowledged, and send every acknowledged
answer once more on purpose. The server is restarted on the same port after each kill.
Afterwards each run's stored steps are exactly the acknowledged calls (one step per
call, whatever the retries), and ``guidepost-mcp verify`` replays every run cleanly.
Runs on file SQLite, and on PostgreSQL in the PostgreSQL pass.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.guidepost.test_connections import alive, children_of
from tests.support.agents import STEPS_OF_RUNS, Agent, steps_problems
from tests.support.servers import (
    Server,
    copy_flows,
    django_eval,
    free_port,
    fresh_database,
    guidepost_command,
    start_server,
)

pytestmark = pytest.mark.slow

AGENTS = 4
ROUNDS = 5
KILLS = 2  # in each round: 10 in all
# How long the server serves before each kill: a random moment in this range (seconds).
SERVE_BETWEEN = (0.3, 1.5)
SEED = 20261130
# An answer budget no agent reaches: the agents stop when the kills are over.
UNBOUNDED = 10**6
# A restart right after a kill may find the port still held for a moment by the dying
# process's socket; it is tried again, this many times at most.
START_TRIES = 5


def kill(server: Server) -> None:
    """SIGKILL the server and every process it started, then reap it."""
    pids = [pid for pid in children_of(server.process.pid) if alive(pid)]
    for pid in [server.process.pid, *pids]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    server.process.wait(timeout=30)


def restart(database_url: str, flows: Path, log: Path, port: int) -> Server:
    for attempt in range(START_TRIES):
        try:
            return start_server(database_url=database_url, flows_dir=flows, log=log, port=port)
        except RuntimeError:
            if attempt == START_TRIES - 1:
                raise
            time.sleep(0.5)
    raise AssertionError("unreachable")


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_sigkill_at_random_moments_loses_no_acknowledged_step_and_retries_add_none(
    round_: int, tmp_path: Path
) -> None:
    chance = random.Random(SEED + round_)
    port = free_port()
    flows = copy_flows(tmp_path / "flows")
    with fresh_database(tmp_path) as database_url:
        server = start_server(
            database_url=database_url, flows_dir=flows, log=tmp_path / "server0.log", port=port
        )
        stop = threading.Event()
        agents = [
            Agent(server.base, f"agent{n}", UNBOUNDED, stop, retry_faults=True, duplicate=True)
            for n in range(AGENTS)
        ]
        threads = [threading.Thread(target=agent.run) for agent in agents]
        restarts: list[float] = []
        try:
            for thread in threads:
                thread.start()
            for number in range(1, KILLS + 1):
                time.sleep(chance.uniform(*SERVE_BETWEEN))
                kill(server)
                down = time.monotonic()
                server = restart(database_url, flows, tmp_path / f"server{number}.log", port)
                restarts.append(round(time.monotonic() - down, 1))
            time.sleep(SERVE_BETWEEN[1])  # a last stretch of calls on the last server
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=60)
            server.stop()
        print("restarts took (s):", restarts)
        print("answers:", [agent.answered() for agent in agents])
        print("tries without an answer:", [agent.transport_errors for agent in agents])
        stored = django_eval(database_url, STEPS_OF_RUNS)
        verified = guidepost_command(database_url, "verify")

    assert [f for agent in agents for f in agent.failures] == []
    # The kills hit calls in flight, and calls were acknowledged between them.
    assert sum(agent.transport_errors for agent in agents) > 0
    assert all(agent.answered() > 0 for agent in agents)
    assert steps_problems(agents, stored) == []
    assert verified.returncode == 0, verified.stdout + verified.stderr
