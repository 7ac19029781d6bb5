"""Proof (issue 11, point 7): a hypothesis state machine drives the services the way
agents and reviewers do (start, answer valid, invalid, duplicate and stale, back, close,
draft intake, approval), and after every rule the stored runs still hold together
(ADR 0028):

- each run's steps are numbered 1..revision and its hash chain is intact;
- each run's fields (owner, ``ref``, ``request_id``, close reason, times, flow version)
  are what its steps recorded;
- replaying a run's steps on its pinned flow gives back every stored result and its
  stored state (``verify``'s replay), also after a new version of its flow was approved;
- nothing happens after an end: a closed run gains no step, and a completed or stalled
  run gains only a back or a close;
- a duplicate (the same answer retried with its ``at``, a start retried with its
  ``request_id``, a second close) adds no row;
- every refusal is the error object (spec §7), short, never an internal
  error, and writes no run, step, draft or version.

Tool calls go through the dispatcher (guards, the service, the error shape); approval
has no tool and calls ``draft_approve``. Each example runs in a transaction rolled back
at its end, on a flows directory of its own (approval writes flow files), so it runs on
SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from django.test.utils import override_settings
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from access_app.callers import Transport
from flowcore.common.errors import Refusal, error_object
from flowcore.flow.model import AskNode, CollectNode, Flow
from flowcore.run.state import RunState
from flows_app.catalog import current_catalog
from flows_app.models import Draft, FlowVersion
from flows_app.services import draft_approve
from guidepost.mcp.dispatch import dispatch
from runs_app import selectors
from runs_app.models import Run, Step
from runs_app.verification import run_problems
from tests.support.servers import BUNDLED_FLOWS

pytestmark = pytest.mark.django_db

AGENT = Transport(peer="127.0.0.1", client_name="proof", client_version="1")
FLOWS = ("refund_request", "payment_failed")
ERROR_KEYS = {"error", "reason", "next", "retryable", "candidates", "attempt", "repeated"}
ERROR_KEYS |= {"retry_after"}
# "About 100 tokens" (spec §7): a generous bound in characters.
MAX_ERROR_CHARACTERS = 1_500
ENDED = ("completed", "stalled")
APPROVALS = 2
SUBMISSIONS = 4
RUNS = 4
# What the machine's calls came to, over every example: the test fails when a rule never
# reached the situation it is there for (a proof that never retried proves nothing).
SEEN: Counter[str] = Counter()
SLOT_TEXT = st.sampled_from(["A00118", "someone@example.com", "注文 A00118", "x" * 40])
PRINTABLE = st.characters(min_codepoint=32, max_codepoint=126)


def flows_subset(target: Path) -> Path:
    """The machine's flows, their categories and tests: a directory of its own, small
    enough that reading it anew for each example costs little."""
    (target / "tests").mkdir(parents=True)
    shutil.copy(BUNDLED_FLOWS / "categories.yaml", target)
    for flow_id in FLOWS:
        shutil.copy(BUNDLED_FLOWS / f"{flow_id}.yaml", target)
        shutil.copy(BUNDLED_FLOWS / "tests" / f"{flow_id}.yaml", target / "tests")
    return target


def assert_error_shape(error: dict[str, Any]) -> None:
    """Spec §7: the keys, their types, short, and never an unexpected failure."""
    assert set(error) <= ERROR_KEYS, error
    assert {"error", "reason", "next", "retryable"} <= set(error), error
    assert all(isinstance(error[k], str) and error[k] for k in ("error", "reason", "next"))
    assert isinstance(error["retryable"], bool)
    assert error["error"] != "internal error", error
    assert len(error.get("candidates", [])) <= 5
    assert len(json.dumps(error, ensure_ascii=False)) <= MAX_ERROR_CHARACTERS, error


def rows() -> tuple[int, int, int, int]:
    return (
        Run.objects.count(),
        Step.objects.count(),
        Draft.objects.count(),
        FlowVersion.objects.count(),
    )


def slot_value(pattern: str | None) -> st.SearchStrategy[str]:
    if pattern is None:
        return SLOT_TEXT
    return st.from_regex(pattern, fullmatch=True, alphabet=PRINTABLE)


def valid_values(flow: Flow, node_id: str) -> st.SearchStrategy[dict[str, str]]:
    """Values the node waiting at ``node_id`` accepts: a label (or unknown) for an ask, a
    value for some of a collect's slots (every required one, or unknown)."""
    node = flow.nodes[node_id]
    if isinstance(node, AskNode):
        labels = [*node.accepts, "__unknown__", next(iter(node.accepts)).upper()]
        return st.sampled_from(labels).map(lambda label: {node_id: label})
    assert isinstance(node, CollectNode)
    required = [s for s in node.slots if s.required]
    optional = [s for s in node.slots if not s.required]
    return st.fixed_dictionaries(
        {s.name: slot_value(s.pattern) | st.just("__unknown__") for s in required},
        optional={s.name: slot_value(s.pattern) for s in optional},
    )


