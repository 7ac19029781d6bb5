"""The engine: ``(flow, run state, input) -> (new run state, step result)``.

Pure Python (no Django, no I/O, no clock): everything spec §3 says
about transitions is decided here, and nowhere else. Callers persist the state
and add what only they know (run ids, times).

Every public function returns a ``Transition`` or raises a ``Refusal``
(``InvalidInput`` for a call that can be fixed, ``StepNotAllowed`` for a call
the run's state forbids).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from operator import attrgetter
from types import MappingProxyType
from typing import Literal, NamedTuple, NotRequired, TypedDict

from flowcore.common.errors import InvalidInput, StepNotAllowed
from flowcore.common.limits import (
    MAX_CANDIDATES,
    MAX_LABEL_LENGTH,
    MAX_NAMED_KEYS,
    MAX_SLOT_VALUE_LENGTH,
    MAX_VALUES_PER_CALL,
)
from flowcore.common.lookups import Fitted, Misfit, answer_fits
from flowcore.common.names import closest
from flowcore.common.text import refuse_controls, shown
from flowcore.flow.conditions import TODAY, holds, reads
from flowcore.flow.folding import FoldBranch, Unfoldable, plan_fold
from flowcore.flow.labels import label_of, near_labels, outside_labels
from flowcore.flow.model import (
    ERROR,
    OTHER,
    TEXT,
    UNKNOWN,
    AskNode,
    CheckNode,
    CollectNode,
    EndNode,
    Flow,
    LookupNode,
    Node,
    Slot,
    SlotType,
    TellNode,
    Value,
    frozen_mapping,
)
from flowcore.flow.patterns import full_match
from flowcore.flow.slot_types import as_text, describe, fit, json_fit
from flowcore.run.lookups import Looked, LookupNeeded, failure_said, judged
from flowcore.run.state import PathEntry, RunState, RunStateName, Via

_ID = attrgetter("id")

_NOT_A_KEY = "not a key of this flow"

StepStatus = Literal["advanced", "completed", "unmatched", "branched", "stalled"]
StallReason = Literal["escalate", "unfoldable", "lookup_failed"]


# --- results ------------------------------------------------------------------------------


class SlotView(TypedDict):
    ask: str
    required: bool
    type: NotRequired[SlotType]
    options: NotRequired[list[str]]
    hint: NotRequired[str]


class NodeView(TypedDict):
    id: str
    kind: str
    say: str
    accepts: NotRequired[dict[str, str]]
    returns: NotRequired[dict[str, str]]
    other: NotRequired[bool]
    type: NotRequired[SlotType]
    slots: NotRequired[dict[str, SlotView]]
    outcome: NotRequired[str]


class TellItem(TypedDict):
    id: str
    say: str


class CheckedItem(TypedDict):
    """A check the run passed in the call: what it checked, and the condition that held
    (``else`` when none did)."""

    id: str
    say: str
    took: str
    next: str


class LookedUpItem(TypedDict):
    """A lookup the run passed, or stalled at, in the call: the label its endpoint
    answered (``__error__`` when the call failed), where the run went, and why a call
    failed."""

    id: str
    say: str
    took: str
    next: NotRequired[str]
    failed: NotRequired[str]


class Ignored(TypedDict):
    key: str
    reason: str
    candidates: NotRequired[list[str]]


class CommonView(TypedDict):
    id: str
    kind: str
    say: str


class StepResult(TypedDict):
    """Spec §5's step result, minus ``run_id`` (the server adds it)."""

    status: StepStatus
    next: str
    node: NotRequired[NodeView]
    tell: NotRequired[list[TellItem]]
    checked: NotRequired[list[CheckedItem]]
    looked_up: NotRequired[list[LookedUpItem]]
    skipped: NotRequired[list[str]]
    ignored: NotRequired[list[Ignored]]
    outcome: NotRequired[str | None]
    attempt: NotRequired[int]
    max_unmatched: NotRequired[int]
    rejected: NotRequired[str]
    rejected_slots: NotRequired[dict[str, str]]
    candidates: NotRequired[list[str]]
    branches: NotRequired[list[FoldBranch]]
    common: NotRequired[CommonView | None]
    reason: NotRequired[StallReason]
    handoff: NotRequired[str]
    other: NotRequired[bool]


class Transition(NamedTuple):
    """A call's outcome: the run's new state and the step result to send."""

    state: RunState
    result: StepResult


# --- public API ---------------------------------------------------------------------------


# The version of the decision rules a new run is started under; a run keeps its own to its
# end, so that replaying it (verify) decides every step as it was decided. 2: __other__
# takes only a code outside the labels (spec §3.1), and a collect shows the slots valued
# __unknown__ still to give. 3: a start's result gives the flow's version as text.
RULES = 3


def start(
    flow: Flow,
    values: Mapping[str, object] | None = None,
    *,
    rules: int = RULES,
    today: date | None = None,
    lookups: Mapping[str, Looked] | None = None,
) -> Transition:
    """Start a run at ``flow.entry`` and advance as far as ``values`` allow; ``rules``:
    the decision rules it runs by (an older version only to replay a run of then);
    ``today``: the date of the step, which a check's condition may read (the caller
    records it with the step, so a replay decides the same on any later day);
    ``lookups``: what the calls of the lookups the run reaches came back with, by node
    id (the caller records them with the step, for the same reason).

    Raises InvalidInput for malformed values, LookupNeeded at a lookup not in
    ``lookups``.
    """
    initial = RunState(state="active", node=flow.entry, passed=0, rules=rules)
    return _Call(flow, initial, asked=None, today=today, lookups=lookups).run(
        values or {}, choice=None
    )


def answer(
    flow: Flow,
    state: RunState,
    *,
    choice: str | None = None,
    values: Mapping[str, object] | None = None,
    today: date | None = None,
    lookups: Mapping[str, Looked] | None = None,
) -> Transition:
    """Answer the node the run waits at (``choice``) and/or give values, then advance;
    ``today`` and ``lookups`` as for ``start``.

    Raises StepNotAllowed unless the run is active, InvalidInput for a malformed call,
    LookupNeeded at a lookup not in ``lookups``.
    """
    if state.state != "active":
        raise not_active(state, "answer")
    assert state.node is not None, "an active run always waits at a node"
    if choice is None and not values:
        raise InvalidInput(
            "nothing to answer",
            "the call carries neither choice nor values",
            f"Call guide_answer with choice (a label of {state.node}) or values.",
        )
    return _Call(flow, state, asked=state.node, today=today, lookups=lookups).run(
        values or {}, choice=choice
    )


