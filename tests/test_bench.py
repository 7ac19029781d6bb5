"""CI only checks that the benchmarks run; their numbers are read by people."""

import subprocess
import sys

import pytest

from tests.servers import REPO


def run_bench(module: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_engine_bench_prints_percentiles() -> None:
    out = run_bench("bench.engine_bench", "--n", "20")
    assert "answer (advance one node)" in out and "p99=" in out and "ratio" in out


@pytest.mark.slow
def test_mcp_bench_prints_percentiles() -> None:
    out = run_bench("bench.mcp_bench", "--n", "5")
    assert "guide_answer" in out and "p95=" in out and "ratio" in out
