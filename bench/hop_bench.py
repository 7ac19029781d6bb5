"""What handing a tool call to a worker thread and back costs, alone: the floor's trivial
tool answered on the event loop, and the same tool answered from a worker thread (as
guidepost answers every tool: Django's ORM may not run on the loop), handed over through
anyio's worker threads (guidepost's way) or asyncio's ``run_in_executor``. The same
clients call the three in turn, so all see the same machine at the same moment.

    python -m bench.hop_bench [--seconds 10] [--clients 1 16]

Prints, per number of clients, p50 and p95 of each in ms and each hop's difference from
the loop.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import httpx2

from bench.e2e_bench import Tally, _post, tool_call_body
from bench.servers import start_floor
from bench.stats import summary

WAYS = ("loop", "anyio", "executor")


async def _turns(urls: dict[str, str], clients: int, seconds: float) -> dict[str, list[float]]:
    """``clients`` clients, each calling every server in turn for ``seconds``."""
    samples: dict[str, list[float]] = {way: [] for way in urls}
    tally = Tally()
    body = tool_call_body("ping", {})
    limits = httpx2.Limits(max_connections=clients * 3, max_keepalive_connections=clients * 3)
    async with httpx2.AsyncClient(limits=limits, timeout=60) as client:

        async def one(until: float, into: dict[str, list[float]]) -> None:
            while time.perf_counter() < until:
                for way, url in urls.items():
                    began = time.perf_counter()
                    if await _post(client, url, body, tally) is not None:
                        into[way].append((time.perf_counter() - began) * 1000)

        warm: dict[str, list[float]] = {way: [] for way in urls}
        warm_until = time.perf_counter() + 1.0
        await asyncio.gather(*(one(warm_until, warm) for _ in range(clients)))
        until = time.perf_counter() + seconds
        await asyncio.gather(*(one(until, samples) for _ in range(clients)))
    if tally.errors:
        raise RuntimeError(f"{tally.errors} calls failed: {tally.error_samples}")
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 16])
    options = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hop-bench-"))
    servers = {
        way: start_floor(tmp / f"{way}.log", hop="" if way == "loop" else way) for way in WAYS
    }
    urls = {way: server.url for way, server in servers.items()}
    try:
        for clients in options.clients:
            measured = asyncio.run(_turns(urls, clients, options.seconds))
            stats = {way: summary(ms) for way, ms in measured.items()}
            loop = stats["loop"]
            line = [f"{clients:>3} client(s): loop p50 {loop['p50']:.3f} p95 {loop['p95']:.3f}"]
            for way in WAYS[1:]:
                hop = stats[way]
                line.append(
                    f"{way} p50 {hop['p50']:.3f} ({hop['p50'] - loop['p50']:+.3f})"
                    f" p95 {hop['p95']:.3f} ({hop['p95'] - loop['p95']:+.3f})"
                )
            print(" | ".join(line) + " ms", flush=True)
    finally:
        for server in servers.values():
            server.stop()


if __name__ == "__main__":
    main()
