"""The completing step with and without a subscription, through the service, on a real
database, in this process (no HTTP, no other clients): what the outbox's INSERT costs.

    python -m bench.webhooks_service_bench [--database sqlite:////tmp/x.sqlite3] [--runs 400]

Runs of the bench flow are walked to their end; the last answer of each (the one that
completes the run, and records ``run.completed`` when subscribed) is timed. Blocks of 50
runs alternate without and with a subscription on ``run.completed`` (nothing is
delivered: no worker runs here), so that drift in the machine's load shows in both.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.service_bench import setup
from bench.stats import summary
from bench.synthetic import LATER, prefill, write_flows_dir

BLOCK = 50


def measure(runs: int) -> dict[str, Any]:
    from access_app import guards
    from access_app.callers import Transport
    from events_app import services as events
    from events_app.models import Event, Subscription
    from runs_app import agent_steps as services

    caller = guards.authenticate(
        Transport(peer="127.0.0.1", client_name="bench", client_version="1")
    )
    samples: dict[bool, list[float]] = {False: [], True: []}
    for block in range(runs // BLOCK):
        subscribed = block % 2 == 1
        Subscription.objects.all().delete()
        if subscribed:
            events.subscription_add(url="http://127.0.0.1:9/hook", events=["run.completed"])
        events.kinds_wanted()
        for _ in range(BLOCK):
            run_id = services.run_start(
                caller=caller, flow_id="bench_0000", values=prefill(), ref=None
            )["run_id"]
            for _ in range(LATER - 1):
                services.run_answer(
                    caller=caller, run_id=run_id, choice="yes", values=None, at=None
                )
            began = time.perf_counter()
            done = services.run_answer(
                caller=caller, run_id=run_id, choice="yes", values=None, at=None
            )
            samples[subscribed].append((time.perf_counter() - began) * 1000)
            assert done["status"] == "completed", done
    without, with_ = summary(samples[False]), summary(samples[True])
    return {
        "completing_step_without_ms": without,
        "completing_step_with_ms": with_,
        "p50_ratio": with_["p50"] / without["p50"],
        "p95_ratio": with_["p95"] / without["p95"],
        "events_recorded": Event.objects.count(),
        "load_average": list(os.getloadavg()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.webhooks_service_bench")
    parser.add_argument("--database", default="")
    parser.add_argument("--runs", type=int, default=400)
    options = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="guidepost-webhooks-service-"))
    database = options.database or f"sqlite:///{tmp / 'bench.sqlite3'}"
    os.environ["GUIDEPOST_WEBHOOK_ALLOW_PRIVATE"] = "1"
    setup(database, write_flows_dir(tmp / "flows", 1))
    print(json.dumps(measure(options.runs), indent=1))


if __name__ == "__main__":
    main()
