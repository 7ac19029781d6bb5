"""What a call costs in CPU: guidepost, the floor and the store floor, each alone, in turn.

    python -m bench.cpu_bench [--database sqlite|postgresql] [--rounds 3] [--seconds 10]

For each setting the issue's targets are judged at (1 client on 1 worker, 64 clients on 2
workers) and each round, the three servers are started in a rotating order, each on a
fresh database of its own, warmed, then driven by the bench's clients (``e2e_bench``:
guidepost's clients walk runs of the bench flow, the floors' call their one tool). What
the servers' processes spent (``/proc``: user and system time, read before and after) is
divided by the calls answered, and split into the event loop's thread (each process's
main thread: uvicorn, the MCP SDK, the gate) and every other thread (the tool calls'
threads, and guidepost's background threads, which spend next to nothing); the client's
own CPU per call is given beside it, since at 64 clients the clients share the machine's
two cores with the servers.

A profiler samples what holds the GIL, or what runs Python; this counts what the
operating system charged, C included (SQLite, deflate, hashing, the event loop's own).
Prints one JSON object; ``docs/research/cost-per-call.md`` has the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import e2e_bench
from bench.run import DEFAULT_POSTGRES
from bench.servers import (
    Process,
    children_of,
    fresh_database,
    start_floor,
    start_guidepost,
)
from bench.stats import summary
from bench.synthetic import write_flows_dir

SERVERS = ("guidepost", "floor", "store")
SETTINGS = ((1, 1), (2, 64))  # (workers, clients): the settings issue 26 judges
WARM_SECONDS = 3.0
_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_by_thread(pids: list[int]) -> dict[str, float]:
    """Seconds of CPU the processes have had: their main threads' (the event loops') and
    their other threads' together (threads that have ended included)."""
    spent = {"loop": 0.0, "threads": 0.0}
    for pid in pids:
        main = _seconds(Path(f"/proc/{pid}/task/{pid}/stat"))
        spent["loop"] += main
        spent["threads"] += _seconds(Path(f"/proc/{pid}/stat")) - main
    return spent


def _seconds(stat: Path) -> float:
    """User and system time in a /proc ``stat`` file (a process's, its threads' summed)."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _start(server: str, url: str, tmp: Path, workers: int) -> Process:
    log = tmp / f"{server}-{os.urandom(3).hex()}.log"
    if server == "guidepost":
        return start_guidepost(url, tmp / "flows", log, workers)
    return start_floor(log, workers, store=url if server == "store" else "")


def measure_one(
    server: str, kind: str, workers: int, clients: int, seconds: float, tmp: Path, postgres: str
) -> dict[str, Any]:
    """One server alone at ``clients``: calls per second, latencies, CPU per call (ms)."""
    with fresh_database(kind, tmp, postgres) as url:
        process = _start(server, url, tmp, workers)
        try:
            ours, floor = (process.url, None) if server == "guidepost" else (None, process.url)
            asyncio.run(e2e_bench._phase(ours, floor, clients, WARM_SECONDS))
            pids = [process.process.pid, *children_of(process.process.pid)]
            before, client_before = _cpu_by_thread(pids), time.process_time()
            tally = asyncio.run(e2e_bench._phase(ours, floor, clients, seconds))
            after, client_after = _cpu_by_thread(pids), time.process_time()
        finally:
            process.stop()
    calls = tally.steps
    per_call = {part: (after[part] - before[part]) * 1000 / calls for part in after}
    return {
        "calls_per_s": calls / tally.elapsed,  # type: ignore[attr-defined]
        "latency": summary(tally.answer_ms + tally.start_ms + tally.floor_ms),
        "errors": tally.errors,
        "server_cpu_ms": sum(per_call.values()),
        "loop_cpu_ms": per_call["loop"],
        "threads_cpu_ms": per_call["threads"],
        "client_cpu_ms": (client_after - client_before) * 1000 / calls,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    options = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="guidepost-cpu-bench-"))
    write_flows_dir(tmp / "flows", 1)  # guidepost's one flow, for every start
    rounds: list[dict[str, Any]] = []
    for n in range(options.rounds):
        order = SERVERS[n % 3 :] + SERVERS[: n % 3]
        measured: dict[str, Any] = {}
        for workers, clients in SETTINGS:
            for server in order:
                measured[f"{server}_w{workers}_c{clients}"] = measure_one(
                    server,
                    options.database,
                    workers,
                    clients,
                    options.seconds,
                    tmp,
                    options.postgres,
                )
        rounds.append({"order": list(order), "load_average": os.getloadavg(), **measured})
    print(json.dumps({"database": options.database, "rounds": rounds}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
