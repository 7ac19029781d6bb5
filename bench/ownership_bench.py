"""Whether refusing another key's run takes the time refusing a missing run does.

    python -m bench.ownership_bench --database sqlite:////tmp/x.sqlite3 [--pairs 1500]

Run in a process of its own (Django reads DATABASE_URL once). Key A starts runs; key B
asks for them (``guide_status``, a read, and ``guide_answer``, a locked write) and for
ids no run has, of the same shape, through the dispatcher (guards, audit record,
failure count), each pair's two calls in a random order, the pairs interleaved. Prints
one JSON object per tool: both samples' statistics, the difference of the medians, and
a two-sided Mann–Whitney U test.

Why Mann–Whitney U: call latencies are skewed with long tails (a test of means, such as
Welch's t, would weigh a few stalls of the machine more than the thousands of calls);
the U test asks only whether one sample tends to be larger than the other, ranks make it
robust to the tails, and at 1,500 calls a side its normal approximation (with the tie
correction) is exact enough. Interleaving the pairs spreads the machine's drift (other
work, caches warming) over both samples alike.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from bench.stats import summary

REPO = Path(__file__).resolve().parent.parent


def setup(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ["GUIDEPOST_FLOWS_DIR"] = str(REPO / "flows")
    os.environ["GUIDEPOST_RATE_BURST"] = "0"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "guidepost.settings")
    import django

    django.setup()
    logging.getLogger("guidepost.access").setLevel(logging.WARNING)  # a line per call
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def mann_whitney_u(a: list[float], b: list[float]) -> dict[str, float]:
    """U of ``a`` against ``b`` and its two-sided p-value (normal approximation, tie
    corrected); ``effect`` is the probability that a call of ``a`` is slower than one of
    ``b`` (0.5: neither tends to be)."""
    n1, n2 = len(a), len(b)
    pooled = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    ranks = [0.0] * len(pooled)
    ties = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t**3 - t
        i = j + 1
    rank_a = sum(r for r, (_, side) in zip(ranks, pooled, strict=True) if side == 0)
    u = rank_a - n1 * (n1 + 1) / 2
    n = n1 + n2
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    z = (u - n1 * n2 / 2) / sigma if sigma else 0.0
    p = math.erfc(abs(z) / math.sqrt(2))
    return {"u": u, "z": z, "p": p, "effect": u / (n1 * n2)}


def measure(pairs: int) -> dict[str, Any]:
    from django.db import connection

    from access_app.callers import Transport
    from guidepost.mcp.dispatch import dispatch
    from runs_app.models import new_run_id

    owner = Transport(peer="127.0.0.1", client_name="bench", key_name="owner")
    other = Transport(peer="127.0.0.1", client_name="bench", key_name="other")
    order = {"values": {"order_number": "A00118"}}

    def start() -> str:
        outcome = dispatch("guide_start", {"flow_id": "refund_request"}, owner)
        return str(outcome.payload["run_id"])

    def arguments(tool: str, run_id: str) -> dict[str, Any]:
        return {"run_id": run_id, **(order if tool == "guide_answer" else {})}

    results: dict[str, Any] = {"vendor": connection.vendor}
    rng = random.Random(18)
    for tool in ("guide_status", "guide_answer"):
        theirs = [start() for _ in range(50)]
        for run_id in theirs[:20]:  # warm both paths
            dispatch(tool, arguments(tool, run_id), other)
            dispatch(tool, arguments(tool, new_run_id()), other)
        samples: dict[str, list[float]] = {"another key's run": [], "a missing run": []}
        for i in range(pairs):
            calls = [
                ("another key's run", theirs[i % len(theirs)]),
                ("a missing run", new_run_id()),
            ]
            rng.shuffle(calls)
            for name, run_id in calls:
                args = arguments(tool, run_id)
                t0 = time.perf_counter_ns()
                outcome = dispatch(tool, args, other)
                samples[name].append((time.perf_counter_ns() - t0) / 1e6)
                assert outcome.payload["error"] == "run not found", outcome.payload
        theirs_ms, missing_ms = samples["another key's run"], samples["a missing run"]
        results[tool] = {
            "another key's run": summary(theirs_ms),
            "a missing run": summary(missing_ms),
            "median difference ms": summary(theirs_ms)["p50"] - summary(missing_ms)["p50"],
            "mann-whitney": mann_whitney_u(theirs_ms, missing_ms),
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", required=True)
    parser.add_argument("--pairs", type=int, default=1500)
    options = parser.parse_args()
    setup(options.database)
    json.dump(measure(options.pairs), sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
