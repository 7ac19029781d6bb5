"""Engine speed: transitions on the bench's 40-node flow, in process (no database, no
HTTP), in microseconds.

    python -m bench.engine_bench [--n 5000]

Four transitions: a start with a prefill of ten values that carries the run past ten
asks and folds the eleventh (``start_prefill_fold``), a fold answered at the waiting
node (``answer_fold``), a plain answer that moves one node on (``answer_plain``), and
the same answer when the node it leads to is a check that reads a number and the date
and passes the run on (``answer_check``), and when it leads to a lookup whose answer
(given, as the server gives it once the call is made) sets a value and passes the run
on (``answer_lookup``).
``control`` times a fixed function of about a plain answer's size that only builds
small dicts and tuples: how wide this machine's own spread is for such work (on a
shared virtual machine its p95 can be well above its p50), so the engine's tail can be
read against it. The four are timed in turn, one call of each per round, so that each
sees the machine as the others do (a virtual machine here runs some seconds at half
speed, and timing one after the other put a slow spell into one figure and not the
next). Prints one JSON object; times are in microseconds.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable
from datetime import date

from bench.stats import summary
from bench.synthetic import CATEGORY, flow_yaml, prefill
from flowcore.flow.building import build_flow
from flowcore.flow.model import Category, Flow
from flowcore.run import engine
from flowcore.run.lookups import Looked


def built(text: str) -> Flow:
    flow, findings = build_flow(text, categories={CATEGORY: Category(CATEGORY, CATEGORY)})
    if flow is None:
        raise SystemExit(f"a bench flow does not build: {findings}")
    return flow


# An ask whose answer leads to a check: ``answer_check`` against ``answer_plain``.
CHECK_FLOW = f"""\
id: bench_check
title: Bench check
category: {CATEGORY}
entry: n_amount
nodes:
  - id: n_amount
    kind: collect
    say: Find the amount
    slots:
      amount:
        ask: Read the amount
        required: true
        type: number
    next: n_go
  - id: n_go
    kind: ask
    say: Go on?
    accepts:
      "yes": Go on
    next:
      "yes": n_check
  - id: n_check
    kind: check
    say: Above 100, or ordered more than 30 days ago?
    when:
      - if: amount > 100.0 || today > timestamp('2026-12-31T00:00:00Z')
        next: n_high
    else: n_low
  - id: n_high
    kind: end
    outcome: high
    say: High
  - id: n_low
    kind: end
    outcome: low
    say: Low
"""


# The same ask leading to a lookup instead: ``answer_lookup``.
LOOKUP_FLOW = CHECK_FLOW.replace("bench_check", "bench_lookup").replace(
    """  - id: n_check
    kind: check
    say: Above 100, or ordered more than 30 days ago?
    when:
      - if: amount > 100.0 || today > timestamp('2026-12-31T00:00:00Z')
        next: n_high
    else: n_low
""",
    """  - id: n_check
    kind: lookup
    say: Is this customer's credit above the amount?
    call: crm
    send: [amount]
    returns: {high: above, low: below}
    sets: {credit: number}
    next: {high: n_high, low: n_low, __error__: n_low}
""",
)
LOOKED = {"n_check": Looked(response='{"label": "high", "values": {"credit": 500.0}}', ms=1.0)}


def timed_us(calls: dict[str, Callable[[], object]], n: int) -> dict[str, dict[str, float]]:
    """Each of ``calls`` timed ``n`` times, one call of each per round, in microseconds."""
    for fn in calls.values():
        for _ in range(min(n, 200)):  # warm-up
            fn()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    rounds = [(fn, samples[name].append) for name, fn in calls.items()]
    clock = time.perf_counter
    gc.disable()
    try:
        for _ in range(n):
            for fn, keep in rounds:
                start = clock()
                fn()
                keep((clock() - start) * 1_000_000)
    finally:
        gc.enable()
    return {name: summary(taken) for name, taken in samples.items()}


def control() -> list[dict[str, object]]:
    """The allocation pattern of a transition (small dicts and tuples), and no engine."""
    return [{"id": i, "entry": (i, "ask", "asked")} for i in range(24)]


def measure(n: int) -> dict[str, object]:
    flow = built(flow_yaml())
    with_fold = prefill(fold=True)
    without_fold = prefill(fold=False)
    at_fold = engine.start(flow, without_fold).state
    at_plain = engine.start(flow, with_fold).state
    assert at_fold.node == "fold" and at_plain.node == "p01", (at_fold.node, at_plain.node)
    checked = built(CHECK_FLOW)
    today = date(2026, 12, 7)
    at_check = engine.start(checked, {"amount": "129.90"}, today=today).state
    assert at_check.node == "n_go", at_check.node
    looking = built(LOOKUP_FLOW)
    at_lookup = engine.start(looking, {"amount": "129.90"}).state
    assert engine.answer(looking, at_lookup, choice="yes", lookups=LOOKED).state.outcome == "high"
    calls: dict[str, Callable[[], object]] = {
        "start_prefill_fold": lambda: engine.start(flow, with_fold),
        "answer_fold": lambda: engine.answer(flow, at_fold, choice="__unknown__"),
        "answer_plain": lambda: engine.answer(flow, at_plain, choice="yes"),
        "answer_check": lambda: engine.answer(checked, at_check, choice="yes", today=today),
        "answer_lookup": lambda: engine.answer(looking, at_lookup, choice="yes", lookups=LOOKED),
        "control": control,
    }
    return {"unit": "us", "nodes": len(flow.nodes), **timed_us(calls, n)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=5000)
    json.dump(measure(parser.parse_args().n), sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