def back(flow: Flow, state: RunState, to: str | None = None) -> Transition:
    """Reopen a node on the run's path (spec §3.5); the run waits there again.

    Raises StepNotAllowed on a closed run, InvalidInput when ``to`` is not a node the
    run can go back to (``candidates`` lists those it can).
    """
    if state.state == "closed":
        raise not_active(state, "back")
    passed = state.effective_path()
    current = flow.nodes.get(state.node) if state.node else None
    waiting = current.id if isinstance(current, AskNode | CollectNode) else None
    reopenable = [e.id for e in passed if e.kind in ("ask", "collect")]
    if waiting is not None and state.state == "stalled":
        reopenable.append(waiting)
    candidates = tuple(dict.fromkeys(reopenable))
    if to is None:
        target = _last_answered(state, passed, waiting)
        if target is None:
            raise _nothing_to_undo(state)
    else:
        target = to
    if target not in candidates and target != waiting:
        near = closest(target, candidates) or list(candidates[:MAX_CANDIDATES])
        raise InvalidInput(
            "node not on the path",
            f"{shown(target)} is not an ask or collect node this run has reached",
            (
                "Call guide_back with `to` set to one of candidates, or without `to` to undo "
                "the last answer."
                if near
                else "The run has passed no node to go back to: answer node instead."
            ),
            candidates=near,
        )
    position = next((i for i, e in enumerate(passed) if e.id == target), len(passed))
    kept = {k for e in passed[:position] for k in _keys_of(flow, e.id)}
    values = {
        k: v for k, v in state.values.items() if k in kept and state.stamps.get(k, 0) < position
    }
    node = flow.nodes[target]
    assert isinstance(node, AskNode | CollectNode), "only ask and collect nodes are reopened"
    reopened = RunState(
        state="active",
        node=target,
        values=frozen_mapping(values),
        stamps=frozen_mapping({k: state.stamps[k] for k in values if k in state.stamps}),
        # Only the node a run waits at ever holds a count (passing clears it), and that
        # node is the target or lies after it: every count is discarded.
        unmatched=frozen_mapping(),
        path=(*state.path, PathEntry(target, node.kind, "back")),
        passed=position,
        rules=state.rules,
    )
    result: StepResult = {
        "status": "advanced",
        "next": f"Reopened {target}. " + _ask_directive(node),
        "node": node_view(node),  # a reopened node holds none of its own values
    }
    return Transition(reopened, result)


def _last_answered(state: RunState, passed: list[PathEntry], waiting: str | None) -> str | None:
    """The node whose answer moved the run last: what ``back`` reopens by default (3.5).

    On a run stalled at an ask or collect (``waiting``), that node; on an active run, or
    one stalled at a lookup, the node it waited at
    before the current one (a node folded by ``__unknown__`` counts as answered), else
    the last node passed by a value given in advance; on a completed run, the last node
    answered or passed by a value given in advance.
    """
    if state.state == "stalled" and waiting is not None:
        return waiting
    answered = [e for e in passed if e.kind in ("ask", "collect")]
    if state.state != "completed":
        waited = [e for e in answered if e.via in ("asked", "folded")]
        if waited:
            return waited[-1].id
    return answered[-1].id if answered else None


def _nothing_to_undo(state: RunState) -> InvalidInput:
    if state.state == "active":
        return InvalidInput(
            "nothing to go back to",
            f"no answer has moved the run yet: it still waits at its first question, {state.node}",
            "Answer node (the node in the last result) instead; guide_back is for correcting "
            "an earlier answer.",
        )
    return InvalidInput(
        "nothing to go back to",
        "the run ended without taking any answer",
        "Start a new run with guide_start if the person needs the procedure again.",
        retryable=False,
    )


def close(state: RunState) -> RunState:
    """End an active or stalled run without reaching an end (spec §5.6).

    Raises StepNotAllowed on a closed run, and on a completed one (``run already
    ended``): its outcome stands.
    """
    if state.state == "closed":
        raise not_active(state, "close")
    if state.state == "completed":
        ended = f" with outcome {state.outcome}" if state.outcome else ""
        folded = " (after a fold, with no outcome)" if state.folded and not state.outcome else ""
        raise StepNotAllowed(
            "run already ended",
            f"the run completed{ended}{folded}; a completed run is not closed",
            "Nothing to close: the outcome stands. Start a new run with guide_start for a "
            "new need, or call guide_back if the person corrects an earlier answer.",
        )
    return state._replace(state="closed")


def resolve(
    flow: Flow,
    state: RunState,
    *,
    choice: str | None = None,
    values: Mapping[str, object] | None = None,
    today: date | None = None,
    lookups: Mapping[str, Looked] | None = None,
) -> Transition:
    """A person answers the node where a stalled run waits (resolve, spec §5.9).

    The answer is taken exactly as ``answer`` takes an agent's (``choice`` for the node,
    ``values`` for it and later nodes), from the state the run had when it reached the
    node: the value that stalled it (``__unknown__``) and the node's unmatched count are
    discarded, and the stall's own path entry gives way to the node's entry with
    ``via: "person"``. A person settles the node: ``__unknown__`` for it, an answer that
    does not fit (the engine would say ``unmatched``) and one that leaves the node still
    waiting are refused, and nothing changes.

    At a lookup whose call failed, the person answers for the system of record: one
    label of ``returns`` (``choice``) and values for keys of ``sets``, judged as an
    endpoint's answer is.

    Raises StepNotAllowed unless the run is stalled, InvalidInput for an answer that
    does not settle the node, LookupNeeded at a later lookup not in ``lookups``.
    """
    if state.state != "stalled":
        raise not_stalled(state)
    assert state.node is not None, "a stalled run always waits at a node"
    node = flow.nodes[state.node]
    given = dict(values or {})
    if isinstance(node, LookupNode):
        return _resolve_lookup(flow, state, node, choice, given, today, lookups)
    assert isinstance(node, AskNode | CollectNode), "a run stalls at ask, collect and lookup nodes"
    if choice is None and not given:
        raise InvalidInput(
            "nothing to answer",
            f"the answer carries neither a choice nor values for {node.id}",
            _settle_directive(node),
        )
    mine: list[object] = [choice] if choice is not None else []
    mine += [given[key] for key in _keys_of(flow, node.id) if key in given]
    if any(isinstance(v, str) and v.strip() == UNKNOWN for v in mine):
        raise InvalidInput(
            "a person must answer",
            f"{UNKNOWN!r} is what stalled the run at {node.id}",
            _settle_directive(node) + " If nobody can, close the run with a reason instead.",
            retryable=True,
        )
    transition = _Call(
        flow, _reopened(flow, state), asked=node.id, person=True, today=today, lookups=lookups
    ).run(given, choice=choice)
    result = transition.result
    if result["status"] == "unmatched":
        raise _does_not_fit(flow, result)
    if transition.state.state == "active" and transition.state.node == node.id:
        missing = [name for name in result.get("node", {}).get("slots", {}) if name]
        raise InvalidInput(
            "node not answered",
            f"{node.id} still needs " + (", ".join(missing) or "an answer"),
            _settle_directive(node),
            candidates=missing,
        )
    result["next"] = f"A person answered {node.id}. " + result["next"]
    return transition


