"""The whole bench, one command: ``python3 scripts/dev.py bench [--quick]``.

Runs each part in a process of its own, prints a table (p50, p95, p99, max, throughput)
and writes every figure as JSON (``var/bench/latest.json``; ``bench/report.py`` turns it
into docs/research/voice-agent-latency-budget.md). Nothing here judges a figure against
a target: ``targets`` in the JSON says, for each, what was measured and whether it met it.

- ``engine``: transitions on the 40-node bench flow, in microseconds;
- ``service``: one ``guide_answer`` through ``services.run_answer`` and through the
  dispatcher (guards, rate limit, audit record), on file SQLite and on PostgreSQL, with
  the statements each costs;
- ``e2e``: real HTTP MCP against ``guidepost-mcp serve`` at 1, 16 and 64 clients, with 1
  and 2 workers, interleaved call for call with the floor (a trivial tool on a bare
  server of the same SDK and uvicorn options) and with the store floor (the floor's tool
  recording a step as ``guide_answer`` does, through the bare database driver:
  ``bench/floor_store.py``), then each alone for throughput; and on the 1-worker server,
  a ``guide_answer`` passing a plain label, one passing a check node and one passing a
  lookup (to ``bench/lookup_endpoint.py``, answering at once), interleaved call for call
  (``e2e_kinds``: their latencies and the check's and the lookup's ratios to the label's);
- ``footprint``: loading 1,000 flows of 40 nodes (time, memory), a server's start-up
  time and memory with them, the command line's reads (``drafts``, ``webhook list``,
  ``migrate --dry-run``) and the database's size per 10,000 runs;
- ``hostile``: the CPU ``parse_yaml`` spends on pathological texts, and what five
  hostile drafts in flight at once cost another key's ``guide_flows`` (``bench/hostile_bench.py``).

``--quick`` runs every part at a tiny size (CI runs it; its figures mean nothing).
``--parts`` runs some of them only (the test suite runs each on its own), and
``--no-sqlite`` measures the database-bound parts on PostgreSQL only.
The machine's load is recorded with the figures: on a shared machine they are noisy.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import e2e_bench
from bench.footprint import READ_COMMANDS
from bench.servers import (
    PRIVATE,
    fresh_database,
    postgres_reachable,
    register_endpoint,
    start_floor,
    start_guidepost,
    start_lookup_endpoint,
)
from bench.synthetic import LOOKUP_ENDPOINT, write_flows_dir, write_kinds_flows
from bench.webhooks_bench import cpu_seconds

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "var" / "bench" / "latest.json"
DEFAULT_POSTGRES = "postgres://postgres@127.0.0.1:5432/test"

PARTS = ("engine", "service", "e2e", "footprint", "hostile")
FULL = {
    "engine_n": 20000,
    "service_runs": 300,
    "e2e_seconds": 10.0,
    "e2e": [(w, c) for w in (1, 2) for c in (1, 16, 64)],
    "e2e_postgres": [(w, c) for w in (1, 2) for c in (1, 16, 64)],
    "e2e_kinds": [1],  # clients, on the 1-worker server
    "e2e_kinds_seconds": 20.0,
    "catalog_flows": 1000,
    "storage_runs": 500,
    "hostile_seconds": 10.0,
    "command_repeat": 5,
}
QUICK = {
    "engine_n": 300,
    "service_runs": 6,
    "e2e_seconds": 0.25,
    "e2e": [(1, 2)],
    "e2e_postgres": [(1, 2)],
    "e2e_kinds": [1],
    "e2e_kinds_seconds": 0.25,
    "catalog_flows": 5,
    "storage_runs": 3,
    "hostile_seconds": 0.25,
    "command_repeat": 1,
}

# (what, path in the JSON, how it compares, the bound); reported, never asserted.
TARGETS: list[tuple[str, str, str, float]] = [
    ("engine transition p95 < 6 µs", "engine.answer_plain.p95", "<", 6.0),
    ("service step SQLite p95 < 0.5 ms", "service.sqlite.service.p95", "<", 0.5),
    ("service step PostgreSQL p95 < 2 ms", "service.postgresql.service.p95", "<", 2.0),
    ("service step statements ≤ 4 + BEGIN (SQLite)", "service.sqlite.queries.service", "<=", 5),
    ("dispatcher adds ≤ 2 (bucket, audit)", "service.sqlite.queries.extra", "<=", 2),
    ("e2e c=1 p95 ≤ 1.5× floor (SQLite, 1 worker)", "e2e.sqlite.w1_c1.ratio_p95", "<=", 1.5),
    ("e2e c=1 p95 < 6 ms (SQLite, 1 worker)", "e2e.sqlite.w1_c1.p95", "<", 6.0),
    # Issue 49's, against a label step measured beside them.
    ("e2e c=1 check step p95 ≤ 1.1× label step (SQLite)", "ratios.check_c1_sqlite", "<=", 1.1),
    ("e2e c=1 lookup step p95 ≤ 1.1× label step (SQLite)", "ratios.lookup_c1_sqlite", "<=", 1.1),
    (
        "e2e c=1 check step p95 ≤ 1.1× label step (PostgreSQL)",
        "ratios.check_c1_postgresql",
        "<=",
        1.1,
    ),
    (
        "e2e c=1 lookup step p95 ≤ 1.1× label step (PostgreSQL)",
        "ratios.lookup_c1_postgresql",
        "<=",
        1.1,
    ),
    ("64 clients, 2 workers, SQLite: errors = 0", "e2e.sqlite.w2_c64.errors", "<=", 0),
    ("64 clients, 2 workers, SQLite: p99 < 100 ms", "e2e.sqlite.w2_c64.p99", "<", 100.0),
    ("64 clients, 2 workers, SQLite: ≥ 400 steps/s", "e2e.sqlite.w2_c64.steps_per_s", ">=", 400),
    ("64 clients, 2 workers, PostgreSQL: errors = 0", "e2e.postgresql.w2_c64.errors", "<=", 0),
    ("64 clients, 2 workers, PostgreSQL: p99 < 100 ms", "e2e.postgresql.w2_c64.p99", "<", 100),
    (
        "64 clients, 2 workers, PostgreSQL: ≥ 400 steps/s",
        "e2e.postgresql.w2_c64.steps_per_s",
        ">=",
        400,
    ),
    ("1,000 flows load < 2 s", "footprint.catalog.load_s", "<", 2.0),
    ("guidepost-mcp drafts < 1 s", "footprint.commands.drafts.wall_s", "<", 1.0),
    ("guidepost-mcp webhook list < 1 s", "footprint.commands.webhook_list.wall_s", "<", 1.0),
    (
        "guidepost-mcp migrate --dry-run < 1 s",
        "footprint.commands.migrate_dry_run.wall_s",
        "<",
        1.0,
    ),
    # Issue 26's, each a ratio of two figures of the same run (``ratios``).
    ("engine answer_plain p95 ≤ 1.5× the control's", "ratios.engine_to_control_p95", "<=", 1.5),
    ("e2e c=1 p95 ≤ 1.8× floor (PostgreSQL, 1 worker)", "ratios.e2e_c1_postgresql", "<=", 1.8),
    (
        "64 clients, 2 workers, SQLite: steps/s ≥ 50% of the floor's calls/s",
        "ratios.c64_share_sqlite",
        ">=",
        0.5,
    ),
    (
        "64 clients, 2 workers, PostgreSQL: steps/s ≥ 50% of the floor's calls/s",
        "ratios.c64_share_postgresql",
        ">=",
        0.5,
    ),
    ("64 clients, 2 workers, SQLite: p99 ≤ 1.5× floor's", "ratios.c64_p99_sqlite", "<=", 1.5),
    (
        "64 clients, 2 workers, PostgreSQL: p99 ≤ 1.5× floor's",
        "ratios.c64_p99_postgresql",
        "<=",
        1.5,
    ),
    ("storage per run ≤ 8 KB (SQLite)", "ratios.storage_kb_sqlite", "<=", 8.0),
    ("storage per run ≤ 8 KB (PostgreSQL)", "ratios.storage_kb_postgresql", "<=", 8.0),
    (
        "five hostile drafts delay guide_flows < 100 ms at p95",
        "hostile.server.delay.p95",
        "<",
        100.0,
    ),
]


def say(message: str) -> None:
    print(f"==> {message}", file=sys.stderr, flush=True)


def child(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``python -m ARGS`` and return the JSON object it prints on its last line."""
    done = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def machine() -> dict[str, Any]:
    """What the figures were measured on, and how busy it was."""
    began = time.perf_counter()
    total = 0
    for i in range(2_000_000):
        total += i
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        # A fixed pure-Python loop: how fast this machine ran Python at the time.
        "loop_2m_ms": (time.perf_counter() - began) * 1000,
    }


