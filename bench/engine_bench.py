"""Engine speed: one step on the bundled flows, in process (no database, no HTTP).

    python -m bench.engine_bench [--n 2000]

Prints p50/p95/p99 per operation and each one's ratio to starting a run.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench.stats import report
from flows_app.domain import engine
from flows_app.domain.files import load_catalog

FLOWS = Path(__file__).resolve().parent.parent / "flows"


def timed(fn: object, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    n = parser.parse_args().n
    flow = load_catalog(FLOWS).flows["payment_failed"]
    started = engine.start(flow)
    unknown = {"n_error_code": "E01", "n_card_age": "__unknown__"}
    base = report("start", timed(lambda: engine.start(flow), n))
    report(
        "answer (advance one node)",
        timed(lambda: engine.answer(flow, started.state, choice="E01"), n),
        base,
    )
    report("start with prefill + fold", timed(lambda: engine.start(flow, unknown), n), base)
    after = engine.answer(flow, started.state, choice="E01").state
    report("back", timed(lambda: engine.back(flow, after), n), base)
    report("state to/from JSON", timed(lambda: engine.RunState.from_dict(after.to_dict()), n), base)


if __name__ == "__main__":
    main()
