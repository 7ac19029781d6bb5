"""Engine speed: transitions on the bench's 40-node flow, in process (no database, no
HTTP), in microseconds.

    python -m bench.engine_bench [--n 5000]

Three transitions: a start with a prefill of ten values that carries the run past ten
asks and folds the eleventh (``start_prefill_fold``), a fold answered at the waiting
node (``answer_fold``), and a plain answer that moves one node on (``answer_plain``).
``control`` times a fixed function of about a plain answer's size that only builds
small dicts and tuples: how wide this machine's own spread is for such work (on a
shared virtual machine its p95 can be well above its p50), so the engine's tail can be
read against it. Prints one JSON object; times are in microseconds.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable

from bench.stats import summary
from bench.synthetic import CATEGORY, flow_yaml, prefill
from flows_app.domain import engine
from flows_app.domain.building import build_flow
from flows_app.domain.model import Category, Flow


def bench_flow() -> Flow:
    flow, findings = build_flow(flow_yaml(), categories={CATEGORY: Category(CATEGORY, CATEGORY)})
    if flow is None:
        raise SystemExit(f"the bench flow does not build: {findings}")
    return flow


def timed_us(fn: Callable[[], object], n: int) -> dict[str, float]:
    for _ in range(min(n, 200)):  # warm-up
        fn()
    samples = []
    gc.disable()
    try:
        for _ in range(n):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1_000_000)
    finally:
        gc.enable()
    return summary(samples)


def control() -> list[dict[str, object]]:
    """The allocation pattern of a transition (small dicts and tuples), and no engine."""
    return [{"id": i, "entry": (i, "ask", "asked")} for i in range(24)]


def measure(n: int) -> dict[str, object]:
    flow = bench_flow()
    with_fold = prefill(fold=True)
    without_fold = prefill(fold=False)
    at_fold = engine.start(flow, without_fold).state
    at_plain = engine.start(flow, with_fold).state
    assert at_fold.node == "fold" and at_plain.node == "p01", (at_fold.node, at_plain.node)
    return {
        "unit": "us",
        "nodes": len(flow.nodes),
        "start_prefill_fold": timed_us(lambda: engine.start(flow, with_fold), n),
        "answer_fold": timed_us(lambda: engine.answer(flow, at_fold, choice="__unknown__"), n),
        "answer_plain": timed_us(lambda: engine.answer(flow, at_plain, choice="yes"), n),
        "control": timed_us(control, n),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=5000)
    json.dump(measure(parser.parse_args().n), sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