def vendors(size: dict[str, Any], postgres: str) -> list[str]:
    """The databases the database-bound parts measure: SQLite unless --no-sqlite, and
    PostgreSQL when one is given."""
    return (["sqlite"] if size["sqlite"] else []) + (["postgresql"] if postgres else [])


def service_part(size: dict[str, Any], tmp: Path, postgres: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in vendors(size, postgres):
        say(f"service step on {kind}")
        with fresh_database(kind, tmp / "service", postgres) as url:
            result = child(
                "bench.service_bench", "--database", url, "--runs", str(size["service_runs"])
            )
        queries = result["queries"]
        queries["extra"] = queries["dispatch"] - queries["service"]
        out[result["vendor"]] = result
    return out


def e2e_part(size: dict[str, Any], tmp: Path, postgres: str) -> dict[str, Any]:
    """The e2e figures per database, and under ``kinds`` the node kinds' (``e2e_kinds``)."""
    out: dict[str, Any] = {"kinds": {}}
    flows = write_kinds_flows(write_flows_dir(tmp / "e2e-flows", 1))
    plan = {"sqlite": size["e2e"], "postgresql": size["e2e_postgres"]}
    plans = [(kind, plan[kind]) for kind in vendors(size, postgres)]
    for kind, settings in plans:
        results: dict[str, Any] = {}
        for workers in sorted({w for w, _ in settings} | ({1} if size["e2e_kinds"] else set())):
            with (
                fresh_database(kind, tmp / "e2e", postgres) as url,
                fresh_database(kind, tmp / "e2e-store", postgres) as store_url,
                contextlib.ExitStack() as servers,
            ):
                say(f"e2e on {kind}, {workers} worker(s): starting guidepost and the floors")
                kinds_here = workers == 1 and size["e2e_kinds"]
                log = tmp / f"e2e-{kind}-{workers}.log"
                # Allowed to call loopback, for the lookup's endpoint.
                ours = start_guidepost(url, flows, log, workers, env=PRIVATE if kinds_here else {})
                servers.callback(ours.stop)
                floor = start_floor(tmp / f"floor-{kind}-{workers}.log", workers)
                servers.callback(floor.stop)
                store = start_floor(tmp / f"store-{kind}-{workers}.log", workers, store=store_url)
                servers.callback(store.stop)
                for w, concurrency in settings:
                    if w != workers:
                        continue
                    say(f"e2e on {kind}: {workers} worker(s), {concurrency} client(s)")
                    measured = e2e_bench.measure(
                        ours.url, floor.url, concurrency, size["e2e_seconds"], store.url
                    )
                    results[f"w{workers}_c{concurrency}"] = _flatten_e2e(workers, measured)
                if kinds_here:
                    out["kinds"][kind] = kinds_part(size, tmp, kind, url, ours.url)
        out[kind] = results
    return out


def kinds_part(
    size: dict[str, Any], tmp: Path, vendor: str, database_url: str, ours: str
) -> dict[str, Any]:
    """A label, a check and a lookup step interleaved on the server at ``ours`` (1 worker,
    ``database_url`` migrated by it), at each number of clients of ``e2e_kinds``."""
    endpoint = start_lookup_endpoint(tmp / f"lookup-endpoint-{vendor}.log")
    try:
        register_endpoint(database_url, LOOKUP_ENDPOINT, endpoint.url)
        results: dict[str, Any] = {}
        for concurrency in size["e2e_kinds"]:
            say(f"e2e on {vendor}: label, check and lookup steps, {concurrency} client(s)")
            before = cpu_seconds([endpoint.process.pid])
            measured = e2e_bench.measure_kinds(ours, concurrency, size["e2e_kinds_seconds"])
            cpu_ms = (cpu_seconds([endpoint.process.pid]) - before) * 1000
            # Its CPU, warm-up included, per lookup timed: what it took from the machine.
            measured["endpoint_cpu_ms"] = cpu_ms / max(measured["lookup"]["n"], 1)
            results[f"w1_c{concurrency}"] = measured
        return results
    finally:
        endpoint.stop()


def _flatten_e2e(workers: int, measured: dict[str, Any]) -> dict[str, Any]:
    """One setting's figures, the headline ones first (the answer's latency is the
    interleaved one; throughput, p99 and errors come from guidepost alone)."""
    mixed, alone = measured["interleaved"], measured["throughput"]
    stored, store_alone = measured["interleaved_store"], measured["store_throughput"]
    return {
        "workers": workers,
        "concurrency": measured["concurrency"],
        "p50": mixed["guide_answer"]["p50"],
        "p95": mixed["guide_answer"]["p95"],
        "floor_p50": mixed["floor"]["p50"],
        "floor_p95": mixed["floor"]["p95"],
        "ratio_p50": mixed["ratio_p50"],
        "ratio_p95": mixed["ratio_p95"],
        "p99": alone["all_steps"]["p99"],
        "max": alone["all_steps"]["max"],
        "steps_per_s": alone["steps_per_s"],
        "floor_calls_per_s": measured["floor_throughput"]["calls_per_s"],
        "floor_alone_p99": measured["floor_throughput"]["latency"]["p99"],
        "store_p50": stored["store"]["p50"],
        "store_p95": stored["store"]["p95"],
        "store_ratio_p95": stored["store_ratio_p95"],
        "ratio_to_store_p95": stored["ratio_p95"],
        "store_calls_per_s": store_alone["calls_per_s"],
        "store_alone_p99": store_alone["latency"]["p99"],
        "errors": mixed["errors"] + alone["errors"],
        "detail": measured,
    }


def footprint_part(size: dict[str, Any], tmp: Path) -> dict[str, Any]:
    count = size["catalog_flows"]
    flows = write_flows_dir(tmp / "many-flows", count)
    say(f"loading {count} flows")
    catalog = child("bench.footprint", "catalog", "--flows", str(flows))
    say(f"starting a server with {count} flows, and with one")
    servers: dict[str, Any] = {}
    reads: dict[str, Any] = {}
    for label, directory in (("one_flow", write_flows_dir(tmp / "one-flow", 1)), ("many", flows)):
        with fresh_database("sqlite", tmp / "startup", "") as url:
            server = start_guidepost(url, directory, tmp / f"startup-{label}.log")
            try:
                servers[label] = {"start_s": server.started_s, "rss_mb": server.rss_mb()}
            finally:
                server.stop()
            if label == "one_flow":  # serve migrated it: what a person's reads meet
                say("the command line's reads")
                repeat = str(size["command_repeat"])
                reads = child(
                    "bench.footprint", "commands", "--database", url, "--flows", str(directory),
                    "--repeat", repeat,
                )  # fmt: skip
    say("database size")
    storage: dict[str, Any] = {}
    for kind in vendors(size, size["postgres"]):
        with fresh_database(kind, tmp / "storage", size["postgres"]) as url:
            storage[kind] = child(
                "bench.footprint", "storage", "--database", url, "--runs", str(size["storage_runs"])
            )
    return {
        "catalog": catalog,
        "server": {"flows": count, **servers},
        "commands": reads,
        "storage": storage,
    }


def lookup(data: dict[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def ratios(data: dict[str, Any]) -> dict[str, float | None]:
    """Issue 26's figures: each a ratio of two figures of this run (None where one is
    missing): the engine's plain answer to the control, guidepost to the floor at 1 client,
    at 64 clients on 2 workers its steps per second to the floor's calls per second alone
    and its p99 to the floor's p99 alone, and the storage per run in KB. Issue 49's: at 1
    client, a check step's p95 and a lookup step's to a label step's (``check_c1_*``,
    ``lookup_c1_*``).

    Beside them, the same ratios of the store floor (``store_*``): what recording each
    step, with nothing else of guidepost's, costs against the floor, so the part of each
    ratio that is guidepost's own shows."""

    def share(top: str, bottom: str) -> float | None:
        a, b = lookup(data, top), lookup(data, bottom)
        return a / b if isinstance(a, int | float) and isinstance(b, int | float) and b else None

    out: dict[str, float | None] = {
        "engine_to_control_p95": share("engine.answer_plain.p95", "engine.control.p95")
    }
    for kind in ("sqlite", "postgresql"):
        e2e = f"e2e.{kind}"
        out[f"e2e_c1_{kind}"] = lookup(data, f"{e2e}.w1_c1.ratio_p95")
        out[f"c64_share_{kind}"] = share(
            f"{e2e}.w2_c64.steps_per_s", f"{e2e}.w2_c64.floor_calls_per_s"
        )
        out[f"c64_p99_{kind}"] = share(f"{e2e}.w2_c64.p99", f"{e2e}.w2_c64.floor_alone_p99")
        out[f"store_e2e_c1_{kind}"] = lookup(data, f"{e2e}.w1_c1.store_ratio_p95")
        out[f"store_c64_share_{kind}"] = share(
            f"{e2e}.w2_c64.store_calls_per_s", f"{e2e}.w2_c64.floor_calls_per_s"
        )
        out[f"store_c64_p99_{kind}"] = share(
            f"{e2e}.w2_c64.store_alone_p99", f"{e2e}.w2_c64.floor_alone_p99"
        )
        for step in ("check", "lookup"):
            out[f"{step}_c1_{kind}"] = lookup(data, f"e2e_kinds.{kind}.w1_c1.{step}_ratio_p95")
        stored = lookup(data, f"footprint.storage.{kind}.bytes_per_run")
        out[f"storage_kb_{kind}"] = stored / 1000 if isinstance(stored, int | float) else None
    return out


def judge(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target with the figure measured for it; ``met`` is None where the figure is
    missing, or under --quick (tiny sizes say nothing)."""
    verdicts = []
    for name, path, op, bound in TARGETS:
        value = lookup(data, path)
        met = None
        if isinstance(value, int | float) and not data["quick"]:
            met = {"<": value < bound, "<=": value <= bound, ">=": value >= bound}[op]
        verdicts.append({"target": name, "path": path, "bound": bound, "value": value, "met": met})
    return verdicts


def table(data: dict[str, Any]) -> str:
    rows: list[tuple[str, ...]] = [("what", "p50", "p95", "p99", "max", "throughput", "note")]

    def row(name: str, stats: dict[str, Any], thr: str = "", note: str = "") -> None:
        rows.append(
            (
                name,
                *(f"{stats[k]:.3f}" if k in stats else "" for k in ("p50", "p95", "p99", "max")),
                thr,
                note,
            )
        )

    if "engine" in data:
        engine = data["engine"]
        keys = ("start_prefill_fold", "answer_fold", "answer_plain", "answer_check")
        for key in (*keys, "answer_lookup"):
            row(f"engine {key} (µs)", engine[key])
        row(
            "control: dicts and tuples only (µs)",
            engine["control"],
            note="the machine's own spread",
        )
    for vendor, service in data.get("service", {}).items():
        q = service["queries"]
        row(f"service step {vendor} (ms)", service["service"], note=f"{q['service']} statements")
        row(
            f"dispatcher step {vendor} (ms)",
            service["dispatch"],
            note=f"{q['dispatch']} statements",
        )
    for vendor, settings in data.get("e2e", {}).items():
        for key, e in settings.items():
            stats = {"p50": e["p50"], "p95": e["p95"], "p99": e["p99"], "max": e["max"]}
            note = (
                f"floor p95 {e['floor_p95']:.3f}, ×{e['ratio_p95']:.2f}; "
                f"store floor p95 {e['store_p95']:.3f}, ×{e['ratio_to_store_p95']:.2f}; "
                f"errors {e['errors']}; floor alone {e['floor_calls_per_s']:.0f} calls/s, "
                f"store floor alone {e['store_calls_per_s']:.0f}"
            )
            row(f"e2e {vendor} {key} (ms)", stats, f"{e['steps_per_s']:.0f} steps/s", note)
    for vendor, settings in data.get("e2e_kinds", {}).items():
        for key, k in settings.items():
            row(
                f"e2e {vendor} {key} label step (ms)",
                k["label"],
                note="interleaved with the two below",
            )
            for step in ("check", "lookup"):
                note = (
                    f"p50 ×{k[f'{step}_ratio_p50']:.2f}, p95 ×{k[f'{step}_ratio_p95']:.2f} "
                    "the label step's"
                )
                if step == "lookup":
                    note += (
                        f"; endpoint {k['endpoint_cpu_ms']:.2f} ms CPU a call; errors {k['errors']}"
                    )
                row(f"e2e {vendor} {key} {step} step (ms)", k[step], note=note)
    if "footprint" in data:
        fp = data["footprint"]
        rows.append(
            (
                f"load {fp['catalog']['flows']} flows",
                f"{fp['catalog']['load_s']:.3f} s",
                "",
                "",
                "",
                "",
                f"+{fp['catalog']['rss_flows_mb']:.1f} MiB RSS",
            )
        )
        for label, server in fp["server"].items():
            if isinstance(server, dict):
                rows.append(
                    (
                        f"serve start ({label})",
                        f"{server['start_s']:.2f} s",
                        "",
                        "",
                        "",
                        "",
                        f"{server['rss_mb']:.1f} MiB RSS",
                    )
                )
        for name, command in fp.get("commands", {}).items():
            rows.append(
                (
                    f"guidepost-mcp {' '.join(READ_COMMANDS[name])}",
                    f"{command['wall_s']:.2f} s",
                    "",
                    "",
                    "",
                    "",
                    f"{command['cpu_s']:.2f} s CPU, best of {command['repeat']}",
                )
            )
        for vendor, st in fp["storage"].items():
            rows.append(
                (
                    f"storage {vendor}",
                    "",
                    "",
                    "",
                    "",
                    "",
                    f"{st['mb_per_10000_runs']:.1f} MiB / 10,000 runs"
                    + (
                        f" ({st['bytes_per_run_vacuumed'] / 1000:.1f} KB a run after VACUUM)"
                        if "bytes_per_run_vacuumed" in st
                        else ""
                    ),
                )
            )
    if "hostile" in data:
        server = data["hostile"]["server"]
        for phase in ("calm", "hostile"):
            row(f"guide_flows, {phase} (ms)", server[phase])
        row("delay by five hostile drafts (ms)", server["delay"])
        worst = max(data["hostile"]["parse"].items(), key=lambda item: item[1]["cpu_ms"])
        rows.append(
            ("costliest text", f"{worst[1]['cpu_ms']:.1f} ms", "", "", "", "", f"CPU: {worst[0]}")
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    lines.append("")
    for verdict in data["targets"]:
        mark = {True: "met ", False: "MISS", None: "n/a "}[verdict["met"]]
        value = verdict["value"]
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        lines.append(f"[{mark}] {verdict['target']}: {shown}")
    lines.append("")
    lines.append("The store floor against the floor (what recording a step alone costs):")
    for kind in data.get("e2e", {}):
        found = data["ratios"]
        lines.append(
            f"  {kind}: e2e c=1 p95 ×{_shown(found[f'store_e2e_c1_{kind}'])}; 64 clients, "
            f"2 workers: calls/s {_shown(found[f'store_c64_share_{kind}'])} of the floor's, "
            f"p99 ×{_shown(found[f'store_c64_p99_{kind}'])}"
        )
    return "\n".join(lines)


def _shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dev.py bench", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes (CI): every key, no meaningful figure"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the JSON goes")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("BENCH_POSTGRES", DEFAULT_POSTGRES),
        help="a PostgreSQL server to make bench_guidepost_* databases on ('' to skip)",
    )
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help=f"the parts to run, comma-separated (default: all of {', '.join(PARTS)})",
    )
    parser.add_argument(
        "--no-sqlite",
        action="store_true",
        help="measure the database-bound parts (service, e2e, storage) on PostgreSQL only",
    )
    options = parser.parse_args(argv)
    parts = options.parts.split(",")
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown part {', '.join(unknown)}; the parts are {', '.join(PARTS)}")
    size = dict(QUICK if options.quick else FULL)
    size["sqlite"] = not options.no_sqlite
    postgres = options.postgres
    skipped = ""
    if postgres:
        skipped = postgres_reachable(postgres)
        if skipped:
            say(f"PostgreSQL not reachable ({skipped}): its parts are skipped")
            postgres = ""
    size["postgres"] = postgres
    tmp = Path(tempfile.mkdtemp(prefix="guidepost-bench-"))
    began = time.perf_counter()
    data: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": _commit(),
        "quick": options.quick,
        "machine": machine(),
        "postgres_skipped": skipped,
    }
    if "engine" in parts:
        say("engine")
        data["engine"] = child("bench.engine_bench", "--n", str(size["engine_n"]))
    if "service" in parts:
        data["service"] = service_part(size, tmp, postgres)
    if "e2e" in parts:
        data["e2e"] = e2e_part(size, tmp, postgres)
        data["e2e_kinds"] = data["e2e"].pop("kinds")
    if "footprint" in parts:
        data["footprint"] = footprint_part(size, tmp)
    if "hostile" in parts:
        say("hostile drafts")
        seconds = str(size["hostile_seconds"])
        data["hostile"] = child("bench.hostile_bench", "run", "--seconds", seconds)
    data["machine"]["load_average_end"] = list(os.getloadavg())
    data["seconds"] = time.perf_counter() - began
    data["ratios"] = ratios(data)
    data["targets"] = judge(data)
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table(data))
    print(f"\nJSON: {options.out}")
    return 0


def _commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    )
    return done.stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
