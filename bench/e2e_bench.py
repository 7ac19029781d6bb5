"""End to end over real HTTP MCP: clients walking runs of the bench flow against a running
guidepost, interleaved call for call with a trivial tool on the floor server.

Each client is a coroutine on one shared connection pool (keep-alive, one connection per
client) that walks runs of its own: ``guide_start`` with the prefill (waiting at p01),
then eight ``guide_answer`` to the end, then a new run. Two phases per setting:

- ``interleaved``: after each call to guidepost the same client calls the floor's tool,
  so both see the same machine at the same moment; latencies of ``guide_answer`` and of
  the floor, and their ratio;
- ``throughput``: guidepost alone, as fast as the clients go; steps (every start and
  answer) per second, latencies, errors;
- ``floor_throughput``: the floor alone, as fast as the same clients go: the most calls
  per second this machine, this client and this HTTP stack allow any tool (the client
  shares the machine's cores with the servers), and the latencies at that rate.

Given a second floor that records a step on each call (``bench.floor_server --store``),
the interleaved phase calls it too, after the floor, and ``store_throughput`` measures it
alone: what any server that records each step durably pays, with none of guidepost's code.

``measure_kinds`` compares node kinds on one server: each client walks a run of each
of the three kinds flows (``bench.synthetic.kinds_flow_yaml``) and answers each in turn,
call for call, so that a ``guide_answer`` passing a check node and one passing a lookup
(to an endpoint answering at once) are timed beside one passing a plain label, at the
same moment on the same machine; their latencies and ratios to the label's.

Calls are plain JSON-RPC POSTs (the stateless transport needs no session), so the
client's own cost stays small.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import httpx2

from bench.servers import RPC_HEADERS
from bench.stats import summary
from bench.synthetic import KINDS, KINDS_ASKS, LATER, prefill

FLOW_ID = "bench_0000"


@dataclass
class Tally:
    answer_ms: list[float] = field(default_factory=list)
    start_ms: list[float] = field(default_factory=list)
    floor_ms: list[float] = field(default_factory=list)
    store_ms: list[float] = field(default_factory=list)
    steps: int = 0
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)

    def error(self, what: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(what[:300])


def tool_call_body(name: str, arguments: dict[str, Any]) -> bytes:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    return json.dumps(body).encode()


async def _post(client: httpx2.AsyncClient, url: str, body: bytes, tally: Tally) -> Any:
    try:
        response = await client.post(url, content=body, headers=RPC_HEADERS)
    except httpx2.HTTPError as exc:
        tally.error(f"{type(exc).__name__}: {exc}")
        return None
    if response.status_code != 200:
        tally.error(f"HTTP {response.status_code}: {response.text}")
        return None
    result = response.json().get("result")
    if result is None or result.get("isError"):
        tally.error(response.text)
        return None
    return result.get("structuredContent")


async def _client(
    client: httpx2.AsyncClient,
    ours: str,
    floors: tuple[tuple[str, list[float]], ...],
    until: float,
    tally: Tally,
) -> None:
    values = prefill()
    floor_body = tool_call_body("ping", {})
    run_id: str | None = None
    left = 0
    while time.perf_counter() < until:
        if run_id is None or left == 0:
            body = tool_call_body("guide_start", {"flow_id": FLOW_ID, "values": values})
            samples = tally.start_ms
        else:
            body = tool_call_body("guide_answer", {"run_id": run_id, "choice": "yes"})
            samples = tally.answer_ms
        began = time.perf_counter()
        result = await _post(client, ours, body, tally)
        elapsed = (time.perf_counter() - began) * 1000
        if result is None:
            run_id = None
        else:
            samples.append(elapsed)
            tally.steps += 1
            if samples is tally.start_ms:
                run_id, left = result["run_id"], LATER
            else:
                left -= 1
        for floor, floor_ms in floors:
            began = time.perf_counter()
            if await _post(client, floor, floor_body, tally) is not None:
                floor_ms.append((time.perf_counter() - began) * 1000)


async def _floor_client(client: httpx2.AsyncClient, floor: str, until: float, tally: Tally) -> None:
    body = tool_call_body("ping", {})
    while time.perf_counter() < until:
        began = time.perf_counter()
        if await _post(client, floor, body, tally) is not None:
            tally.floor_ms.append((time.perf_counter() - began) * 1000)
            tally.steps += 1


async def _phase(
    ours: str | None,
    floor: str | None,
    concurrency: int,
    seconds: float,
    store: str | None = None,
) -> Tally:
    """Clients walking runs on ``ours`` (each call followed by one to ``floor``, then one
    to ``store``, those given), or, with ``ours`` None, calling only ``floor``'s tool."""
    tally = Tally()
    servers = 1 + (ours is not None and floor is not None) + (store is not None)
    limits = httpx2.Limits(
        max_connections=concurrency * servers, max_keepalive_connections=concurrency * servers
    )
    async with httpx2.AsyncClient(limits=limits, timeout=60) as client:
        # Warm-up: a few calls per client, not counted.
        def one(until: float, into: Tally) -> Coroutine[Any, Any, None]:
            if ours is None:
                assert floor is not None
                return _floor_client(client, floor, until, into)
            floors: tuple[tuple[str, list[float]], ...] = ((floor, into.floor_ms),) if floor else ()
            floors += ((store, into.store_ms),) if store else ()
            return _client(client, ours, floors, until, into)

        warm = Tally()
        warm_until = time.perf_counter() + min(1.0, seconds / 4)
        await asyncio.gather(*(one(warm_until, warm) for _ in range(concurrency)))
        began = time.perf_counter()
        until = began + seconds
        await asyncio.gather(*(one(until, tally) for _ in range(concurrency)))
        tally.elapsed = time.perf_counter() - began  # type: ignore[attr-defined]
    return tally


