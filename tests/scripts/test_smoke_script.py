"""scripts/mcp_smoke.py walks a flow over the real protocol against a running server."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.servers import REPO, Server, free_port

SCRIPT = REPO / "scripts" / "mcp_smoke.py"


def smoke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_smoke_script_walks_payment_failed_to_its_end(server: Server) -> None:
    done = smoke("--url", server.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[A] guide_status -> completed, outcome escalated" in done.stdout
    assert "[B]" not in done.stdout
    assert done.stdout.rstrip().endswith("smoke: OK")


def test_smoke_script_parallel_runs_do_not_disturb_each_other(server: Server) -> None:
    done = smoke("--url", server.url, "--parallel")
    assert done.returncode == 0, done.stdout + done.stderr
    answers = [line[:3] for line in done.stdout.splitlines() if "guide_answer" in line]
    assert answers[:4] == ["[A]", "[B]", "[A]", "[B]"]  # the calls interleave
    assert "[B] guide_status -> completed, outcome resolved" in done.stdout
    assert "two interleaved runs" in done.stdout


@pytest.mark.parametrize("path", ["/mcp/", "/mcp"])
def test_smoke_script_accepts_the_endpoint_with_or_without_slash(server: Server, path: str) -> None:
    done = smoke("--url", server.base + path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_smoke_script_reports_a_server_that_is_not_running() -> None:
    done = smoke("--url", f"http://127.0.0.1:{free_port()}/mcp/")
    assert done.returncode == 2
    assert "cannot reach" in done.stderr