def _resolve_lookup(
    flow: Flow,
    state: RunState,
    node: LookupNode,
    choice: str | None,
    given: dict[str, object],
    today: date | None,
    lookups: Mapping[str, Looked] | None,
) -> Transition:
    """A person answers a lookup whose call failed: ``choice``, a label of ``returns``,
    and the values of ``sets`` they know, in ``given`` with values for later nodes."""
    if choice is None or not choice.strip() or choice.strip() in (UNKNOWN, ERROR):
        raise InvalidInput(
            "a person must answer",
            f"{node.id} waits for what its system of record would have answered",
            _settle_directive(node) + " If nobody can, close the run with a reason instead.",
            candidates=list(node.returns),
        )
    label = choice.strip()
    own = {key: given.pop(key) for key in node.sets if key in given}
    fitted = answer_fits(
        {"label": label, "values": own}, returns=node.returns, sets=node.sets, fit=json_fit
    )
    if isinstance(fitted, Misfit) and label not in node.returns:
        raise InvalidInput(
            "not a label", fitted.reason, _settle_directive(node), candidates=list(node.returns)
        )
    if isinstance(fitted, Misfit):
        raise InvalidInput(
            "value does not fit", fitted.reason, _settle_directive(node), candidates=list(own)
        )
    call = _Call(
        flow, _reopened(flow, state), asked=node.id, person=True, today=today, lookups=lookups
    )
    call.answered = fitted
    transition = call.run(given, choice=None)
    transition.result["next"] = f"A person answered {node.id}. " + transition.result["next"]
    return transition


def _reopened(flow: Flow, state: RunState) -> RunState:
    """A stalled run as it was when it reached the node where it stalled: active there,
    without the value that stalled it, the node's unmatched count, or the stall's entry
    on its path (the steps keep the stall; the path shows the person's answer)."""
    assert state.node is not None
    keys = set(_keys_of(flow, state.node))
    values = {k: v for k, v in state.values.items() if not (k in keys and v == UNKNOWN)}
    path = state.path
    if path and path[-1].id == state.node and path[-1].via != "back":
        path = path[:-1]
    return state._replace(
        state="active",
        values=frozen_mapping(values),
        stamps=frozen_mapping({k: state.stamps[k] for k in values if k in state.stamps}),
        unmatched=frozen_mapping({k: n for k, n in state.unmatched.items() if k != state.node}),
        path=path,
        handoff=None,
    )


def _settle_directive(node: AskNode | CollectNode | LookupNode) -> str:
    if isinstance(node, AskNode):
        return f"Choose one label of {node.id}: " + ", ".join(node.accepts) + "."
    if isinstance(node, LookupNode):
        sets = f", with the values of {', '.join(node.sets)} you know" if node.sets else ""
        return f"Choose the label {node.call} would have answered: {', '.join(node.returns)}{sets}."
    required = [s.name for s in node.required_slots]
    return f"Give the slots of {node.id}" + (
        f" (required: {', '.join(required)})." if required else "."
    )


def _does_not_fit(flow: Flow, result: StepResult) -> InvalidInput:
    """A person's answer the engine would take as unmatched, as a refusal."""
    where = result.get("node", {}).get("id", "")
    slots = result.get("rejected_slots")
    node = flow.nodes.get(where)
    if slots and isinstance(node, CollectNode):
        by_name = {s.name: s for s in node.slots}
        reason = "; ".join(
            f"{shown(value)} does not fit {name}: {slot_format(by_name[name])}"
            for name, value in slots.items()
        )
        return InvalidInput(
            "value does not fit",
            reason,
            "Correct those slots and answer again.",
            candidates=list(slots),
        )
    labels = list(node.accepts) if isinstance(node, AskNode) else []
    return InvalidInput(
        "not a label",
        f"{shown(result.get('rejected', ''))} is not a label of {where}",
        f"Choose one label of {where}: {', '.join(labels)}.",
        # A person settles the node: "__unknown__" is no answer to offer them.
        candidates=[c for c in result.get("candidates", []) if c != UNKNOWN]
        or labels[:MAX_CANDIDATES],
    )


def not_stalled(state: RunState) -> StepNotAllowed:
    """The refusal of a person's answer (or claim) on a run that does not wait for one."""
    where = f" at {state.node}" if state.node else ""
    return StepNotAllowed(
        "run is not stalled",
        f"the run is {state.state}{where}: only a stalled run waits for a person's answer",
        "Nothing to answer: reload the run to see where it is now.",
    )


def directive(flow: Flow, state: RunState, note: str | None = None) -> str:
    """What an agent resuming this run should do now (guide_status's ``next``); ``note``:
    the note of the person whose answer moved the run last."""
    node = flow.nodes.get(state.node) if state.node else None
    if state.state == "active" and isinstance(node, AskNode | CollectNode):
        return handed_back(state, note) + _ask_directive(node)
    if state.state == "completed":
        ended = f" (outcome: {state.outcome})" if state.outcome else ""
        return handed_back(state, note) + (
            f"The procedure is finished{ended}; nothing is left to ask. "
            "Use guide_back only if the person corrects an earlier answer."
        )
    if state.state == "stalled":
        return (
            "The run is waiting for a human: hand the conversation over with the handoff note. "
            "guide_back reopens a node if the missing answer turns up."
        )
    return "The run is closed. Start a new run with guide_start if the person needs the procedure."


def person_answered_last(state: RunState) -> PathEntry | None:
    """The path entry of the person's answer that moved the run last, if it was one."""
    for entry in reversed(state.path):
        if entry.via in ("told", "skipped"):
            continue
        return entry if entry.via == "person" else None
    return None


