"""One step through the service and through the dispatcher, on a real database.

    python -m bench.service_bench --database sqlite:////tmp/x.sqlite3 [--runs 200]

Run in a process of its own (Django reads DATABASE_URL once): ``bench.run`` starts one
per database. Each run is started with the bench flow's prefill (not timed), then every
plain answer of it is timed: through ``services.run_answer`` for half of the runs and
through the dispatcher (guards, rate limit, audit record) for the other half,
alternately. Prints one JSON object: samples' statistics and each path's statements.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.stats import summary
from bench.synthetic import LATER, prefill, write_flows_dir


def setup(database_url: str, flows_dir: Path) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ["GUIDEPOST_FLOWS_DIR"] = str(flows_dir)
    os.environ["GUIDEPOST_RATE_BURST"] = "1000000000"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "guidepost.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def measure(runs: int) -> dict[str, Any]:
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    from access_app import guards
    from access_app.callers import Transport
    from guidepost.mcp.dispatch import dispatch
    from runs_app import agent_steps as services

    agent = Transport(peer="127.0.0.1", client_name="bench", client_version="1")
    caller = guards.authenticate(agent)
    values = prefill()
    flow_id = "bench_0000"
    labels = ["yes"] * LATER

    def service_step(run_id: str, choice: str) -> None:
        services.run_answer(caller=caller, run_id=run_id, choice=choice, values=None, at=None)

    def dispatched_step(run_id: str, choice: str) -> None:
        outcome = dispatch("guide_answer", {"run_id": run_id, "choice": choice}, agent)
        if outcome.is_error:
            raise SystemExit(f"guide_answer failed: {outcome.payload}")

    def new_run() -> str:
        started = services.run_start(caller=caller, flow_id=flow_id, values=values, ref=None)
        return str(started["run_id"])

    # Warm up both paths (the flow's pinned version, prepared caches, the connection).
    for path in (service_step, dispatched_step):
        run_id = new_run()
        for label in labels:
            path(run_id, label)
    samples: dict[str, list[float]] = {"service": [], "dispatch": []}
    started = time.perf_counter()
    for i in range(runs):
        name, path = ("service", service_step) if i % 2 == 0 else ("dispatch", dispatched_step)
        run_id = new_run()
        for label in labels:
            t0 = time.perf_counter()
            path(run_id, label)
            samples[name].append((time.perf_counter() - t0) * 1000)
    elapsed = time.perf_counter() - started
    statements: dict[str, list[str]] = {}
    for name, path in (("service", service_step), ("dispatch", dispatched_step)):
        run_id = new_run()
        path(run_id, labels[0])  # the step counted is the second one: nothing special
        with CaptureQueriesContext(connection) as captured:
            path(run_id, labels[1])
        statements[name] = [q["sql"][:120] for q in captured.captured_queries]
    reset_queries()
    return {
        "vendor": connection.vendor,
        "service": summary(samples["service"]),
        "dispatch": summary(samples["dispatch"]),
        "queries": {name: len(sqls) for name, sqls in statements.items()},
        "statements": statements,
        "elapsed_s": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", required=True)
    parser.add_argument("--runs", type=int, default=200)
    options = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="guidepost-bench-service-"))
    setup(options.database, write_flows_dir(tmp / "flows", 1))
    json.dump(measure(options.runs), sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
