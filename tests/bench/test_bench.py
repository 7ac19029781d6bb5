"""CI only checks that the bench runs and writes every figure it promises; the figures
themselves are read by people (ADR 0039), never compared with a time here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.run import ratios
from tests.support.servers import REPO, uses_postgres

SUMMARY = {"n", "p50", "p95", "p99", "max"}
E2E = {
    "workers",
    "concurrency",
    "p50",
    "p95",
    "floor_p50",
    "floor_p95",
    "ratio_p50",
    "ratio_p95",
    "p99",
    "max",
    "steps_per_s",
    "floor_calls_per_s",
    "floor_alone_p99",
    "store_p50",
    "store_p95",
    "store_ratio_p95",
    "ratio_to_store_p95",
    "store_calls_per_s",
    "store_alone_p99",
    "errors",
}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_the_engine_bench_times_the_three_transitions_and_the_control_in_microseconds() -> None:
    out = json.loads(run("bench.engine_bench", "--n", "20").stdout)

    assert (out["unit"], out["nodes"]) == ("us", 40)
    for transition in ("start_prefill_fold", "answer_fold", "answer_plain", "control"):
        assert set(out[transition]) == SUMMARY


@pytest.mark.slow
def test_the_quick_bench_writes_every_part_and_prints_its_table(tmp_path: Path) -> None:
    postgres = os.environ["DATABASE_URL"].split("?")[0] if uses_postgres() else ""
    out = tmp_path / "bench.json"

    done = run("bench.run", "--quick", "--out", str(out), "--postgres", postgres)

    data = json.loads(out.read_text())
    assert data["quick"] is True
    assert {"when", "commit", "machine", "engine", "service", "e2e", "footprint", "hostile"} <= set(
        data
    )
    vendors = {"sqlite", "postgresql"} if postgres else {"sqlite"}
    assert set(data["service"]) == vendors
    for service in data["service"].values():
        assert set(service["service"]) == set(service["dispatch"]) == SUMMARY
        assert {"service", "dispatch", "extra"} <= set(service["queries"])
    assert set(data["e2e"]) == vendors
    for settings in data["e2e"].values():
        assert settings
        for figures in settings.values():
            assert E2E <= set(figures)
    footprint = data["footprint"]
    assert {"load_s", "rss_flows_mb", "flows"} <= set(footprint["catalog"])
    assert {"start_s", "rss_mb"} <= set(footprint["server"]["many"])
    assert "mb_per_10000_runs" in footprint["storage"]["sqlite"]
    hostile = data["hostile"]
    assert all({"kb", "cpu_ms", "outcome"} <= set(text) for text in hostile["parse"].values())
    server = hostile["server"]
    assert set(server["calm"]) == set(server["hostile"]) == SUMMARY
    assert set(server["delay"]) == {"p50", "p95", "p99"}
    assert server["hostile"]["n"] > 0 and server["drafts"]["n"] > 0 and not server["errors"]
    assert all({"target", "value", "met"} <= set(t) for t in data["targets"])
    assert data["ratios"]["engine_to_control_p95"] > 0
    assert data["ratios"]["storage_kb_sqlite"] > 0
    assert "steps/s" in done.stdout and "p95" in done.stdout


def test_the_ratios_are_each_of_two_figures_of_the_same_run() -> None:
    e2e = {
        "w1_c1": {"ratio_p95": 2.5, "store_ratio_p95": 1.2},
        "w2_c64": {"steps_per_s": 150.0, "floor_calls_per_s": 600.0, "p99": 90.0},
    }
    e2e["w2_c64"] |= {"floor_alone_p99": 60.0, "store_calls_per_s": 300.0, "store_alone_p99": 75.0}
    data = {
        "engine": {"answer_plain": {"p95": 9.0}, "control": {"p95": 3.0}},
        "e2e": {"sqlite": e2e},
        "footprint": {"storage": {"sqlite": {"bytes_per_run": 12_500.0}}},
    }
    found = ratios(data)
    assert found["engine_to_control_p95"] == 3.0
    assert found["e2e_c1_sqlite"] == 2.5
    assert (found["c64_share_sqlite"], found["c64_p99_sqlite"]) == (0.25, 1.5)
    # The store floor's own, against the same floor.
    assert found["store_e2e_c1_sqlite"] == 1.2
    assert (found["store_c64_share_sqlite"], found["store_c64_p99_sqlite"]) == (0.5, 1.25)
    assert found["storage_kb_sqlite"] == 12.5
    # A part not measured (no PostgreSQL) has no ratio, not a zero.
    assert found["c64_share_postgresql"] is None and found["storage_kb_postgresql"] is None
    assert found["store_c64_share_postgresql"] is None