def handed_back(state: RunState, note: str | None = None) -> str:
    """Said first when the answer that moved the run last was a person's (spec §5.9),
    with the ``note`` they wrote, which is what the agent has to tell from it."""
    entry = person_answered_last(state)
    if entry is None:
        return ""
    answered = f" ({entry.value})" if entry.value is not None else ""
    noted = f' Their note: "{" ".join(note.split())}"' if note and note.strip() else ""
    return (
        f"A person answered {entry.id}{answered} and handed the run back to you.{noted} "
        "Tell the person the outcome of that answer, then go on: "
    )


def slots_to_give(node: CollectNode, values: Mapping[str, Value]) -> list[Slot]:
    """The slots of ``node`` still to give: those without a value, and those valued
    ``__unknown__`` (where a run stalled, what a person must give to resolve it)."""
    return [slot for slot in node.slots if values.get(slot.name, UNKNOWN) == UNKNOWN]


def node_view(node: Node, state: RunState | None = None) -> NodeView:
    """A node as an agent sees it; a collect lists only its slots still to give."""
    view: NodeView = {"id": node.id, "kind": node.kind, "say": node.say}
    if isinstance(node, AskNode):
        view["accepts"] = node.accepts.copy()
        if OTHER in node.next:
            view["other"] = True
        if node.type != TEXT:
            view["type"] = node.type
    elif isinstance(node, CollectNode):
        slots: dict[str, SlotView] = {}
        if state is None or state.rules >= 2:
            listed = slots_to_give(node, state.values if state is not None else {})
        else:  # the first rules listed a slot valued __unknown__ as given
            listed = [slot for slot in node.slots if slot.name not in state.values]
        for slot in listed:
            item: SlotView = {"ask": slot.ask, "required": slot.required}
            if slot.type != TEXT:
                item["type"] = slot.type
            if slot.options:
                item["options"] = list(slot.options)
            if slot.hint:
                item["hint"] = slot.hint
            slots[slot.name] = item
        view["slots"] = slots
    elif isinstance(node, LookupNode):
        view["returns"] = node.returns.copy()
    elif isinstance(node, EndNode):
        view["outcome"] = node.outcome
    return view


def index(flow: Flow) -> dict[str, str]:
    """One line per key the flow accepts, for guide_start's ``index``."""
    lines: dict[str, str] = {}
    for node in flow.nodes.values():
        if isinstance(node, AskNode):
            labels = "; ".join(f"{label} = {when}" for label, when in node.accepts.items())
            outside = f" | else {_typed_form(node)}" if node.type != TEXT else ""
            lines[node.id] = f"{node.say} | labels: {labels}{outside}"
        elif isinstance(node, CollectNode):
            for slot in node.slots:
                need = "required" if slot.required else "optional"
                typed = f"; {describe(slot)}" if slot.type != TEXT else ""
                hint = f"; {slot.hint}" if slot.hint else ""
                lines[slot.name] = f"{slot.ask} ({need}{typed}{hint})"
    return lines


# --- one call -----------------------------------------------------------------------------


