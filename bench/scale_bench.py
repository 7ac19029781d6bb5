"""What one PostgreSQL carries: bytes, rows, index growth, WAL and steps per second per run.

    python -m bench.scale_bench --database postgres://postgres@127.0.0.1:5432/scale_bench \\
        [--runs 2000] [--threads 1,4,8] [--seconds 10]

The database named in ``--database`` is dropped (if there) and created afresh on the same
server, then dropped again at the end: give it a name of its own. Each run is the bench
flow walked to its end through the dispatcher, as an agent's calls go (``guide_start``
with the prefill, then eight ``guide_answer``: 9 steps, each with its rate-limit upsert
and audit record), on one connection. After ``--runs`` runs and again after twice as
many, it records each table's and each index's size (``pg_relation_size``, after
``VACUUM ANALYZE`` so the visibility map and statistics are those of a settled table),
its rows and their average live size, the ledger's seals for the phase
(``ledger.seal_all``), the WAL written (``pg_current_wal_lsn`` before and after), the
steps per second of that single connection, and the CPU the walking process and the
database's server processes spent per step (read from /proc: run it on the database's
machine). Then, for each ``--threads`` count, that many threads each on a connection of
its own walk runs for ``--seconds``: steps per second of one process against the
database (the GIL and the database share the machine's cores; the figure is what this
machine gives, not what PostgreSQL alone could). The 1-minute load average is recorded
beside every figure. Prints one JSON object (docs/research/scale.md reads it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bench.synthetic import LATER, prefill, write_flows_dir

FLOW_ID = "bench_0000"


def load() -> float:
    return os.getloadavg()[0]


def recreate(database_url: str) -> None:
    import psycopg

    parts = urlsplit(database_url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres", query=""))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop(database_url: str) -> None:
    import psycopg

    parts = urlsplit(database_url)
    admin = urlunsplit(parts._replace(path="/postgres", query=""))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{parts.path.lstrip("/")}" WITH (FORCE)')


def setup(database_url: str, flows_dir: Path) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ["GUIDEPOST_FLOWS_DIR"] = str(flows_dir)
    os.environ["GUIDEPOST_RATE_BURST"] = "1000000000"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "guidepost.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def walk(runs: int, client: str = "bench") -> int:
    """Walk ``runs`` runs to their end through the dispatcher; the steps taken."""
    from access_app.callers import Transport
    from guidepost.mcp.dispatch import dispatch

    agent = Transport(peer="127.0.0.1", client_name=client, client_version="1")
    values = prefill()
    steps = 0
    for _ in range(runs):
        started = dispatch("guide_start", {"flow_id": FLOW_ID, "values": values}, agent)
        if started.is_error:
            raise SystemExit(f"guide_start failed: {started.payload}")
        run_id = started.payload["run_id"]
        steps += 1
        for _ in range(LATER):
            answered = dispatch("guide_answer", {"run_id": run_id, "choice": "yes"}, agent)
            if answered.is_error:
                raise SystemExit(f"guide_answer failed: {answered.payload}")
            steps += 1
    return steps


def backend_cpu() -> dict[int, float]:
    """CPU seconds (user + system) each server process on this database has used so far,
    read from /proc: the database runs on this machine."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        )
        pids = [int(row[0]) for row in cursor.fetchall()]
        cursor.execute("SELECT pg_backend_pid()")
        pids.append(int(cursor.fetchone()[0]))
    ticks = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[pid] = (int(fields[11]) + int(fields[12])) / ticks
    return out


def cpu_since(before: dict[int, float]) -> float:
    after = backend_cpu()
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def wal_lsn() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()")
        return str(cursor.fetchone()[0])


def wal_bytes(since: str) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", [since])
        return int(cursor.fetchone()[0])


