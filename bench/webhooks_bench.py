"""Webhooks under the bench's load (issue 22, point 5; ADR 0077): 64 clients walk runs of
the bench flow against ``guidepost-mcp serve`` (as ``e2e_bench``'s throughput phase), with
and without a subscription on ``run.completed`` to a receiver in a process of its own.

Rounds alternate (without, with, without, with…), each on a fresh database, so that a
machine whose load drifts shows in both. For the rounds with a subscription it then waits
for the worker to drain and checks, from the receiver's log and the database: every run
completed was delivered, verified, and no ``webhook-id`` arrived twice.

    python -m bench.webhooks_bench [--clients 64] [--seconds 20] [--rounds 2]
        [--workers 2] [--postgres postgres://…] [--deferred]

Prints the step latencies of each round, the p95 ratio with/without, and the delivery
check, as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2

from bench import e2e_bench
from bench.servers import REPO, children_of, free_port, fresh_database, start_guidepost
from bench.stats import summary
from bench.synthetic import write_flows_dir

PRIVATE = {"GUIDEPOST_WEBHOOK_ALLOW_PRIVATE": "1"}
COUNT = """
import json, django
django.setup()
from runs_app.models import Run
from events_app.models import Delivery
print(json.dumps({
    "completed": sorted(Run.objects.filter(state="completed").values_list("public_id", flat=True)),
    "deliveries": dict((s, Delivery.objects.filter(state=s).count())
                       for s in ("pending", "delivered", "failed")),
}))
"""


def django_json(database_url: str, code: str) -> Any:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "guidepost.settings",
    }
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


def subscribe(database_url: str, url: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "guidepost.cli", "webhook", "add", url, "--events", "run.completed"],
        cwd=REPO,
        env={**os.environ, "DATABASE_URL": database_url, **PRIVATE},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def start_receiver(port: int, out: Path, secret: str) -> subprocess.Popen[bytes]:
    # At the lowest CPU priority: the receiver stands for the subscriber's machine, whose
    # CPU is not the server's; here it shares the two cores with the server and the clients.
    process = subprocess.Popen(
        [
            *("nice", "-n", "19", sys.executable),
            *("-m", "bench.webhook_receiver", "--port", str(port), "--out", str(out)),
        ],
        cwd=REPO,
        env={**os.environ, "WEBHOOK_SECRET": secret},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx2.get(f"http://127.0.0.1:{port}/", timeout=1)
            return process
        except httpx2.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the receiver did not start")


def one_round(
    kind: str, postgres: str, tmp: Path, flows: Path, *, subscribed: bool, options: Any
) -> dict[str, Any]:
    with fresh_database(kind, tmp / "db", postgres) as database_url:
        receiver = None
        received = tmp / f"received-{time.monotonic_ns()}.tsv"
        received.touch()
        if subscribed:
            port = free_port()
            secret = subscribe(database_url, f"http://127.0.0.1:{port}/hook")
            receiver = start_receiver(port, received, secret)
        deferred = subscribed and options.deferred
        server = start_guidepost(
            database_url,
            flows,
            tmp / "serve.log",
            options.workers,
            env=PRIVATE,
            args=("--no-worker",) if deferred else (),
        )
        drainer = None
        try:
            workers = children_of(server.process.pid)
            cpu_before = cpu_seconds([server.process.pid]), cpu_seconds(workers)
            tally = asyncio.run(
                e2e_bench._phase(server.url, None, options.clients, options.seconds)
            )
            result: dict[str, Any] = {
                "subscribed": subscribed,
                # CPU seconds during the load: the supervisor (the webhook worker's
                # threads, with --workers > 1) and the workers serving the calls.
                "cpu_s": {
                    "supervisor": cpu_seconds([server.process.pid]) - cpu_before[0],
                    "workers": cpu_seconds(workers) - cpu_before[1],
                },
                "steps_per_s": tally.steps / tally.elapsed,  # type: ignore[attr-defined]
                "all_steps": summary(tally.answer_ms + tally.start_ms),
                "guide_answer": summary(tally.answer_ms),
                "errors": tally.errors,
            }
            if deferred:  # delivered only now, by a worker of its own
                drainer = subprocess.Popen(
                    [sys.executable, "-m", "guidepost.cli", "worker"],
                    cwd=REPO,
                    env={**os.environ, "DATABASE_URL": database_url, **PRIVATE},
                    stdout=subprocess.DEVNULL,
                )
            if subscribed:
                result["delivery"] = drained(database_url, received, options.drain)
        finally:
            server.stop()
            if drainer is not None:
                drainer.terminate()
                drainer.wait()
            if receiver is not None:
                receiver.kill()
                receiver.wait()
    return result


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the processes' own threads have used (Linux /proc)."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def drained(database_url: str, received: Path, wait: float) -> dict[str, Any]:
    """Wait (up to ``wait`` s) until every completed run's event arrived; then compare."""
    began = time.monotonic()
    while True:
        counts = django_json(database_url, COUNT)
        lines = [line.split("\t") for line in received.read_text().splitlines() if line]
        got = {run for _, kind, run, _ in lines if kind == "run.completed"}
        if set(counts["completed"]) <= got or time.monotonic() - began > wait:
            break
        time.sleep(1)
    ids = [webhook_id for webhook_id, *_ in lines]
    return {
        "completed_runs": len(counts["completed"]),
        "received": len(lines),
        "missing": len(set(counts["completed"]) - got),
        "webhook_ids_twice": len(ids) - len(set(ids)),
        "unverified": sum(1 for *_, ok in lines if ok != "1"),
        "deliveries": counts["deliveries"],
        "drained_in_s": time.monotonic() - began,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.webhooks_bench")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each (alternating)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--drain", type=float, default=120.0, help="seconds to wait for delivery")
    parser.add_argument("--postgres", default="", help="a PostgreSQL server ('' for SQLite)")
    parser.add_argument(
        "--deferred",
        action="store_true",
        help="serve --no-worker under load, deliver afterwards with guidepost-mcp worker: "
        "the outbox's cost alone, without the deliveries' CPU on the same machine",
    )
    options = parser.parse_args(argv)
    kind = "postgresql" if options.postgres else "sqlite"
    tmp = Path(tempfile.mkdtemp(prefix="guidepost-webhooks-bench-"))
    flows = write_flows_dir(tmp / "flows", 1)
    rounds = []
    for i in range(options.rounds * 2):
        subscribed = i % 2 == 1
        print(f"round {i + 1}: {'with' if subscribed else 'without'} a subscription", flush=True)
        rounds.append(
            one_round(kind, options.postgres, tmp, flows, subscribed=subscribed, options=options)
        )
    without = [r for r in rounds if not r["subscribed"]]
    with_ = [r for r in rounds if r["subscribed"]]

    def mean(rs: list[dict[str, Any]], key: str) -> float:
        return float(sum(r["all_steps"][key] for r in rs)) / len(rs)

    report = {
        "database": kind,
        "clients": options.clients,
        "workers": options.workers,
        "deferred": options.deferred,
        "seconds": options.seconds,
        "load_average": list(os.getloadavg()),
        "cpus": os.cpu_count(),
        "p95_without_ms": mean(without, "p95"),
        "p95_with_ms": mean(with_, "p95"),
        "p95_ratio": mean(with_, "p95") / mean(without, "p95"),
        "p50_ratio": mean(with_, "p50") / mean(without, "p50"),
        "steps_per_s_without": sum(r["steps_per_s"] for r in without) / len(without),
        "steps_per_s_with": sum(r["steps_per_s"] for r in with_) / len(with_),
        "every_completed_run_delivered": all(r["delivery"]["missing"] == 0 for r in with_),
        "no_webhook_id_twice": all(r["delivery"]["webhook_ids_twice"] == 0 for r in with_),
        "rounds": rounds,
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