class _Call:
    """The mutable work of one engine call; turned back into a frozen RunState at the end."""

    __slots__ = (
        *("flow", "asked", "state", "values", "stamps", "unmatched", "path", "passed"),
        *("passed_ids", "tell", "skipped", "ignored", "fold", "note", "person", "other"),
        *("misfits", "today", "checked", "lookups", "looked_up", "answered"),
    )

    def __init__(
        self,
        flow: Flow,
        state: RunState,
        *,
        asked: str | None,
        person: bool = False,
        today: date | None = None,
        lookups: Mapping[str, Looked] | None = None,
    ) -> None:
        self.flow = flow
        self.today = today  # the step's date, given: the engine reads no clock
        self.checked: list[CheckedItem] = []
        self.lookups = lookups or {}  # what calls came back with, given: the engine calls none
        self.looked_up: list[LookedUpItem] = []
        self.answered: Fitted | None = None  # a person's answer to the lookup asked
        self.asked = asked
        self.person = person  # the node asked about is answered by a person (resolve)
        self.state = state
        # A state's mappings are read-only views of dicts: copy() copies the dict behind.
        self.values = state.values.copy()
        self.stamps = state.stamps.copy()
        self.unmatched = state.unmatched.copy()
        self.path = list(state.path)
        self.passed = state.effective_path()
        self.passed_ids = set(map(_ID, self.passed))
        self.tell: list[TellItem] = []
        self.skipped: list[str] = []
        self.ignored: list[Ignored] = []
        # The folded node, its branches, the common node, and how many tells came before.
        self.fold: tuple[str, list[FoldBranch], str | None, int] | None = None
        self.note = ""  # said before the directive, e.g. why a node was treated as unknown
        self.other = False  # a node was passed along __other__ in this call
        # Slots of the node answered whose values do not fit their type: rejected there.
        self.misfits: set[str] = set()

    # input --------------------------------------------------------------------------------

    def run(self, values: Mapping[str, object], choice: str | None) -> Transition:
        self._take(values, choice)
        assert self.state.node is not None
        return self._advance(self.state.node)

    def _take(self, values: Mapping[str, object], choice: str | None) -> None:
        if len(values) > MAX_VALUES_PER_CALL:
            raise InvalidInput(
                "too many values",
                f"{len(values)} keys in one call; the limit is {MAX_VALUES_PER_CALL}",
                "Send only the keys of index that the person has answered.",
            )
        current = self.flow.nodes[self.state.node] if self.state.node else None
        if choice is not None:
            choice = _check_value("choice", choice, MAX_LABEL_LENGTH, lines=False)
            if isinstance(current, AskNode):
                given = values.get(current.id)
                if given is not None and not _same_answer(current, given, choice):
                    raise InvalidInput(
                        "choice and values disagree",
                        f"choice={shown(choice)} but values[{current.id!r}]={shown(given)}",
                        f"Send the label for {current.id} once, as choice.",
                    )
            elif isinstance(current, CollectNode) and choice != UNKNOWN:
                raise InvalidInput(
                    "choice at a collect node",
                    f"{current.id} collects slots; choice may only be {UNKNOWN!r} here",
                    "Send the slot values in values={slot: value} (candidates: the slots still "
                    "empty).",
                    candidates=node_view(current, self.state).get("slots", {}),
                )
        position = len(self.passed)
        for key, raw in values.items():
            refuse_controls(f"the key {shown(key)} of values", key)
            owner = self.flow.owner_of(key)
            if owner is None:
                self._ignore(key, _NOT_A_KEY, closest(key, self.flow.value_keys, n=3))
                continue
            if self.flow.nodes[owner].kind == "lookup":
                self._ignore(key, f"{owner} is a lookup: its system of record gives this value")
                continue
            is_label = owner == key
            limit = MAX_LABEL_LENGTH if is_label else MAX_SLOT_VALUE_LENGTH
            slot = None if is_label else self.flow.slots[key]
            owner_node = self.flow.nodes[owner]
            typed = (slot is not None and slot.type != TEXT) or (
                isinstance(owner_node, AskNode) and owner_node.type != TEXT
            )
            text = _check_value(key, raw, limit, lines=not is_label, typed=typed)
            value: Value = text
            if slot is not None and text != UNKNOWN:
                fitted = fit(slot, text)
                if fitted is None and owner == self.asked:
                    # Rejected at the node as a pattern's misfit is (spec §3.2).
                    self.misfits.add(key)
                elif fitted is None:
                    # Given in advance: the agent is told, and asks for it at the node.
                    self._ignore(key, f"the value does not fit {key}: {describe(slot)}")
                    continue
                else:
                    value = fitted
            if owner in self.passed_ids and key in self.values:
                node = self.flow.nodes[owner]
                if not _same_answer(node, self.values[key], value):
                    self._ignore(key, f"{owner} was already answered; use guide_back to change it")
                continue
            self.values[key] = value
            self.stamps[key] = position
        if choice is not None and current is not None:
            if isinstance(current, AskNode):
                self.values[current.id] = choice
                self.stamps[current.id] = position
            elif isinstance(current, CollectNode):
                for slot in current.required_slots:
                    if slot.name not in self.values:
                        self.values[slot.name] = UNKNOWN
                        self.stamps[slot.name] = position

    def _ignore(self, key: str, reason: str, candidates: list[str] | None = None) -> None:
        item: Ignored = {"key": key, "reason": reason}
        if candidates:
            item["candidates"] = candidates
        self.ignored.append(item)

    def _misnamed(self) -> str:
        """The keys ignored as not the flow's that are near one of its keys, named in
        ``next``: their values were not used, which the ``ignored`` list alone leaves easy
        to miss."""
        if not self.ignored:  # most calls: no text to build
            return ""
        named = [i for i in self.ignored if "candidates" in i and i["reason"] == _NOT_A_KEY]
        said = "".join(
            f"{shown(i['key'])} is not a key of this flow; did you mean "
            + " or ".join(i.get("candidates", []))
            + "? "
            for i in named[:MAX_NAMED_KEYS]
        )
        if len(named) > MAX_NAMED_KEYS:
            said += f"({len(named) - MAX_NAMED_KEYS} more such keys in ignored.) "
        return said

    # walking ------------------------------------------------------------------------------

    def _advance(self, node_id: str) -> Transition:
        current = node_id
        while True:
            if current in self.passed_ids:
                # Lint refuses cycles; this guards the engine against a flow that slipped by.
                raise StepNotAllowed(
                    "flow has a cycle",
                    f"{current} would be entered twice",
                    "Report the flow to its authors; hand the conversation to a human.",
                )
            node = self.flow.nodes[current]
            if isinstance(node, EndNode):
                return self._complete(node)
            if isinstance(node, TellNode):
                self.tell.append({"id": node.id, "say": node.say})
                self._pass(node, "told")
                current = node.next
                continue
            if isinstance(node, CheckNode):
                current = self._at_check(node)
                continue
            if isinstance(node, AskNode):
                following = self._at_ask(node)
            elif isinstance(node, LookupNode):
                following = self._at_lookup(node)
            else:
                following = self._at_collect(node)
            if isinstance(following, str):
                current = following
                continue
            return following

    def _at_ask(self, node: AskNode) -> str | Transition:
        value = self.values.get(node.id)
        if value is None:
            return self._wait(node)
        assert isinstance(value, str), "only a slot records a typed value"
        label = label_of(node, value)
        if label is not None:
            self.values[node.id] = label  # recorded as the label, with the value's own stamp
            self._pass(node, self._via(node), label)
            return node.next[label]
        if value != UNKNOWN:
            near = near_labels(node, value)
            outside = None if near or self.state.rules < 2 else outside_labels(node, value)
            if OTHER in node.next and not near and node.type != TEXT:
                typed = json_fit(node.type, value)
                if typed is not None:
                    return self._other(node, typed)
                # Only a value of its type goes down a typed ask's __other__.
                outside = outside or (f"does not fit its type: {_typed_form(node)}", [])
            if OTHER in node.next and not near and outside is None:
                self._pass(node, self._via(node), value)
                if self.state.rules >= 2:  # the first rules did not say so
                    self.other = True
                    self.note += (
                        f"{shown(value)} was taken as an answer outside the labels of {node.id} "
                        "(its __other__ route); if the person meant one of its labels, correct it "
                        "with guide_back. "
                    )
                return node.next[OTHER]
            if self.fold is not None:
                return self._wait_after_fold(node, (node.id,))
            self._drop(node.id)
            if not self._count_unmatched(node.id):
                return self._unmatched_label(node, value, near, outside)
            self.note = (
                f"{shown(value)} fit no label of {node.id} after {self.flow.max_unmatched} "
                "attempts, so it is treated as unknown. "
            )
            self._record(node.id, UNKNOWN)
        if UNKNOWN in node.next:
            self._pass(node, self._via(node), UNKNOWN)
            return node.next[UNKNOWN]
        if self.fold is not None:
            return self._wait_after_fold(node, (node.id,))
        if self.flow.on_unknown_at(node) == "escalate":
            return self._stall(node, "escalate")
        try:
            fold = plan_fold(self.flow, node.id)
        except Unfoldable:
            return self._stall(node, "unfoldable")
        self._pass(node, "folded", UNKNOWN)
        self.fold = (node.id, fold.branches, fold.common, len(self.tell))
        if fold.common is None:
            return self._finish_fold(None, self._state("completed", None, folded=True))
        return fold.common

    def _other(self, node: AskNode, value: Value) -> str:
        """A typed ask passed along ``__other__`` with ``value``, recorded typed."""
        self.values[node.id] = value
        self._pass(node, self._via(node), as_text(value))
        self.other = True
        self.note += (
            f"{shown(as_text(value))} was taken as an answer outside the labels of {node.id} "
            f"(its __other__ route, a {node.type}); if the person meant one of its labels, "
            "correct it with guide_back. "
        )
        return node.next[OTHER]

    def _at_collect(self, node: CollectNode) -> str | Transition:
        rejected: list[tuple[Slot, str]] = []
        for slot in node.slots:
            value = self.values.get(slot.name)
            if value == UNKNOWN and not slot.required:
                self._drop(slot.name)  # an optional slot nobody knows is simply left empty
            elif slot.name in self.misfits:
                rejected.append((slot, str(value)))
            elif isinstance(value, str) and value != UNKNOWN and slot.pattern:
                if not full_match(slot.pattern, value):
                    rejected.append((slot, value))
        unknown = [s.name for s in node.required_slots if self.values.get(s.name) == UNKNOWN]
        if self.fold is not None and (rejected or unknown):
            return self._wait_after_fold(node, (*(s.name for s, _ in rejected), *unknown))
        for slot, _ in rejected:
            self._drop(slot.name)  # the values that fit stay recorded
        if rejected:
            # One call counts one attempt, however many of its values were rejected.
            if not self._count_unmatched(node.id):
                return self._unmatched_slots(node, rejected)
            names = ", ".join(slot.name for slot, _ in rejected)
            self.note = (
                f"{names} did not fit after {self.flow.max_unmatched} attempts, so "
                f"{'it is' if len(rejected) == 1 else 'they are'} treated as unknown. "
            )
            for slot, _ in rejected:
                if slot.required:  # an optional slot treated as unknown is left empty
                    self._record(slot.name, UNKNOWN)
                    unknown.append(slot.name)
        if unknown:
            policy = self.flow.on_unknown_at(node)
            return self._stall(node, "escalate" if policy == "escalate" else "unfoldable")
        if all(s.name in self.values for s in node.required_slots):
            self._pass(node, self._via(node))
            return node.next
        return self._wait(node)

    def _at_check(self, node: CheckNode) -> str:
        """The first condition that holds chooses the next node; none, ``else``. The path
        keeps the condition and every value the conditions tried read."""
        types = self.flow.key_types
        keys = frozenset(types)
        read: dict[str, Value | None] = {}
        took, target = "else", node.else_
        for branch in node.when:
            for key in reads(branch.if_, keys).names:
                if key == TODAY:
                    read[key] = self.today.isoformat() if self.today else None
                else:
                    read[key] = self.values.get(key)
            if holds(branch.if_, types, self.values, self.today):
                took, target = branch.if_, branch.next
                break
        entry = PathEntry(node.id, node.kind, "check", took, tuple(read.items()))
        self.path.append(entry)
        self.passed.append(entry)
        self.passed_ids.add(node.id)
        self.checked.append({"id": node.id, "say": node.say, "took": took, "next": target})
        return target

    def _at_lookup(self, node: LookupNode) -> str | Transition:
        """The label the endpoint answered chooses the next node, and its values are
        recorded; a failed call goes to ``__error__``, or stalls the run. The path keeps
        the label and the values sent."""
        sent = {key: self.values[key] for key in node.send if key in self.values}
        if node.id == self.asked and self.answered is not None:
            return self._looked(node, self.answered, "person", sent)
        looked = self.lookups.get(node.id)
        if looked is None:
            raise LookupNeeded(node, sent)
        answer = judged(node, looked)
        if isinstance(answer, Fitted):
            return self._looked(node, answer, "lookup", sent)
        item: LookedUpItem = {
            "id": node.id,
            "say": node.say,
            "took": ERROR,
            "failed": failure_said(answer.reason),
        }
        self.looked_up.append(item)
        if ERROR not in node.next:
            return self._stall(node, "lookup_failed", read=sent)
        item["next"] = node.next[ERROR]
        self._record(node.id, ERROR)
        self._pass(node, "lookup", ERROR, read=sent)
        return node.next[ERROR]

    def _looked(self, node: LookupNode, answer: Fitted, via: Via, sent: dict[str, Value]) -> str:
        target = node.next[answer.label]
        if via == "lookup":
            self.looked_up.append(
                {"id": node.id, "say": node.say, "took": answer.label, "next": target}
            )
        self._record(node.id, answer.label)
        for key, value in answer.values.items():
            self._record(key, value)
        self._pass(node, via, answer.label, read=sent)
        return target

    def _wait_after_fold(self, node: AskNode | CollectNode, dropped: tuple[str, ...]) -> Transition:
        """One fold per call: a second node that cannot pass waits to be asked properly."""
        for key in dropped:
            self._drop(key)
        return self._wait(node)

    def _via(self, node: AskNode | CollectNode) -> Via:
        if node.id == self.asked:
            return "person" if self.person else "asked"
        self.skipped.append(node.id)
        return "skipped"

    def _pass(
        self,
        node: Node,
        via: Via,
        value: str | None = None,
        read: Mapping[str, Value] | None = None,
    ) -> None:
        entry = PathEntry(
            node.id, node.kind, via, value, None if read is None else tuple(read.items())
        )
        self.path.append(entry)
        self.passed.append(entry)
        self.passed_ids.add(node.id)
        self.unmatched.pop(node.id, None)

    def _record(self, key: str, value: Value) -> None:
        self.values[key] = value
        self.stamps[key] = len(self.passed)

    def _drop(self, key: str) -> None:
        self.values.pop(key, None)
        self.stamps.pop(key, None)

    def _count_unmatched(self, node_id: str) -> bool:
        """Count one rejected answer; True once the node has reached max_unmatched."""
        self.unmatched[node_id] = self.unmatched.get(node_id, 0) + 1
        return self.unmatched[node_id] >= self.flow.max_unmatched

    # endings ------------------------------------------------------------------------------

    def _state(
        self,
        name: RunStateName,
        node: str | None,
        *,
        outcome: str | None = None,
        folded: bool = False,
        handoff: str | None = None,
    ) -> RunState:
        """The run's new state; made once, as the call ends, so the call's own dicts
        are handed over read-only rather than copied."""
        return RunState(
            state=name,
            node=node,
            values=MappingProxyType(self.values),
            stamps=MappingProxyType(self.stamps),
            unmatched=MappingProxyType(self.unmatched),
            path=tuple(self.path),
            outcome=outcome,
            folded=folded,
            handoff=handoff,
            passed=len(self.passed),
            rules=self.state.rules,
        )

    def _result(self, status: StepStatus, next_text: str) -> StepResult:
        result: StepResult = {"status": status, "next": self.note + self._misnamed() + next_text}
        if self.tell:
            result["tell"] = self.tell
        if self.checked:
            result["checked"] = self.checked
        if self.looked_up:
            result["looked_up"] = self.looked_up
        if self.skipped:
            result["skipped"] = self.skipped
        if self.ignored:
            result["ignored"] = self.ignored
        if self.other:
            result["other"] = True
        return result

    def _wait(self, node: AskNode | CollectNode) -> Transition:
        state = self._state("active", node.id)
        if self.fold is not None:
            return self._finish_fold(node, state)
        result = self._result("advanced", _tell_first(self.tell) + _ask_directive(node))
        result["node"] = node_view(node, state)
        return Transition(state, result)

    def _complete(self, node: EndNode) -> Transition:
        state = self._state("completed", node.id, outcome=node.outcome)
        if self.fold is not None:
            return self._finish_fold(node, state)
        result = self._result("completed", _tell_first(self.tell) + _end_directive(node))
        result["node"] = node_view(node)
        result["outcome"] = node.outcome
        return Transition(state, result)

    def _unmatched_label(
        self,
        node: AskNode,
        value: str,
        near: list[str],
        outside: tuple[str, list[str]] | None,
    ) -> Transition:
        why = f"{shown(value)} is not a label of {node.id}"
        unknown = '(or "__unknown__" if they do not know)'
        ask_again = f"Ask node.say again and send one label of node.accepts {unknown}."
        candidates: list[str] = near
        if near and OTHER in node.next:
            # A slip on a label never goes down __other__ (spec §3.1): say how to get there.
            why += ", but is too close to candidates to count as an answer outside node.accepts"
            again = (
                "Check with the person: send the label of candidates they meant, or, if their "
                "answer is none of node.accepts, send it "
                + (
                    _typed_form(node)
                    if node.type != TEXT
                    else ("as one short code" if self.state.rules >= 2 else "in words")
                    + " unlike any label"
                )
                + f" {unknown}."
            )
        elif near:
            again = (
                "If you mistyped, send the intended label from candidates; otherwise ask "
                f"node.say again and send one label of node.accepts {unknown}."
            )
        elif outside is None or not (outside[1] or OTHER in node.next):
            again = ask_again
        else:
            reason, candidates = outside
            why += f" and {reason}"
            if candidates == [UNKNOWN]:
                again = (
                    f'If the person does not know, send "{UNKNOWN}" (candidates); otherwise '
                    "ask node.say again and send one label of node.accepts."
                )
            elif OTHER in node.next:
                # Only a short code unlike any label goes down __other__ (spec §3.1).
                why += ", so it is not taken as an answer outside node.accepts"
                form = (
                    _typed_form(node)
                    if node.type != TEXT
                    else "as one short code like price_dropped"
                )
                again = (
                    "Send the label of candidates the person meant, or one of node.accepts; if "
                    f"their answer is none of them, send it {form} {unknown}."
                    if candidates
                    else "Ask node.say again and send one label of node.accepts; if the answer "
                    f"is none of them, send it {form} {unknown}."
                )
            else:
                again = f"Send the label of candidates the person meant {unknown}."
        transition = self._unmatched(node, value, why, again)
        if candidates:
            transition.result["candidates"] = candidates
        return transition

    def _unmatched_slots(self, node: CollectNode, rejected: list[tuple[Slot, str]]) -> Transition:
        why = "; ".join(
            f"{shown(value)} does not fit slot {slot.name}: {slot_format(slot)}"
            for slot, value in rejected
        )
        one = len(rejected) == 1
        transition = self._unmatched(
            node,
            rejected[0][1],
            why,
            f"Ask for {'that slot' if one else 'those slots'} again and send "
            f'{"it" if one else "them"} in values ("__unknown__" for a slot they cannot give); '
            "the values that fit are kept.",
        )
        transition.result["rejected_slots"] = {slot.name: value for slot, value in rejected}
        return transition

    def _unmatched(
        self, node: AskNode | CollectNode, value: str, why: str, again: str
    ) -> Transition:
        state = self._state("active", node.id)
        attempt = self.unmatched[node.id]
        result = self._result(
            "unmatched",
            _tell_first(self.tell)
            + f"{why} (attempt {attempt} of {self.flow.max_unmatched}). {again}",
        )
        result["node"] = node_view(node, state)
        result["attempt"] = attempt
        result["max_unmatched"] = self.flow.max_unmatched
        result["rejected"] = value
        return Transition(state, result)

    def _stall(
        self,
        node: AskNode | CollectNode | LookupNode,
        reason: StallReason,
        read: Mapping[str, Value] | None = None,
    ) -> Transition:
        # The node is on the path with the value that stalled it (spec §5.4), though not
        # passed: RunState.effective_path leaves this last entry out.
        if isinstance(node, LookupNode):
            entry = PathEntry(node.id, node.kind, "lookup", ERROR, tuple((read or {}).items()))
            why = f"The lookup {node.id} failed, so the procedure cannot go on by itself. "
        else:
            via: Via = "asked" if node.id == self.asked else "skipped"
            entry = PathEntry(node.id, node.kind, via, UNKNOWN)
            why = ""
        self.path.append(entry)
        handoff = self.flow.handoff_at(node)
        state = self._state("stalled", node.id, handoff=handoff)
        result = self._result(
            "stalled",
            _tell_first(self.tell)
            + why
            + "Hand the conversation to a human now: tell the person a colleague will take over, "
            "pass on the handoff note, and do not improvise the rest of the procedure.",
        )
        result["node"] = node_view(node, state)
        result["reason"] = reason
        result["handoff"] = handoff
        return Transition(state, result)

    def _finish_fold(self, node: Node | None, state: RunState) -> Transition:
        assert self.fold is not None
        folded_id, branches, common_id, told_before = self.fold
        if node is None:
            then = "The procedure ends there."
        elif isinstance(node, EndNode):
            then = f"Then close the conversation as node.say says (outcome: {node.outcome})."
        else:
            assert isinstance(node, AskNode | CollectNode), "a fold ends, or waits to ask"
            then = "Then: " + _ask_directive(node)
        branches_guidance = "the guidance of every branch side by side (each `when` with its steps)"
        if self.tell:
            # Tells passed before the folded node come before the branches; those from the
            # common node on are what every branch shares, so they come after.
            before, after = self.tell[:told_before], self.tell[told_before:]
            order = [f"the `tell` items {_ids(before)}"] if before else []
            order.append(branches_guidance)
            if after:
                order.append(f"the `tell` items {_ids(after)} (what every branch shares)")
            guidance = f"Nobody could settle {folded_id}. Give, in this order: " + "; ".join(
                f"{n}) {part}" for n, part in enumerate(order, 1)
            )
        else:
            guidance = (
                f"Nobody could settle {folded_id}, so give {branches_guidance} and what they share"
            )
        result = self._result("branched", f"{guidance}. {then}")
        result["branches"] = branches
        common = self.flow.nodes[common_id] if common_id else None
        result["common"] = (
            {"id": common.id, "kind": common.kind, "say": common.say} if common else None
        )
        if node is not None:
            result["node"] = node_view(node, state)
        if node is None or isinstance(node, EndNode):
            result["outcome"] = state.outcome
        return Transition(state, result)