def sizes() -> dict[str, Any]:
    """Every table of the public schema that holds rows: its rows, heap (with TOAST),
    total, and each index's size, in bytes."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
        cursor.execute(
            """
            SELECT c.relname, c.oid,
                   pg_table_size(c.oid), pg_indexes_size(c.oid), pg_total_relation_size(c.oid)
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'public' AND c.relkind = 'r'
            ORDER BY pg_total_relation_size(c.oid) DESC
            """
        )
        tables: dict[str, Any] = {}
        for name, oid, heap, indexes, total in cursor.fetchall():
            cursor.execute(f'SELECT count(*), avg(pg_column_size(t.*)) FROM "{name}" t')
            rows, live = cursor.fetchone()
            if not rows:
                continue
            cursor.execute(
                """
                SELECT i.relname, pg_relation_size(i.oid)
                FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
                WHERE x.indrelid = %s ORDER BY i.relname
                """,
                [oid],
            )
            tables[name] = {
                "rows": int(rows),
                "live_row_bytes": float(live or 0),
                "table_bytes": int(heap),
                "index_bytes": int(indexes),
                "total_bytes": int(total),
                "indexes": {index: int(size) for index, size in cursor.fetchall()},
            }
        cursor.execute("SELECT pg_database_size(current_database())")
        database = int(cursor.fetchone()[0])
    return {"database_bytes": database, "tables": tables}


def phase(runs: int) -> dict[str, Any]:
    before = wal_lsn()
    load_before = load()
    db_cpu = backend_cpu()
    ours = time.process_time()
    began = time.perf_counter()
    steps = walk(runs)
    seconds = time.perf_counter() - began
    ours = time.process_time() - ours
    db = cpu_since(db_cpu)
    from runs_app import ledger

    sealed = ledger.seal_all(margin=0)  # the ledger's blocks for these runs, as the sealer would
    wal = wal_bytes(before)
    return {
        "seals_written": sealed,
        "runs": runs,
        "steps": steps,
        "seconds": seconds,
        "steps_per_s": steps / seconds,
        "client_cpu_ms_per_step": ours / steps * 1000,
        "database_cpu_ms_per_step": db / steps * 1000,
        "wal_bytes": wal,
        "wal_bytes_per_run": wal / runs,
        "load_before": load_before,
        "load_after": load(),
        **sizes(),
    }


def threaded(threads: int, seconds: float) -> dict[str, Any]:
    """``threads`` threads, each on a connection of its own, walking runs for ``seconds``."""
    from django.db import connection

    stop = time.monotonic() + seconds
    counts = [0] * threads
    errors: list[str] = []

    def worker(index: int) -> None:
        try:
            while time.monotonic() < stop:
                counts[index] += walk(1, client=f"bench-{index}")
        except BaseException as error:  # noqa: BLE001 (reported, not raised, in a thread)
            errors.append(repr(error))
        finally:
            connection.close()

    load_before = load()
    db_cpu = backend_cpu()
    connection.close()
    ours = time.process_time()
    began = time.perf_counter()
    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - began
    ours = time.process_time() - ours
    db = cpu_since(db_cpu)
    connection.close()
    steps = sum(counts)
    return {
        "threads": threads,
        "steps": steps,
        "seconds": elapsed,
        "steps_per_s": steps / elapsed,
        "client_cpu_ms_per_step": ours / steps * 1000 if steps else 0.0,
        "database_cpu_ms_per_step": db / steps * 1000 if steps else 0.0,
        "errors": errors[:3],
        "load_before": load_before,
        "load_after": load(),
    }


def server_settings() -> dict[str, str]:
    from django.db import connection

    names = ["server_version", "shared_buffers", "synchronous_commit", "wal_level"]
    names += ["full_page_writes", "max_connections", "wal_compression"]
    out: dict[str, str] = {}
    with connection.cursor() as cursor:
        for name in names:
            cursor.execute(f"SHOW {name}")
            out[name] = str(cursor.fetchone()[0])
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", required=True)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--threads", default="1,4,8")
    parser.add_argument("--seconds", type=float, default=10.0)
    options = parser.parse_args()
    import logging

    logging.disable(logging.INFO)  # the access log's line per call is not the point here
    recreate(options.database)
    try:
        tmp = Path(tempfile.mkdtemp(prefix="guidepost-bench-scale-"))
        setup(options.database, write_flows_dir(tmp / "flows", 1))
        walk(20)  # warm: the pinned flow version, the connection, prepared caches
        result: dict[str, Any] = {
            "cores": os.cpu_count(),
            "steps_per_run": 1 + LATER,
            "settings": server_settings(),
            "empty": sizes(),
        }
        result["first"] = phase(options.runs)
        result["second"] = phase(options.runs)
        from django.db import connection

        connection.close()  # the threads take the pool's connections
        result["threads"] = [
            threaded(int(n), options.seconds) for n in options.threads.split(",") if n
        ]
    finally:
        drop(options.database)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
