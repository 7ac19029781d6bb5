"""CI only checks that the bench runs and writes every figure it promises; the figures
themselves are read by people (ADR 0039), never compared with a time here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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
KINDS = {
    "label",
    "check",
    "lookup",
    "check_ratio_p50",
    "check_ratio_p95",
    "lookup_ratio_p50",
    "lookup_ratio_p95",
    "errors",
    "endpoint_cpu_ms",
}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_the_engine_bench_times_each_transition_and_the_control_in_microseconds() -> None:
    out = json.loads(run("bench.engine_bench", "--n", "20").stdout)

    assert (out["unit"], out["nodes"]) == ("us", 40)
    for transition in (
        "start_prefill_fold",
        "answer_fold",
        "answer_plain",
        "answer_check",
        "answer_lookup",
        "control",
    ):
        assert set(out[transition]) == SUMMARY


def quick_bench(part: str, tmp_path: Path) -> tuple[dict[str, Any], str]:
    """``bench.run --quick`` of one part, on this pass's database: (its JSON, its table)."""
    out = tmp_path / "bench.json"
    on = ["--postgres", ""]
    if uses_postgres():
        on = ["--postgres", os.environ["DATABASE_URL"].split("?")[0], "--no-sqlite"]
    done = run("bench.run", "--quick", "--parts", part, "--out", str(out), *on)
    data = json.loads(out.read_text())
    assert data["quick"] is True
    assert {"when", "commit", "machine", part, "ratios", "targets"} <= set(data)
    assert all({"target", "value", "met"} <= set(t) for t in data["targets"])
    return data, done.stdout


VENDOR = "postgresql" if uses_postgres() else "sqlite"


# Each part on its own (together they took a minute): the bench runs every part the same
# way, one after another.
@pytest.mark.slow
def test_the_quick_bench_writes_the_engine_part_and_its_ratio(tmp_path: Path) -> None:
    data, table = quick_bench("engine", tmp_path)
    assert data["ratios"]["engine_to_control_p95"] > 0
    assert "engine answer_plain" in table and "p95" in table


@pytest.mark.slow
def test_the_quick_bench_writes_the_service_part_with_its_statements(tmp_path: Path) -> None:
    data, table = quick_bench("service", tmp_path)
    assert set(data["service"]) == {VENDOR}
    service = data["service"][VENDOR]
    assert set(service["service"]) == set(service["dispatch"]) == SUMMARY
    assert {"service", "dispatch", "extra"} <= set(service["queries"])
    assert f"service step {VENDOR}" in table


@pytest.fixture(scope="module")
def quick_e2e(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    """The e2e part's quick run, once for the tests that read it."""
    return quick_bench("e2e", tmp_path_factory.mktemp("e2e"))


@pytest.mark.slow
def test_the_quick_bench_writes_the_end_to_end_part(
    quick_e2e: tuple[dict[str, Any], str],
) -> None:
    data, table = quick_e2e
    assert set(data["e2e"]) == {VENDOR}
    assert data["e2e"][VENDOR]
    for figures in data["e2e"][VENDOR].values():
        assert E2E <= set(figures)
    assert "steps/s" in table and "p95" in table


@pytest.mark.slow
def test_the_quick_bench_times_a_check_and_a_lookup_step_beside_a_label_step(
    quick_e2e: tuple[dict[str, Any], str],
) -> None:
    data, table = quick_e2e
    kinds = data["e2e_kinds"][VENDOR]["w1_c1"]
    assert KINDS <= set(kinds)
    # Each step answered, the lookup's endpoint called and answering, nothing failed.
    assert all(kinds[step]["n"] > 0 for step in ("label", "check", "lookup"))
    assert kinds["errors"] == 0, kinds["error_samples"]
    assert data["ratios"][f"check_c1_{VENDOR}"] == kinds["check_ratio_p95"] > 0
    assert data["ratios"][f"lookup_c1_{VENDOR}"] == kinds["lookup_ratio_p95"] > 0
    for step in ("label", "check", "lookup"):
        assert f"e2e {VENDOR} w1_c1 {step} step" in table
    assert "the label step's" in table


@pytest.mark.slow
def test_the_quick_bench_writes_the_footprint_part(tmp_path: Path) -> None:
    data, table = quick_bench("footprint", tmp_path)
    footprint = data["footprint"]
    assert {"load_s", "rss_flows_mb", "flows"} <= set(footprint["catalog"])
    assert {"start_s", "rss_mb"} <= set(footprint["server"]["many"])
    assert set(footprint["storage"]) == {VENDOR}
    assert "mb_per_10000_runs" in footprint["storage"][VENDOR]
    assert data["ratios"][f"storage_kb_{VENDOR}"] > 0
    assert f"storage {VENDOR}" in table
    commands = footprint["commands"]
    assert set(commands) == {"drafts", "webhook_list", "migrate_dry_run"}
    assert all(c["wall_s"] > 0 and c["cpu_s"] > 0 for c in commands.values())
    assert "guidepost-mcp webhook list" in table


@pytest.mark.slow
def test_the_quick_bench_writes_the_hostile_part(tmp_path: Path) -> None:
    data, table = quick_bench("hostile", tmp_path)
    hostile = data["hostile"]
    assert all({"kb", "cpu_ms", "outcome"} <= set(text) for text in hostile["parse"].values())
    server = hostile["server"]
    assert set(server["calm"]) == set(server["hostile"]) == SUMMARY
    assert set(server["delay"]) == {"p50", "p95", "p99"}
    assert server["hostile"]["n"] > 0 and server["drafts"]["n"] > 0 and not server["errors"]
    assert "delay by five hostile drafts" in table


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
        "e2e_kinds": {"sqlite": {"w1_c1": {"check_ratio_p95": 1.05, "lookup_ratio_p95": 1.4}}},
    }
    found = ratios(data)
    assert found["engine_to_control_p95"] == 3.0
    assert found["e2e_c1_sqlite"] == 2.5
    assert (found["c64_share_sqlite"], found["c64_p99_sqlite"]) == (0.25, 1.5)
    # The store floor's own, against the same floor.
    assert found["store_e2e_c1_sqlite"] == 1.2
    assert (found["store_c64_share_sqlite"], found["store_c64_p99_sqlite"]) == (0.5, 1.25)
    assert found["storage_kb_sqlite"] == 12.5
    # Issue 49's: the check's and the lookup's p95 to the label step's beside them.
    assert (found["check_c1_sqlite"], found["lookup_c1_sqlite"]) == (1.05, 1.4)
    # A part not measured (no PostgreSQL) has no ratio, not a zero.
    assert found["c64_share_postgresql"] is None and found["storage_kb_postgresql"] is None
    assert found["store_c64_share_postgresql"] is None
    assert found["lookup_c1_postgresql"] is None