def invalid_arguments(node_id: str | None) -> st.SearchStrategy[dict[str, Any]]:
    """Answers the server must refuse or count as unmatched."""
    target = node_id or "n_none"
    return st.sampled_from(
        [
            {"choice": "no_such_label"},  # unmatched, or __other__ where the node has one
            {"choice": "E1"},  # a slip on E01: unmatched even where the node has __other__
            {"values": {target: "no_such_label"}},
            {"values": {"order_number": "B12"}},  # fails the slot's pattern
            {"values": {"k" * 65: "x"}},  # a key over 64 characters: refused
            {"choice": "damaged\x00"},  # a control character: refused
            {"choice": "E01", "values": {target: "E02"}},  # choice and value disagree
            {"values": {"no_such_key": "x" * 2000}},  # ignored by name, not stored
            {},  # nothing to answer with
            {"choice": 7},  # not a string: refused by the schema
            {"values": {"order_email": "  "}},  # an empty value: refused
        ]
    )


class ServicesMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="proof-machine-"))
        self.flows_dir = flows_subset(self.tmp / "flows")
        self.overrides = override_settings(
            GUIDEPOST_FLOWS_DIR=self.flows_dir, GUIDEPOST_FLOWS_POLL=0.0
        )
        self.overrides.enable()
        self.atomic = transaction.atomic()
        self.atomic.__enter__()
        self.runs: list[str] = []
        self.drafts: list[str] = []
        # run -> the arguments of its last step, when that step was an answer given with `at`
        self.last_answer: dict[str, dict[str, Any]] = {}
        # run -> its revision when it was closed
        self.closed: dict[str, int] = {}
        self.approvals = 0
        self.submissions = 0

    def teardown(self) -> None:
        transaction.set_rollback(True)
        self.atomic.__exit__(None, None, None)
        self.overrides.disable()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- calling ---------------------------------------------------------------------------

    def call(self, tool: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        """A tool call through the dispatcher; a refusal is checked for its shape and for
        having written nothing."""
        before = rows()
        outcome = dispatch(tool, args, AGENT)
        what = outcome.payload.get("error") or outcome.payload.get("status") or "ok"
        SEEN[f"{tool}: {what}{' (repeated)' if outcome.payload.get('repeated') else ''}"] += 1
        if outcome.is_error:
            assert_error_shape(outcome.payload)
            assert "attempt" in outcome.payload
            assert rows() == before, (tool, args, outcome.payload)
        elif outcome.payload.get("repeated"):
            assert rows() == before, (tool, args)  # a duplicate adds no row
        return outcome.is_error, outcome.payload

    def call_on_run(self, tool: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        """A call on an existing run: an accepted call adds exactly one step, and only
        what may follow the run's state (nothing after a close; after a completion or a
        stall, only back or close)."""
        run = Run.objects.get(public_id=args["run_id"])
        is_error, payload = self.call(tool, args)
        after = Run.objects.get(public_id=args["run_id"])
        if is_error or payload.get("repeated"):
            assert after.revision == run.revision
            return is_error, payload
        assert after.revision == run.revision + 1
        assert run.state != "closed", (tool, args)
        if run.state == "completed":
            assert tool == "guide_back", (run.state, tool, args)  # its outcome stands
        elif run.state in ENDED:
            assert tool in ("guide_back", "guide_close"), (run.state, tool, args)
        self.last_answer.pop(args["run_id"], None)
        if tool == "guide_answer" and "at" in args:
            self.last_answer[args["run_id"]] = args
        if tool == "guide_close":
            self.closed[args["run_id"]] = after.revision
        return is_error, payload

    def flow_of(self, run_id: str) -> tuple[Run, Flow]:
        run = Run.objects.select_related("flow_version").get(public_id=run_id)
        return run, selectors.run_flow(run)

    # --- rules -----------------------------------------------------------------------------

    # A few runs per example, so that answers pile up on each of them.
    @precondition(lambda self: len(self.runs) < RUNS)
    @rule(
        flow_id=st.sampled_from(FLOWS),
        data=st.data(),
        request_id=st.none() | st.sampled_from(["req-1", "req-2"]),
    )
    def start(self, flow_id: str, data: st.DataObject, request_id: str | None) -> None:
        flow = current_catalog().flows[flow_id]
        values = data.draw(st.none() | valid_values(flow, flow.entry), label="values")
        args: dict[str, Any] = {"flow_id": flow_id}
        if values is not None:
            args["values"] = values
        if request_id is not None:
            args["request_id"] = request_id
        before = rows()
        is_error, payload = self.call("guide_start", args)
        if is_error:
            assert payload["error"] == "request_id already used", payload
        elif payload.get("repeated"):
            assert payload["run_id"] in self.runs
        else:
            assert rows()[:2] == (before[0] + 1, before[1] + 1)
            self.runs.append(payload["run_id"])

    @precondition(lambda self: self.runs)
    @rule(data=st.data())
    def answer_valid(self, data: st.DataObject) -> None:
        self._answer_valid(data, with_at=False)

    @precondition(lambda self: self.runs)
    @rule(data=st.data())
    def answer_valid_at(self, data: st.DataObject) -> None:
        self._answer_valid(data, with_at=True)

    def _answer_valid(self, data: st.DataObject, *, with_at: bool) -> None:
        run_id = data.draw(st.sampled_from(self.runs), label="run")
        run, flow = self.flow_of(run_id)
        if not run.node or run.node not in flow.waiting_nodes:
            node_id = None
            args: dict[str, Any] = {"run_id": run_id, "choice": "anything"}
        else:
            node_id = run.node
            args = {"run_id": run_id, "values": data.draw(valid_values(flow, run.node))}
        if with_at and node_id is not None:
            args["at"] = node_id
        is_error, payload = self.call_on_run("guide_answer", args)
        if run.state == "active":
            assert not is_error, payload
        elif not is_error:  # the very answer that ended the run, retried with its `at`
            assert payload.get("repeated") is True, payload
        else:
            assert payload["retryable"] is False, payload

    @precondition(lambda self: self.runs)
    @rule(data=st.data(), with_at=st.booleans())
    def answer_invalid(self, data: st.DataObject, with_at: bool) -> None:
        run_id = data.draw(st.sampled_from(self.runs), label="run")
        run, _ = self.flow_of(run_id)
        args = {"run_id": run_id, **data.draw(invalid_arguments(run.node or None))}
        if with_at and run.node:
            args["at"] = run.node
        self.call_on_run("guide_answer", args)

    @precondition(lambda self: self.runs)
    @rule(data=st.data())
    def answer_unmatched(self, data: st.DataObject) -> None:
        """A label no node offers, sent to a run waiting on a choice: counted as unmatched
        (or taken as ``__other__`` where the node has one). Its own rule, so that the
        unmatched path is reached whatever the draws (``answer_invalid`` reaches it only
        now and then)."""
        run_id = data.draw(st.sampled_from(self.runs), label="run")
        run, flow = self.flow_of(run_id)
        if run.state == "active" and isinstance(flow.nodes.get(run.node), AskNode):
            self.call_on_run("guide_answer", {"run_id": run_id, "choice": "no_such_label"})

    @precondition(lambda self: self.last_answer)
    @rule(data=st.data())
    def answer_duplicate(self, data: st.DataObject) -> None:
        """The last answer retried with the same arguments and ``at``: once the run has
        moved on, the stored result again, marked repeated, and no new row."""
        run_id = data.draw(st.sampled_from(sorted(self.last_answer)), label="run")
        args = self.last_answer[run_id]
        run = Run.objects.get(public_id=run_id)
        if run.state == "active" and run.node == args["at"]:
            return  # the run did not move (unmatched, or a collect still missing a slot)
        stored = run.steps.order_by("-seq").first()
        assert stored is not None
        is_error, payload = self.call_on_run("guide_answer", args)
        assert not is_error, payload
        assert payload == {**stored.result, "repeated": True}

    @precondition(lambda self: self.runs)
    @rule(data=st.data())
    def answer_stale(self, data: st.DataObject) -> None:
        """An answer with ``at`` naming a node the run has left: refused as moved (or as
        ended), or the stored result when it is the very answer given there; no row."""
        run_id = data.draw(st.sampled_from(self.runs), label="run")
        run, flow = self.flow_of(run_id)
        passed = [
            entry.id
            for entry in RunState.from_dict(run.engine_state).path
            if entry.id in flow.waiting_nodes and entry.id != run.node
        ]
        if not passed:
            return
        at = data.draw(st.sampled_from(passed), label="at")
        values = data.draw(valid_values(flow, at), label="values")
        is_error, payload = self.call_on_run(
            "guide_answer", {"run_id": run_id, "values": values, "at": at}
        )
        if is_error:
            assert payload["error"] in (
                "run has moved",
                "run is completed",
                "run is stalled",
                "run is closed",
            ), payload
        else:
            assert payload.get("repeated") is True, payload

    @precondition(lambda self: self.runs)
    @rule(data=st.data())
    def back(self, data: st.DataObject) -> None:
        run_id = data.draw(st.sampled_from(self.runs), label="run")
        run = Run.objects.get(public_id=run_id)
        path = [entry.id for entry in RunState.from_dict(run.engine_state).path]
        to = data.draw(st.none() | st.sampled_from([*path, "n_nowhere"]), label="to")
        args = {"run_id": run_id} if to is None else {"run_id": run_id, "to": to}
        is_error, payload = self.call_on_run("guide_back", args)
        if run.state == "closed":
            assert is_error and payload["error"] == "run is closed", payload

    @precondition(lambda self: self.runs)
    @rule(data=st.data())
    def close(self, data: st.DataObject) -> None:
        run_id = data.draw(st.sampled_from(self.runs), label="run")
        was_closed = run_id in self.closed
        completed = Run.objects.get(public_id=run_id).state == "completed"
        is_error, payload = self.call_on_run(
            "guide_close", {"run_id": run_id, "reason": "the person left"}
        )
        if completed:
            assert is_error and payload["error"] == "run already ended", payload
            assert payload["retryable"] is False
            return
        assert not is_error, payload
        assert payload["state"] == "closed" and bool(payload.get("repeated")) == was_closed

    @precondition(lambda self: self.submissions < SUBMISSIONS)
    @rule(
        variant=st.sampled_from(["version", "broken", "version", "list", "huge"]),
        number=st.integers(3, 4),
    )
    def draft(self, variant: str, number: int) -> None:
        self.submissions += 1
        source = (self.flows_dir / "refund_request.yaml").read_text(encoding="utf-8")
        texts = {
            # A new version (a changed flow needs one), unique to this submission.
            "version": re.sub(
                r"(?m)^version: .*$",
                f'version: "proof.{self.submissions}"',
                source.replace(
                    "title: Customer asks for a refund",
                    f"title: Customer asks for a refund ({number})",
                ),
            ),
            "broken": source.replace("next: n_reason", "next: n_nowhere"),
            "list": "- not a mapping\n",
            "huge": "id: refund_request\n# " + "x" * (256 * 1024) + "\n",
        }
        is_error, payload = self.call("guide_draft", {"yaml": texts[variant]})
        if variant in ("list", "huge"):
            assert is_error, payload
        else:
            assert not is_error, payload
            assert payload["ok"] is (variant == "version"), payload
            if payload["draft_id"] not in self.drafts:
                self.drafts.append(payload["draft_id"])

    # Approval runs the flow's tests (slow): at most APPROVALS tries per example.
    @precondition(lambda self: self.drafts and self.approvals < APPROVALS)
    @rule(data=st.data(), confirm=st.booleans())
    def approve(self, data: st.DataObject, confirm: bool) -> None:
        self.approvals += 1
        draft_id = data.draw(st.sampled_from(self.drafts), label="draft")
        draft = Draft.objects.get(public_id=draft_id)
        before = rows()
        try:
            draft_approve(draft=draft, approved_by="proof", confirm_broken_tests=confirm)
        except Refusal as refusal:
            assert_error_shape(dict(error_object(refusal)))
            assert rows() == before
            assert draft.status != Draft.Status.PENDING or not draft.ok or not confirm
        else:
            assert draft.status == Draft.Status.APPROVED
            SEEN["approved"] += 1

    # --- invariants --------------------------------------------------------------------------

    @invariant()
    def every_run_holds_together(self) -> None:
        for run in Run.objects.select_related("flow_version"):
            seqs = list(run.steps.order_by("seq").values_list("seq", flat=True))
            assert seqs == list(range(1, run.revision + 1)), (run.public_id, seqs)
            # verify's checks of one run: its chain, its fields, its replay (ADR 0067)
            assert run_problems(run) == [], run.public_id
            if run.public_id in self.closed:
                assert (run.state, run.revision) == ("closed", self.closed[run.public_id])


def test_services_keep_every_run_consistent_under_any_sequence_of_calls(db: None) -> None:
    SEEN.clear()
    run_state_machine_as_test(
        ServicesMachine,
        settings=settings(
            # PROOF_EXAMPLES=200 explores further by hand; CI runs the default.
            # 20: with completed runs no longer closed (they stay completed and take many
            # of the drawn calls), 15 examples reached no unmatched answer.
            max_examples=int(os.environ.get("PROOF_EXAMPLES", 20)),
            stateful_step_count=30,
            # No shrinking: a failure prints its (longer) sequence of calls at once, and the
            # test stays bounded in time whether it passes or fails.
            phases=[Phase.explicit, Phase.generate],
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    print(sorted(SEEN.items()))
    for reached in (
        "guide_start: advanced",
        "guide_answer: advanced",
        "guide_answer: completed",
        "guide_answer: unmatched",
        "guide_answer: stalled",
        "guide_answer: run has moved",
        "guide_back: advanced",
        "guide_close: ok",
        "guide_close: ok (repeated)",
        "guide_draft: draft refused",
        "approved",
    ):
        assert SEEN[reached], (reached, sorted(SEEN.items()))
    for tool in ("guide_start", "guide_answer"):  # a retry found its first answer
        assert any(k.startswith(tool) and k.endswith("(repeated)") for k in SEEN), tool
