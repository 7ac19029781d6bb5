"""Memory, load time and storage, each in a process of its own.

    python -m bench.footprint catalog --flows DIR          # load a flows directory
    python -m bench.footprint storage --database URL --runs N
    python -m bench.footprint commands --database URL --flows DIR [--repeat N]

``catalog``: time to load and lint every flow of DIR (``load_catalog``, what a worker does
at start-up and on reload) and the process's resident memory before and after.
``storage``: N runs walked to their end through the dispatcher (a start with the prefill
and eight answers each, with their audit records) on a fresh database, and how much the
database grew, scaled to 10,000 runs, and each table's part of it (with its indexes; on
PostgreSQL with the row versions its updates left, which autovacuum later frees for
reuse). On PostgreSQL also the WAL a run wrote, and the growth of N more runs walked
after a ``VACUUM`` (``bytes_per_run_vacuumed``: what a database autovacuum keeps grows by,
the dead versions' space reused). ``commands``: each read command of ``guidepost-mcp``
(``drafts``, ``webhook list``, ``migrate --dry-run``) as a person types it, on a migrated
database: its wall and CPU seconds, the best of N. Each prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def catalog(flows: Path) -> dict[str, Any]:
    before = rss_mb()
    from flowcore.flow.files import load_catalog

    imported = rss_mb()
    began = time.perf_counter()
    loaded = load_catalog(flows)
    seconds = time.perf_counter() - began
    if loaded.errors:
        raise SystemExit(f"{len(loaded.errors)} lint errors in {flows}")
    return {
        "flows": len(loaded.flows),
        "nodes": sum(len(flow.nodes) for flow in loaded.flows.values()),
        "load_s": seconds,
        "rss_start_mb": before,
        "rss_imported_mb": imported,
        "rss_loaded_mb": rss_mb(),
        "rss_flows_mb": rss_mb() - imported,
    }


REPO = Path(__file__).resolve().parent.parent
READ_COMMANDS = {
    "drafts": ["drafts"],
    "webhook_list": ["webhook", "list"],
    "migrate_dry_run": ["migrate", "bench_0000", "--dry-run"],
}


def commands(database_url: str, flows: Path, repeat: int) -> dict[str, Any]:
    """Each read command's wall and CPU seconds (the best of ``repeat``), each in a new
    process as a person runs it: Python's and Django's start included."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "GUIDEPOST_FLOWS_DIR": str(flows),
        "PYTHONPATH": str(REPO),
    }
    measured: dict[str, Any] = {}
    for name, argv in READ_COMMANDS.items():
        walls, cpus = [], []
        for _ in range(repeat):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            began = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "guidepost.cli", *argv],
                env=env,
                check=True,
                capture_output=True,
                timeout=120,
            )
            walls.append(time.perf_counter() - began)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        measured[name] = {"wall_s": min(walls), "cpu_s": min(cpus), "repeat": repeat}
    return measured


def database_bytes() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            cursor.execute("PRAGMA page_count")
            pages = cursor.fetchone()[0]
            cursor.execute("PRAGMA page_size")
            return int(pages * cursor.fetchone()[0])
        cursor.execute("SELECT pg_database_size(current_database())")
        return int(cursor.fetchone()[0])


def table_bytes() -> dict[str, int]:
    """Each table's bytes with its indexes (and on PostgreSQL its TOAST), by table name."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT m.tbl_name, SUM(d.pgsize) FROM dbstat AS d"
                " JOIN sqlite_master AS m ON m.name = d.name GROUP BY m.tbl_name"
            )
        else:
            cursor.execute(
                "SELECT relname, pg_total_relation_size(oid) FROM pg_class"
                " WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace"
            )
        return {str(name): int(size) for name, size in cursor.fetchall()}


def storage(database_url: str, runs: int) -> dict[str, Any]:
    from bench.service_bench import setup
    from bench.synthetic import LATER, prefill, write_flows_dir

    tmp = Path(tempfile.mkdtemp(prefix="guidepost-bench-storage-"))
    setup(database_url, write_flows_dir(tmp / "flows", 1))
    from django.db import connection

    from access_app.callers import Transport
    from guidepost.mcp.dispatch import dispatch

    agent = Transport(peer="127.0.0.1", client_name="bench", client_version="1")
    values = prefill()

    def walk() -> None:
        for _ in range(runs):
            started = dispatch("guide_start", {"flow_id": "bench_0000", "values": values}, agent)
            rid = started.payload["run_id"]
            for _ in range(LATER):
                dispatch("guide_answer", {"run_id": rid, "choice": "yes"}, agent)

    postgres = connection.vendor == "postgresql"
    empty = database_bytes()
    tables_empty = table_bytes()
    wal = wal_lsn() if postgres else ""
    walk()
    full = database_bytes()
    grown = full - empty
    tables = {
        name: (size - tables_empty.get(name, 0)) / runs if runs else 0.0
        for name, size in sorted(table_bytes().items())
        if size > tables_empty.get(name, 0)
    }
    out: dict[str, Any] = {
        "vendor": connection.vendor,
        "runs": runs,
        "steps_per_run": 1 + LATER,
        "bytes_empty": empty,
        "bytes_after": full,
        "bytes_per_run": grown / runs if runs else 0.0,
        "mb_per_10000_runs": grown / runs * 10_000 / 1_048_576 if runs else 0.0,
        "table_bytes_per_run": tables,
    }
    if postgres and runs:
        out["wal_bytes_per_run"] = wal_since(wal) / runs
        with connection.cursor() as cursor:
            cursor.execute("VACUUM")
        vacuumed = database_bytes()
        walk()
        out["bytes_per_run_vacuumed"] = (database_bytes() - vacuumed) / runs
    return out


def wal_lsn() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()")
        return str(cursor.fetchone()[0])


def wal_since(lsn: str) -> int:
    """The bytes of WAL written since ``lsn``, by every session."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", [lsn])
        return int(cursor.fetchone()[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    cat = sub.add_parser("catalog")
    cat.add_argument("--flows", type=Path, required=True)
    sto = sub.add_parser("storage")
    sto.add_argument("--database", required=True)
    sto.add_argument("--runs", type=int, default=1000)
    com = sub.add_parser("commands")
    com.add_argument("--database", required=True)
    com.add_argument("--flows", type=Path, required=True)
    com.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    import logging

    logging.disable(logging.INFO)  # the access log's line per call is not the point here
    if options.what == "catalog":
        result = catalog(options.flows)
    elif options.what == "commands":
        result = commands(options.database, options.flows, options.repeat)
    else:
        result = storage(options.database, options.runs)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
