"""bench.footprint's storage walk: the database's growth and each table's part of it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bench.test_bench import run
from tests.support.servers import fresh_database, uses_postgres


def test_storage_reports_each_tables_growth_per_run_within_the_databases(tmp_path: Path) -> None:
    with fresh_database(tmp_path, empty=True) as url:
        out = json.loads(
            run("bench.footprint", "storage", "--database", url, "--runs", "20").stdout
        )

    tables = out["table_bytes_per_run"]
    # Enough runs to fill pages: each run writes its row, its steps and their audit records.
    assert {"runs_app_run", "runs_app_step", "runs_app_auditrecord"} <= set(tables)
    assert all(size > 0 for size in tables.values())
    assert sum(tables.values()) <= out["bytes_per_run"] * 1.05
    if uses_postgres():  # the WAL, and the growth once VACUUM freed the dead row versions
        assert out["wal_bytes_per_run"] > 0
        assert 0 <= out["bytes_per_run_vacuumed"] <= out["bytes_per_run"]
    else:
        assert "bytes_per_run_vacuumed" not in out