# --- helpers ------------------------------------------------------------------------------


def slot_format(slot: Slot) -> str:
    """What a value of ``slot`` must be, as a value that does not fit is told it."""
    if slot.type != TEXT:
        return describe(slot) + (f" ({slot.hint})" if slot.hint else "")
    return slot.hint or f"it must match {slot.pattern}"


def _same_answer(node: Node, recorded: object, value: object) -> bool:
    """Whether two values for ``node``'s key say the same (the same label, for an ask)."""
    if recorded == value:
        return True
    if isinstance(node, AskNode) and node.type != TEXT and isinstance(value, str | int | float):
        # A typed ask's answer outside its labels is recorded typed: 12.5 says "12.50".
        fitted = json_fit(node.type, value)
        if fitted is not None and fitted == recorded and type(fitted) is type(recorded):
            return True
    if not (isinstance(node, AskNode) and isinstance(recorded, str) and isinstance(value, str)):
        return False
    label = label_of(node, value)
    return label is not None and label == label_of(node, recorded)


def _ask_directive(node: AskNode | CollectNode) -> str:
    """What to do at the node a run waits at (only ask and collect nodes are waited at)."""
    if isinstance(node, AskNode):
        outside = (
            f" If the answer is none of node.accepts, send it {_typed_form(node)}."
            if node.type != TEXT
            else ""
        )
        return (
            "Ask what node.say asks, in your own words. Map the reply to one label of "
            'node.accepts and call guide_answer with choice=<label> (choice="__unknown__" if '
            "they do not know)." + outside
        )
    return (
        "Collect what node.say describes: ask for the slots in node.slots and call "
        'guide_answer with values={slot: value} ("__unknown__" for a required slot they '
        "cannot give)."
    )