def measure(
    ours: str, floor: str, concurrency: int, seconds: float, store: str | None = None
) -> dict[str, Any]:
    """The phases at ``concurrency`` clients; latencies in ms. ``store``: the floor that
    records a step on each call, measured beside the floor."""
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency
        runner = asyncio.run
    mixed = runner(_phase(ours, floor, concurrency, seconds, store))
    alone = runner(_phase(ours, None, concurrency, seconds))
    floor_alone = runner(_phase(None, floor, concurrency, seconds))
    answer, floor_stats = summary(mixed.answer_ms), summary(mixed.floor_ms)
    stored: dict[str, Any] = {}
    if store is not None:
        store_alone = runner(_phase(None, store, concurrency, seconds))
        store_stats = summary(mixed.store_ms)
        stored = {
            "interleaved_store": {
                "store": store_stats,
                "ratio_p50": _ratio(answer["p50"], store_stats["p50"]),
                "ratio_p95": _ratio(answer["p95"], store_stats["p95"]),
                "store_ratio_p95": _ratio(store_stats["p95"], floor_stats["p95"]),
            },
            "store_throughput": {
                "calls_per_s": store_alone.steps / store_alone.elapsed,  # type: ignore[attr-defined]
                "latency": summary(store_alone.floor_ms),
                "errors": store_alone.errors,
            },
        }
    return {
        "concurrency": concurrency,
        "interleaved": {
            "guide_answer": answer,
            "guide_start": summary(mixed.start_ms),
            "floor": floor_stats,
            "ratio_p50": _ratio(answer["p50"], floor_stats["p50"]),
            "ratio_p95": _ratio(answer["p95"], floor_stats["p95"]),
            "errors": mixed.errors,
        },
        "throughput": {
            "seconds": alone.elapsed,  # type: ignore[attr-defined]
            "steps": alone.steps,
            "steps_per_s": alone.steps / alone.elapsed,  # type: ignore[attr-defined]
            "guide_answer": summary(alone.answer_ms),
            "all_steps": summary(alone.answer_ms + alone.start_ms),
            "errors": alone.errors,
            "error_samples": alone.error_samples + mixed.error_samples,
        },
        "floor_throughput": {
            "calls_per_s": floor_alone.steps / floor_alone.elapsed,  # type: ignore[attr-defined]
            "latency": summary(floor_alone.floor_ms),
            "errors": floor_alone.errors,
        },
        **stored,
    }


