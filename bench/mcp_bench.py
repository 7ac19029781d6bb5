"""Tool-call latency over real HTTP against a real server (SQLite), with the SDK's client.

    python -m bench.mcp_bench [--n 200] [--url http://127.0.0.1:8127/mcp/]

Without --url it starts its own server on a free port with a fresh database.
Prints p50/p95/p99 per tool and each one's ratio to guide_flows (read-only).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import Client

from bench.stats import report
from tests.servers import copy_flows, fresh_database, start_server


async def measure(url: str, n: int) -> None:
    async with Client(url) as client:

        async def call(tool: str, args: dict[str, Any]) -> tuple[float, Any]:
            start = time.perf_counter()
            result = await client.call_tool(tool, args)
            elapsed = (time.perf_counter() - start) * 1000
            if result.is_error:
                raise SystemExit(f"{tool} failed: {result.content}")
            return elapsed, result.structured_content

        for _ in range(20):  # warm-up
            await call("guide_flows", {})
        flows = [(await call("guide_flows", {}))[0] for _ in range(n)]
        base = report("guide_flows", flows)
        starts, answers, statuses = [], [], []
        for _ in range(n):
            elapsed, started = await call("guide_start", {"flow_id": "payment_failed"})
            starts.append(elapsed)
            run_id = started["run_id"]
            elapsed, _ = await call(
                "guide_answer", {"run_id": run_id, "choice": "E01", "at": "n_error_code"}
            )
            answers.append(elapsed)
            statuses.append((await call("guide_status", {"run_id": run_id}))[0])
        report("guide_start", starts, base)
        report("guide_answer", answers, base)
        report("guide_status", statuses, base)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--url")
    options = parser.parse_args()
    if options.url:
        asyncio.run(measure(options.url, options.n))
        return
    tmp = Path(tempfile.mkdtemp(prefix="guidepost-bench-"))
    with fresh_database(tmp) as database_url:
        server = start_server(
            database_url=database_url, flows_dir=copy_flows(tmp / "flows"), log=tmp / "log"
        )
        try:
            asyncio.run(measure(server.url, options.n))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