def _typed_form(node: AskNode) -> str:
    """How a typed ask's answer outside its labels is sent: "as a number (type number),
    …, e.g. 12.50"."""
    return "as " + describe(Slot(node.id, "", type=node.type)).removeprefix("it must be ")


def _end_directive(node: EndNode) -> str:
    return (
        "Close the conversation as node.say says. "
        f"The procedure is finished (outcome: {node.outcome})."
    )


def _ids(tell: list[TellItem]) -> str:
    return ", ".join(item["id"] for item in tell)


def _tell_first(tell: list[TellItem]) -> str:
    return "First deliver each `tell` item in order. " if tell else ""


def _check_value(key: str, raw: object, limit: int, *, lines: bool, typed: bool = False) -> str:
    """A value for ``key`` (a key of the flow, or "choice") as recorded, or as its typed
    slot reads it; raises InvalidInput for one that cannot be.

    ``lines``: the value is text (a slot's) and may hold tabs and line breaks; a label
    may hold no control character at all. ``typed``: the key is a slot with a type, which
    takes a JSON number or boolean as well as a string.
    """
    if typed and isinstance(raw, bool | int | float):
        raw = as_text(raw)
    if not isinstance(raw, str):
        raise InvalidInput(
            "value is not a string",
            f"{key} is {type(raw).__name__}",
            f"Send {key} as a JSON string.",
        )
    stripped = raw.strip()
    if not stripped:
        raise InvalidInput(
            "empty value",
            f"{key} is empty",
            f"Leave {key} out until it is known, or send {UNKNOWN!r} if the person does not know.",
        )
    if len(raw) > limit:
        raise InvalidInput(
            "value too long",
            f"{key} has {len(raw)} characters; the limit is {limit}",
            f"Shorten {key} to at most {limit} characters.",
        )
    refuse_controls(key, raw, lines=lines)
    if stripped == UNKNOWN:
        return UNKNOWN
    if stripped.startswith("__"):
        raise InvalidInput(
            "reserved value",
            f"{shown(raw)} is reserved",
            f"Send a label, or {UNKNOWN!r} if the person does not know.",
        )
    return raw