def _ratio(ours: float, floor: float) -> float:
    return ours / floor if floor else 0.0


async def _kinds_client(
    client: httpx2.AsyncClient,
    ours: str,
    until: float,
    samples: dict[str, list[float]],
    tally: Tally,
) -> None:
    runs: dict[str, str | None] = dict.fromkeys(KINDS)
    left = dict.fromkeys(KINDS, 0)
    turn = 0
    while time.perf_counter() < until:
        # Each kind first in turn, so that none always follows the same call.
        order = KINDS[turn % len(KINDS) :] + KINDS[: turn % len(KINDS)]
        turn += 1
        for kind in order:
            run_id = runs[kind]
            if run_id is None or left[kind] == 0:
                body = tool_call_body("guide_start", {"flow_id": f"bench_{kind}"})
                started = await _post(client, ours, body, tally)
                runs[kind], left[kind] = (started["run_id"], KINDS_ASKS) if started else (None, 0)
                continue
            body = tool_call_body("guide_answer", {"run_id": run_id, "choice": "yes"})
            began = time.perf_counter()
            result = await _post(client, ours, body, tally)
            elapsed = (time.perf_counter() - began) * 1000
            left[kind] -= 1
            if result is None:
                runs[kind] = None
            elif kind == "lookup" and _lookup_failed(result):
                tally.error(f"lookup failed: {json.dumps(result)}")
                runs[kind] = None
            else:
                samples[kind].append(elapsed)
                tally.steps += 1


def _lookup_failed(result: dict[str, Any]) -> bool:
    """Whether the step's lookup did not answer: its call failed, or none was made."""
    looked = result.get("looked_up") or []
    return not looked or any(entry.get("took") == "__error__" for entry in looked)


async def _kinds_phase(
    ours: str, concurrency: int, seconds: float
) -> tuple[dict[str, list[float]], Tally]:
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx2.AsyncClient(limits=limits, timeout=60) as client:
        warm: dict[str, list[float]] = {kind: [] for kind in KINDS}
        warm_until = time.perf_counter() + min(1.0, seconds / 4)
        await asyncio.gather(
            *(_kinds_client(client, ours, warm_until, warm, Tally()) for _ in range(concurrency))
        )
        samples: dict[str, list[float]] = {kind: [] for kind in KINDS}
        tally = Tally()
        began = time.perf_counter()
        until = began + seconds
        await asyncio.gather(
            *(_kinds_client(client, ours, until, samples, tally) for _ in range(concurrency))
        )
        tally.elapsed = time.perf_counter() - began  # type: ignore[attr-defined]
    return samples, tally


def measure_kinds(ours: str, concurrency: int, seconds: float) -> dict[str, Any]:
    """A label step, a check step and a lookup step, interleaved at ``concurrency``
    clients on ``ours`` (which serves the kinds flows, the lookup's endpoint registered);
    latencies in ms, and the check's and the lookup's ratios to the label's."""
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency
        runner = asyncio.run
    samples, tally = runner(_kinds_phase(ours, concurrency, seconds))
    stats = {kind: summary(taken) for kind, taken in samples.items()}
    label = stats["label"]
    ratios = {
        f"{kind}_ratio_{at}": _ratio(stats[kind][at], label[at])
        for kind in KINDS[1:]
        for at in ("p50", "p95")
    }
    return {
        "concurrency": concurrency,
        "seconds": tally.elapsed,  # type: ignore[attr-defined]
        **stats,
        **ratios,
        "errors": tally.errors,
        "error_samples": tally.error_samples,
    }
