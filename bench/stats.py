"""Percentiles for benchmark timings."""

from __future__ import annotations

import statistics


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    cuts = (
        statistics.quantiles(ordered, n=100, method="inclusive")
        if len(ordered) > 1
        else ordered * 99
    )
    return {"p50": cuts[49], "p95": cuts[94], "p99": cuts[98]}


def summary(samples_ms: list[float]) -> dict[str, float]:
    """p50, p95, p99 and max of ``samples_ms`` (milliseconds), and how many there were."""
    if not samples_ms:
        return {"n": 0, "p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}
    return {"n": len(samples_ms), **percentiles(samples_ms), "max": max(samples_ms)}


def report(
    name: str, samples_ms: list[float], baseline: dict[str, float] | None = None
) -> dict[str, float]:
    stats = percentiles(samples_ms)
    line = f"{name:<34} n={len(samples_ms):<6}" + "".join(
        f" {key}={value:8.3f} ms" for key, value in stats.items()
    )
    if baseline:
        line += f"  ratio p50={stats['p50'] / baseline['p50']:.2f}x"
    print(line, flush=True)
    return stats