def _keys_of(flow: Flow, node_id: str) -> tuple[str, ...]:
    node = flow.nodes[node_id]
    if isinstance(node, AskNode):
        return (node.id,)
    if isinstance(node, CollectNode):
        return tuple(s.name for s in node.slots)
    if isinstance(node, LookupNode):
        return (node.id, *node.sets)
    return ()


def not_active(state: RunState, action: str) -> StepNotAllowed:
    """The refusal of ``action`` (answer, back, close) on a run that has ended:
    how it ended, and what to do instead (never retryable)."""
    where = f" at {state.node}" if state.node else ""
    if state.state == "completed":
        ended = f" (outcome: {state.outcome})" if state.outcome else ""
        error = "run is completed"
        reason = f"the run completed{where}{ended}"
        next_text = (
            "The procedure is finished: start a new run with guide_start for a new need, or call "
            "guide_back if the person corrects an earlier answer."
        )
    elif state.state == "stalled":
        error = "run is stalled"
        reason = f"the run stalled{where} and waits for a human"
        next_text = (
            "Hand the conversation to a human with the handoff note (guide_status shows it); "
            "guide_back reopens the node if the missing answer turns up."
        )
    else:
        # Only ended runs are refused this way: an active run is never "not active".
        error = "run is closed"
        reason = "the run was closed with guide_close"
        next_text = "Start a new run with guide_start if the person still needs the procedure."
    refused = {
        "answer": "it takes no more answers",
        "back": "a closed run cannot be reopened",
        "close": "it is closed already",
    }
    return StepNotAllowed(error, f"{reason}: {refused[action]}", next_text)
