"""Drafts are judged in a worker process of their own (issue 18, point 2; ADR 0062 as
amended), so their CPU never holds the serving process's interpreter lock: the result is
the domain's own judgement, a refusal comes back as itself, and a worker that hangs or
dies is replaced. What it saves other callers is `bench/hostile_bench.py`'s figure."""

from __future__ import annotations

import multiprocessing
import os
from typing import Any

import pytest

from flowcore.common.errors import Refusal, Unavailable
from flowcore.flow.drafts import check_draft
from flows_app import judging
from flows_app.catalog import current_catalog
from tests.support.paths import BUNDLED_FLOWS
from tests.support.waiting import wait_until

GOOD = (BUNDLED_FLOWS / "refund_request.yaml").read_text(encoding="utf-8")
HOSTILE = "[" + "1," * 60_000 + "1]\n"


def worker_pids() -> set[int]:
    return {p.pid for p in multiprocessing.active_children() if p.pid is not None}


def gone(pids: set[int], within: float = 10.0) -> None:
    """Until none of ``pids`` is a worker, for up to ``within`` seconds: a killed worker is
    gone once the signal is delivered and it is reaped, not at the instant it is sent."""
    wait_until(
        lambda: not pids & worker_pids(),
        within,
        0.05,
        message=lambda: f"workers still running: {pids & worker_pids()}",
    )


def test_a_draft_is_judged_in_another_process_as_the_domain_judges_it() -> None:
    categories = current_catalog().categories
    check = judging.draft_judged(GOOD, categories)

    assert check == check_draft(GOOD, categories=categories)
    assert check.flow is None  # the flow itself stays in the worker
    workers = worker_pids()
    assert workers and os.getpid() not in workers


def test_the_worker_runs_at_the_lowest_cpu_priority() -> None:
    """A draft waits for the CPU; another caller's call does not (ADR 0062)."""
    judging.draft_judged(GOOD, current_catalog().categories)

    assert {os.getpriority(os.PRIO_PROCESS, pid) for pid in worker_pids()} == {19}


def test_a_refusal_comes_back_from_the_worker_as_itself() -> None:
    with pytest.raises(Refusal) as refused:
        judging.draft_judged(HOSTILE, current_catalog().categories)

    assert refused.value.error == "draft refused"
    assert "more than 20000 values" in refused.value.reason
    assert refused.value.retryable is True


def test_a_worker_that_does_not_answer_in_time_is_replaced(monkeypatch: Any) -> None:
    judging.draft_judged(GOOD, current_catalog().categories)  # a worker is running
    before = worker_pids()
    monkeypatch.setattr(judging, "JUDGE_TIMEOUT", 0.0)
    with pytest.raises(Unavailable) as busy:
        judging.draft_judged(HOSTILE, current_catalog().categories)
    monkeypatch.undo()

    assert (busy.value.error, busy.value.retryable) == ("server busy", True)
    assert busy.value.retry_after
    assert judging.draft_judged(GOOD, current_catalog().categories).flow_id == "refund_request"
    gone(before)  # the old worker is gone


def test_a_worker_that_died_is_replaced() -> None:
    judging.draft_judged(GOOD, current_catalog().categories)
    for pid in worker_pids():
        os.kill(pid, 9)

    with pytest.raises(Unavailable):
        judging.draft_judged(GOOD, current_catalog().categories)
    assert judging.draft_judged(GOOD, current_catalog().categories).flow_id == "refund_request"


KILLED_SERVER = """
import os, sys, time
import django
django.setup()
from flows_app import judging
from flows_app.catalog import current_catalog
judging.draft_judged(sys.stdin.read(), current_catalog().categories)
import multiprocessing
print(*[p.pid for p in multiprocessing.active_children()], flush=True)
time.sleep(600)
"""


def test_the_worker_ends_when_its_server_is_killed(tmp_path: Any) -> None:
    """A server killed by SIGKILL runs no exit handler: its worker ends by itself (else
    it, and the forkserver waiting on it, would be left behind at every restart)."""
    import signal
    import subprocess
    import sys

    from tests.support.paths import REPO

    server = subprocess.Popen(
        [sys.executable, "-c", KILLED_SERVER],
        cwd=REPO,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "guidepost.settings"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(GOOD)
    server.stdin.close()
    workers = [int(pid) for pid in server.stdout.readline().split()]
    assert workers
    os.kill(server.pid, signal.SIGKILL)
    server.wait()

    alive = set(workers)

    def all_ended() -> bool:
        for pid in list(alive):
            try:
                os.kill(pid, 0)
                zombie = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
            except (ProcessLookupError, FileNotFoundError):
                zombie = True
            if zombie:
                alive.discard(pid)
        return not alive

    wait_until(all_ended, 30, 0.2, message=lambda: f"workers still alive: {alive}")
