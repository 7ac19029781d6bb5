"""What psycopg's pipeline mode saves a step's writes on PostgreSQL, alone: the statements
a step ends its transaction with (the run's UPDATE, the step's INSERT returning its id,
the audit record's INSERT, then COMMIT) sent three ways, each iteration calling the three
in a rotating order so all see the same machine at the same moment:

- ``one_by_one``: as guidepost sends them, a round trip each;
- ``two_pipelines``: the UPDATE with the INSERT, its row count and id read when that
  pipeline ends, then the audit INSERT with the COMMIT: what can be pipelined while the
  row count is still checked before the commit;
- ``one_pipeline``: all four and the COMMIT in one round trip, the row count read only
  after the commit (so not a way guidepost could send them as they are);
- ``one_statement``: the UPDATE and the INSERT as one statement (the INSERT takes the
  run's id from the UPDATE's ``RETURNING``, so it inserts nothing when the UPDATE
  misses), then the audit INSERT and the COMMIT, no pipeline.

    python -m bench.pipeline_bench [--database postgres://…] [--iterations 6000]

Prints p50 and p95 of each in ms, and each one's difference from ``one_by_one``. The
tables are temporary (two narrow ones: what is measured is the round trips, not the rows).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import psycopg

from bench.stats import summary


def _ways(conn: psycopg.Connection) -> dict[str, Callable[[], None]]:
    update = "UPDATE bench_run SET revision = revision + 1 WHERE id = %s"
    insert_step = "INSERT INTO bench_step (run_id, seq) VALUES (%s, %s) RETURNING id"
    insert_audit = "INSERT INTO bench_step (run_id, seq) VALUES (%s, %s)"
    update_and_insert = (
        "WITH updated AS (UPDATE bench_run SET revision = revision + 1 WHERE id = %s "
        "RETURNING id) INSERT INTO bench_step (run_id, seq) SELECT id, %s FROM updated "
        "RETURNING id"
    )

    def one_by_one() -> None:
        updating, inserting, auditing = conn.cursor(), conn.cursor(), conn.cursor()
        updating.execute(update, (1,))
        assert updating.rowcount == 1
        inserting.execute(insert_step, (1, 1))
        assert inserting.fetchone()
        auditing.execute(insert_audit, (1, 0))
        conn.commit()

    def two_pipelines() -> None:
        updating, inserting, auditing = conn.cursor(), conn.cursor(), conn.cursor()
        with conn.pipeline():
            updating.execute(update, (1,))
            inserting.execute(insert_step, (1, 1))
        assert updating.rowcount == 1
        assert inserting.fetchone()
        with conn.pipeline():
            auditing.execute(insert_audit, (1, 0))
            conn.commit()

    def one_pipeline() -> None:
        updating, inserting, auditing = conn.cursor(), conn.cursor(), conn.cursor()
        with conn.pipeline():
            updating.execute(update, (1,))
            inserting.execute(insert_step, (1, 1))
            auditing.execute(insert_audit, (1, 0))
            conn.commit()
        assert updating.rowcount == 1
        assert inserting.fetchone()

    def one_statement() -> None:
        inserting, auditing = conn.cursor(), conn.cursor()
        inserting.execute(update_and_insert, (1, 1))
        assert inserting.fetchone()
        auditing.execute(insert_audit, (1, 0))
        conn.commit()

    return {
        "one_by_one": one_by_one,
        "two_pipelines": two_pipelines,
        "one_pipeline": one_pipeline,
        "one_statement": one_statement,
    }


def measure(url: str, iterations: int) -> dict[str, dict[str, float]]:
    # As guidepost connects: statements prepared on the server after their fifth use.
    with psycopg.connect(url, prepare_threshold=5) as conn:
        conn.execute("CREATE TEMP TABLE bench_run (id int PRIMARY KEY, revision int)")
        conn.execute("CREATE TEMP TABLE bench_step (id serial PRIMARY KEY, run_id int, seq int)")
        conn.execute("INSERT INTO bench_run VALUES (1, 0)")
        conn.commit()
        ways = list(_ways(conn).items())
        samples: dict[str, list[float]] = {name: [] for name, _ in ways}
        for i in range(iterations):
            for name, way in ways[i % len(ways) :] + ways[: i % len(ways)]:
                conn.execute("SELECT 1")  # the transaction's earlier statements (its BEGIN)
                started = time.perf_counter()
                way()
                samples[name].append((time.perf_counter() - started) * 1000)
    return {name: summary(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--database",
        default=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test"),
    )
    parser.add_argument("--iterations", type=int, default=6000)
    options = parser.parse_args()
    found = measure(options.database, options.iterations)
    base = found["one_by_one"]
    for name, stats in found.items():
        p50, p95 = stats["p50"], stats["p95"]
        print(
            f"{name:14} p50 {p50:.3f} ({p50 - base['p50']:+.3f}) ms"
            f"  p95 {p95:.3f} ({p95 - base['p95']:+.3f}) ms"
        )


if __name__ == "__main__":
    main()
