"""An agent that walks runs of ``refund_request`` against a real server, for the proofs
under faults (ADR 0028): every call carries what makes it safe to repeat (``request_id``
on ``guide_start``, ``at`` on ``guide_answer``), and the agent remembers every call the
server acknowledged, so a test can hold the database to it afterwards.

Each agent keeps one HTTP client (its connections kept alive, as a real agent's are):
a client made per call would cost each call a new TLS context, which on a small machine
starved the server it was testing. A server killed mid-call shows as a transport error.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx2

from tests.support.mcp_http import RPC_HEADERS, bearer, http_client

FLOW = "refund_request"
# (at, arguments) of each answer, in order: five answers from start to the end n_credited.
ANSWERS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("n_order", {"values": {"order_number": "A00118"}}),
    ("n_reason", {"choice": "changed_mind"}),
    ("n_within_window", {"choice": "yes"}),
    ("n_unused", {"choice": "yes"}),
    ("n_refund_method", {"choice": "credit"}),
)


# Seconds between tries of a call that got no answer.
RETRY_PAUSE = 0.2


@dataclass
class Acknowledged:
    """A call the server answered with a result (not an error): its run, tool and the
    node it was given at ("" for a start)."""

    run_id: str
    tool: str
    at: str
    repeated: bool


@dataclass
class Agent:
    """Walks runs until ``stop`` is set or ``answers`` answers were acknowledged.

    ``retry_faults``: a transport error, a 502/503 or ``server busy`` is retried with the
    same arguments; otherwise (and any other refusal, ``internal error`` included) it is
    recorded in ``failures`` and the agent stops. ``duplicate``: after each acknowledged
    answer, send it once more and expect the stored result back (``repeated``)."""

    base: str
    name: str
    answers: int
    stop: threading.Event
    retry_faults: bool = False
    duplicate: bool = False
    # An agent key sent with every call (a server behind a proxy requires one).
    key: str | None = None
    acknowledged: list[Acknowledged] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    transport_errors: int = 0
    runs: list[str] = field(default_factory=list)
    # The call sent but not acknowledged when the agent stopped (its step may exist):
    # (run id, at) of an answer, ("", request_id) of a start.
    pending: tuple[str, str] | None = None
    http: httpx2.Client = field(init=False, repr=False)

    def answered(self) -> int:
        return sum(1 for a in self.acknowledged if a.tool == "guide_answer" and not a.repeated)

    def run(self) -> None:
        try:
            headers = {**RPC_HEADERS, **bearer(self.key)}
            with http_client(base_url=self.base, headers=headers, timeout=30) as http:
                self.http = http
                while not self.stop.is_set() and self.answered() < self.answers:
                    if not self._walk_one():
                        return
        except Exception as exc:  # a bug in the test itself must not hang it
            self.failures.append(f"{self.name}: {exc!r}")

    def _post(self, tool: str, args: dict[str, Any]) -> httpx2.Response:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        body["params"] = {"name": tool, "arguments": args}
        return self.http.post("/mcp/", json=body)

    def _walk_one(self) -> bool:
        request_id = f"{self.name}-{uuid.uuid4().hex[:12]}"
        started = self._call(
            "guide_start", {"flow_id": FLOW, "request_id": request_id}, run_id="", at=""
        )
        if started is None:
            return False
        run_id = started["run_id"]
        if not self.runs or self.runs[-1] != run_id:
            self.runs.append(run_id)
        for at, arguments in ANSWERS:
            if self.answered() >= self.answers:
                return False
            args = {"run_id": run_id, "at": at, **arguments}
            if self._call("guide_answer", args, run_id=run_id, at=at) is None:
                return False
            if self.duplicate:
                again = self._call("guide_answer", args, run_id=run_id, at=at)
                if again is None:
                    return False
                if again.get("repeated") is not True:
                    self.failures.append(f"{self.name}: a retry of {at} was not repeated")
                    return False
        return True

    def _call(
        self, tool: str, args: dict[str, Any], *, run_id: str, at: str
    ) -> dict[str, Any] | None:
        """The result once acknowledged; None when the agent must stop."""
        self.pending = (run_id, at) if tool == "guide_answer" else ("", args["request_id"])
        while True:
            if self.stop.is_set():
                return None
            try:
                response = self._post(tool, args)
            except httpx2.TransportError:
                self.transport_errors += 1
                if not self.retry_faults:
                    self.failures.append(f"{self.name}: {tool} got no answer")
                    return None
                time.sleep(RETRY_PAUSE)  # the server is down: leave the machine to its restart
                continue
            if response.status_code != 200:
                if self.retry_faults and response.status_code in (502, 503):
                    time.sleep(RETRY_PAUSE)
                    continue
                self.failures.append(f"{self.name}: {tool} HTTP {response.status_code}")
                return None
            result = response.json()["result"]
            payload: dict[str, Any] = json.loads(result["content"][0]["text"])
            if result.get("isError"):
                if self.retry_faults and payload["error"] == "server busy":
                    time.sleep(RETRY_PAUSE)
                    continue
                self.failures.append(f"{self.name}: {tool} at {at or '-'}: {payload}")
                return None
            self.pending = None
            run = payload.get("run_id", run_id)
            self.acknowledged.append(
                Acknowledged(run, tool, at, repeated=bool(payload.get("repeated")))
            )
            return payload


STEPS_OF_RUNS = """
from runs_app.models import Run
result = {
    run.public_id: [[s.tool, s.node_before] for s in run.steps.order_by("seq")]
    for run in Run.objects.all()
}
result["request_ids"] = {run.public_id: run.request_id for run in Run.objects.all()}
"""


def expected_steps(agents: list[Agent]) -> dict[str, list[list[str]]]:
    """Each run's steps as the agents' acknowledged calls say they must be, in order, as
    (tool, node before): one step per call. A call acknowledged twice (a retry, or the
    duplicate sent on purpose) is one step: the retry found the first (``repeated``)."""
    expected: dict[str, list[list[str]]] = {}
    for agent in agents:
        for ack in agent.acknowledged:
            step = [ack.tool, "" if ack.tool == "guide_start" else ack.at]
            steps = expected.setdefault(ack.run_id, [])
            if step not in steps:
                steps.append(step)
    return expected


def steps_problems(agents: list[Agent], stored: dict[str, Any]) -> list[str]:
    """Where the stored steps differ from the acknowledged calls: a missing acknowledged
    step, a step added by a retry, a run nobody started. Allowed: the one call each agent
    had sent but not seen acknowledged when it stopped (its step may or may not exist): an
    answer's last step, or a run whose start is that call (same ``request_id``)."""
    problems = []
    stored = dict(stored)
    request_ids = stored.pop("request_ids")
    expected = expected_steps(agents)
    pending = {agent.pending for agent in agents if agent.pending is not None}
    for run_id, steps in stored.items():
        want = expected.get(run_id)
        if want is None:
            unseen_start = ("", request_ids[run_id]) in pending
            if not unseen_start or steps != [["guide_start", ""]]:
                problems.append(f"{run_id}: steps {steps} but no acknowledged start")
            continue
        if steps[: len(want)] != want:
            problems.append(f"{run_id}: stored {steps}, acknowledged {want}")
            continue
        extra = steps[len(want) :]
        if extra and not (len(extra) == 1 and (run_id, extra[0][1]) in pending):
            problems.append(f"{run_id}: steps beyond the acknowledged ones: {extra}")
    problems += [f"{run_id}: not stored" for run_id in expected if run_id not in stored]
    return problems
