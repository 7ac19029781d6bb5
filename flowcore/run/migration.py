"""Moving a run onto the live version of its flow: its recorded inputs, replayed through
the engine on the live version.

A run moves only when every input it recorded is still accepted the same way there (each
answer at the same node, with the same status), it ends up in the state it is in now, and
every guarantee of the live tests holds on the path it would take from there. Otherwise it
stays, and the first input that no longer fits is the reason. ``replay`` rebuilds a moved
run the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from flowcore.common.errors import Refusal
from flowcore.flow.labels import label_of
from flowcore.flow.model import UNKNOWN, AskNode, CollectNode, Flow
from flowcore.run import engine
from flowcore.run.lookups import LookupNeeded, recorded_lookups
from flowcore.run.results import ADOPT, MOVE, RESOLVE, recorded_today
from flowcore.run.state import RunState


class StoredStep(Protocol):
    """What a move reads of a stored step (``replay.StoredStep`` has it)."""

    @property
    def seq(self) -> int: ...
    @property
    def tool(self) -> str: ...
    @property
    def input(self) -> Mapping[str, Any]: ...
    @property
    def status(self) -> str: ...
    @property
    def node_before(self) -> str: ...


# The tools whose input a move replays (a person resolving a stalled run among them); an
# adopt or an earlier move changes no input.
ANSWERS = ("guide_answer", RESOLVE)
REPLAYED = ("guide_start", "guide_back", *ANSWERS)
PASSED_OVER = (ADOPT, MOVE)


@dataclass(frozen=True)
class Replayed:
    """A run's inputs replayed on a flow: the state they lead to (None when one of them no
    longer fits: ``reason`` says which and why), and how many answers and backs."""

    state: RunState | None
    answers: int = 0
    backs: int = 0
    reason: str = ""


@dataclass(frozen=True)
class MovePlan:
    """What moving one run would do: ``state`` on the live version when it moves, else
    the ``reason`` it stays."""

    run_id: str
    state: RunState | None
    reason: str = ""
    answers: int = 0
    backs: int = 0

    @property
    def moves(self) -> bool:
        return self.state is not None

    @property
    def replayed(self) -> int:
        return self.answers + self.backs

    def line(self) -> str:
        """``RUN_ID moves: waits at NODE (replayed N answers)`` or ``RUN_ID stays: REASON``.

        >>> MovePlan("r_1", None, "answer 'credit' at n_m is no longer a label").line()
        "r_1 stays: answer 'credit' at n_m is no longer a label"
        >>> MovePlan("r_2", RunState(state="active", node="n_b"), answers=1).line()
        'r_2 moves: waits at n_b (replayed 1 answer)'
        """
        if self.state is None:
            return f"{self.run_id} stays: {self.reason}"
        who = " for a person" if self.state.state == "stalled" else ""
        replayed = _counted(self.answers, "answer")
        if self.backs:
            replayed += f" and {_counted(self.backs, 'back')}"
        return f"{self.run_id} moves: waits at {self.state.node}{who} (replayed {replayed})"


def _counted(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def replay_inputs(
    flow: Flow, steps: Sequence[StoredStep], *, rules: int = engine.RULES
) -> Replayed:
    """The inputs of ``steps`` (a run's steps, in order) replayed through the engine on
    ``flow`` by the run's own decision ``rules``, each checked against what it did when it
    was recorded."""
    state: RunState | None = None
    answers = backs = 0
    for step in steps:
        if step.tool in PASSED_OVER:
            continue
        if step.tool not in REPLAYED:
            return Replayed(None, reason=f"step {step.seq} ({step.tool}) is not an agent's input")
        what = describe(step)
        if step.tool == "guide_start":
            try:
                transition = engine.start(
                    flow,
                    step.input.get("values"),
                    rules=rules,
                    today=recorded_today(step.input),
                    lookups=recorded_lookups(step.input),
                )
            except Refusal as refusal:
                return Replayed(None, reason=f"{what} are refused: {refusal.reason}")
            except LookupNeeded as need:
                return Replayed(None, reason=_never_called(what, "reach", need))
        else:
            assert state is not None, "a run's first step is its start"
            waits_in = "stalled" if step.tool == RESOLVE else "active"
            if step.tool in ANSWERS and (state.state != waits_in or state.node != step.node_before):
                now = (
                    f"it waits at {state.node} there"
                    if state.state == "active"
                    else f"the run is {state.state} there"
                )
                return Replayed(None, reason=f"{what}: on the live version {now}")
            try:
                if step.tool in ANSWERS:
                    answer = engine.resolve if step.tool == RESOLVE else engine.answer
                    transition = answer(
                        flow,
                        state,
                        choice=step.input.get("choice"),
                        values=step.input.get("values"),
                        today=recorded_today(step.input),
                        lookups=recorded_lookups(step.input),
                    )
                    answers += 1
                else:
                    transition = engine.back(flow, state, step.input.get("to"))
                    backs += 1
            except Refusal as refusal:
                return Replayed(None, reason=f"{what} is refused: {refusal.reason}")
            except LookupNeeded as need:
                return Replayed(None, reason=_never_called(what, "reaches", need))
        result: Mapping[str, Any] = transition.result
        if result["status"] != step.status:
            return Replayed(None, reason=_unlike(flow, step, what, result))
        state = transition.state
    if state is None:
        return Replayed(None, reason="the run has no steps")
    return Replayed(state, answers, backs)


def _never_called(what: str, reach: str, need: LookupNeeded) -> str:
    """Why a run does not move where a recorded input reaches a lookup it never called: a
    move replays what was recorded, and calls nothing."""
    return f"{what} {reach} the lookup {need.node.id}, which the run never called"


def describe(step: StoredStep) -> str:
    """An input as a person reads it: "answer 'credit' at n_refund_method".

    >>> from flowcore.run.replay import StoredStep
    >>> describe(StoredStep(3, "guide_answer", {"choice": "credit"}, {}, "", "n_m", ""))
    "answer 'credit' at n_m"
    """
    given = step.input
    if step.tool == "guide_start":
        return "the start's values"
    if step.tool == "guide_back":
        to = given.get("to")
        return f"back to {to}" if to else "back (undo the last answer)"
    parts = []
    if given.get("choice") is not None:
        parts.append(f"answer {given['choice']!r}")
    if given.get("values"):
        parts.append("values for " + ", ".join(sorted(given["values"])))
    said = f"{' with '.join(parts) or 'an answer'} at {step.node_before}"
    return f"a person's {said}" if step.tool == RESOLVE else said


def _unlike(flow: Flow, step: StoredStep, what: str, result: Mapping[str, Any]) -> str:
    """Why an input that was accepted one way is taken another way on ``flow``."""
    status, was = result["status"], step.status
    node = flow.nodes.get(step.node_before)
    choice = step.input.get("choice")
    if (
        isinstance(node, AskNode)
        and isinstance(choice, str)
        and choice != UNKNOWN
        and label_of(node, choice) is None
    ):
        return f"{what} is no longer a label"
    if status == "unmatched" and isinstance(node, CollectNode):
        slots = ", ".join(sorted(result.get("rejected_slots") or {})) or "a value"
        return f"{what}: {slots} no longer fits"
    if step.tool == "guide_start":
        where = (result.get("node") or {}).get("id", "")
        return f"{what} now end {status} at {where} (they ended {was})"
    return f"{what} is now {status} (it was {was})"


def plan_move(
    flow: Flow,
    run_id: str,
    current: RunState,
    steps: Sequence[StoredStep],
    refuse_path: Callable[[RunState], str | None] | None = None,
) -> MovePlan:
    """Whether the run ``run_id`` (its state now, ``current``, and its steps) moves onto
    ``flow`` (the live version), and where it would wait. ``refuse_path``: why the path
    the run would take from its replayed state is refused (the live tests' guarantees,
    ``flowcore.checks.guarantees.path_refusal``), or None when it is not."""
    if current.state not in ("active", "stalled"):
        return MovePlan(run_id, None, f"it is {current.state}: only active and stalled runs move")
    replayed = replay_inputs(flow, steps, rules=current.rules)
    state = replayed.state
    if state is None:
        return MovePlan(run_id, None, replayed.reason)
    answers, backs = replayed.answers, replayed.backs
    if state.state != current.state:
        if state.state == "completed":
            ended = f" (outcome {state.outcome})" if state.outcome else ""
            why = f"its answers complete it on the live version{ended}; a move never ends a run"
        else:
            why = (
                f"on the live version its answers leave it {state.state} at {state.node}, "
                f"not {current.state}"
            )
        return MovePlan(run_id, None, why, answers=answers, backs=backs)
    refused = refuse_path(state) if refuse_path is not None else None
    if refused is not None:
        return MovePlan(run_id, None, refused, answers=answers, backs=backs)
    return MovePlan(run_id, state, answers=answers, backs=backs)
