"""Scenarios: named runs of a flow with what each call must return, and their runner.

A scenario is read from a flow's tests file (``<flows dir>/tests/<flow_id>.yaml``,
see ``flow_tests``): a start (values given in advance) and a list of calls
(``answer``, ``back``, ``close``), each with an ``expect`` naming the keys to
check, the date its steps are made on (``today``), which a check's condition may
read, and what the endpoints its lookups call answer (``endpoints``: a name to the JSON
object the endpoint answers, or ``{fail: reason}`` for a call that fails). The runner
drives ``engine`` directly: no server, no database, no clock, no call out.

Mistakes in a scenario are findings (code ``schema``) with the file and line, the
way lint reports a flow; an expectation that does not hold is a failure that
names the call, what was expected and what came back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any, Literal

from flowcore.common.errors import Refusal
from flowcore.common.jsontext import compact_json
from flowcore.common.lookups import endpoint_name_problem
from flowcore.common.names import closest, missing_hint
from flowcore.flow.findings import Finding, finding
from flowcore.flow.model import ERROR, AskNode, EndNode, Flow, LookupNode, frozen_mapping
from flowcore.flow.yaml_safe import key_line_of, line_of
from flowcore.run import engine
from flowcore.run.engine import StepResult
from flowcore.run.lookups import Looked, LookupNeeded
from flowcore.run.state import RunState

CallKind = Literal["start", "answer", "back", "close"]
CALL_KINDS: tuple[CallKind, ...] = ("answer", "back", "close")
SCENARIO_KEYS = ("name", "today", "endpoints", "start", "calls")
# A stubbed endpoint's answer for a call that fails: ``{fail: reason}``.
FAIL = "fail"

STATUSES = ("advanced", "completed", "unmatched", "branched", "stalled")
STATES = ("active", "completed", "stalled", "closed")
REASONS = ("escalate", "unfoldable", "lookup_failed")


class _Absent:
    """What a key holds when the result does not carry it."""

    def __repr__(self) -> str:
        return "(absent)"


ABSENT = _Absent()


# --- the expect keys ---------------------------------------------------------------------


def _is_text(value: object) -> bool:
    return isinstance(value, str)


def _is_text_or_null(value: object) -> bool:
    return value is None or isinstance(value, str)


def _is_texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _is_values(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in value.items()
    )


# key -> (what it must be, its check, what it compares)
EXPECT_KEYS: dict[str, tuple[str, Callable[[object], bool], str]] = {
    "status": (
        "one of " + ", ".join(STATUSES),
        lambda v: v in STATUSES,
        "the result's status",
    ),
    "state": ("one of " + ", ".join(STATES), lambda v: v in STATES, "the run's state after it"),
    "node": (
        "a node id, or null",
        _is_text_or_null,
        "the id of the result's node (null: the result has none)",
    ),
    "tell": ("a list of node ids", _is_texts, "the ids of the result's tell items, in order"),
    "checked": (
        "a list of conditions (else: none held)",
        _is_texts,
        "the condition each check passed in the call took, in order",
    ),
    "looked_up": (
        f"a list of labels ({ERROR}: the call failed)",
        _is_texts,
        "the label each lookup reached in the call took, in order",
    ),
    "skipped": ("a list of node ids", _is_texts, "the result's skipped ids, in order"),
    "ignored": ("a list of value keys", _is_texts, "the keys of the result's ignored items"),
    "outcome": ("an outcome, or null", _is_text_or_null, "the result's outcome"),
    "branches": ("a list of labels", _is_texts, "the labels of the result's branches, in order"),
    "common": ("a node id, or null", _is_text_or_null, "the id of the fold's common node"),
    "reason": (
        "escalate, unfoldable or lookup_failed",
        lambda v: v in REASONS,
        "why the run stalled",
    ),
    "handoff": ("text", _is_text, "the stall's handoff text"),
    "attempt": ("a whole number from 1", _is_count, "the unmatched attempt count"),
    "rejected": ("text", _is_text, "the rejected value"),
    "values": (
        "a mapping of value keys to text (null: the key holds no value)",
        _is_values,
        "the run's values (only the keys named)",
    ),
    "path": ("a list of node ids", _is_texts, "the ids of the nodes the run has passed"),
    "folded": ("true or false", lambda v: isinstance(v, bool), "whether a fold ended the run"),
    "error": ("text", _is_text, "the refusal's `error` (the call must be refused)"),
}
_NODE_LIST_KEYS = ("tell", "skipped", "path")
_CLOSE_EXPECT_KEYS = ("state", "error")


# --- the model ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One engine call of a scenario, with the keys its result must hold."""

    kind: CallKind
    choice: object = None  # answer: any scalar (the engine judges it)
    values: Mapping[str, object] | None = None  # start, answer
    to: str | None = None  # back
    reason: str | None = None  # close
    expect: Mapping[str, object] = field(default_factory=frozen_mapping)
    line: int | None = None
    expect_lines: Mapping[str, int] = field(default_factory=frozen_mapping)

    def text(self) -> str:
        """The call as a short line: ``answer: E01``, ``back to n_x``, ``start {values: …}``."""
        if self.kind == "start":
            return f"start {inline({'values': dict(self.values)})}" if self.values else "start"
        if self.kind == "answer":
            if self.values is None and isinstance(self.choice, str):
                return f"answer: {inline(self.choice)}"
            args: dict[str, object] = {}
            if self.choice is not None:
                args["choice"] = self.choice
            if self.values is not None:
                args["values"] = dict(self.values)
            return f"answer {inline(args)}"
        if self.kind == "back":
            return f"back to {self.to}" if self.to else "back"
        return f"close: {inline(self.reason)}" if self.reason else "close"


@dataclass(frozen=True)
class Scenario:
    name: str
    start: Call
    calls: tuple[Call, ...]
    line: int | None = None
    today: date | None = None  # the date of every step (None: a condition reading it fails)
    # What each endpoint answers, by name, every time a lookup of the scenario calls it.
    endpoints: Mapping[str, Looked] = field(default_factory=frozen_mapping)


@dataclass(frozen=True)
class Mismatch:
    key: str
    expected: object
    got: object

    def text(self) -> str:
        if self.key == "error" and self.expected is ABSENT:
            return f"refused: {self.got}"
        if self.key == "error" and self.got is ABSENT:
            return f"expected a refusal ({inline(self.expected)}), but the call was accepted"
        if self.key == "endpoints":
            return (
                f"the run reached {self.expected}, which calls the endpoint {self.got!r}, and "
                f"the scenario stubs no endpoint of that name: add `endpoints: {{{self.got}: "
                "{label: ...}}` (or `{fail: ...}`)"
            )
        if self.key == "error":
            return (
                f"refused, but with another error: expected {inline(self.expected)}, got {self.got}"
            )
        return f"{self.key}: expected {inline(self.expected)}, got {inline(self.got)}"


@dataclass(frozen=True)
class ScenarioFailure:
    """The first call whose result did not hold what its ``expect`` named."""

    index: int  # 0: the start, then 1 for the first call
    call: Call
    mismatches: tuple[Mismatch, ...]

    @property
    def where(self) -> str:
        return "start" if self.index == 0 else f"call {self.index}"


@dataclass(frozen=True)
class ScenarioResult:
    scenario: Scenario
    failure: ScenarioFailure | None = None
    problems: tuple[Finding, ...] = ()  # mistakes against the flow: the scenario did not run
    states: tuple[RunState, ...] = ()  # every state the run went through (for coverage)

    @property
    def passed(self) -> bool:
        return self.failure is None and not self.problems


# --- reading ------------------------------------------------------------------------------


class Reader:
    """Collects the findings of one tests file: ``where`` is ``tests/<flow_id>/...``."""

    def __init__(self, flow_id: str, file: str | None) -> None:
        self.flow_id = flow_id
        self.file = file
        self.findings: list[Finding] = []

    def where(self, *parts: str) -> str:
        return "/".join(("tests", self.flow_id, *parts))

    def error(self, parts: Sequence[str], message: str, line: int | None) -> None:
        self.findings.append(
            finding("error", "schema", self.where(*parts), message, file=self.file, line=line)
        )

    def unknown_keys(
        self, mapping: Mapping[object, object], allowed: Sequence[str], parts: Sequence[str]
    ) -> bool:
        """Report every key not in ``allowed`` (with the closest one); True when all are known."""
        clean = True
        for key in mapping:
            if key in allowed:
                continue
            clean = False
            near = closest(str(key), allowed, n=1)
            hint = f"did you mean {near[0]!r}?" if near else "allowed: " + ", ".join(allowed)
            self.error(parts, f"unknown key {key!r}: {hint}", key_line_of(mapping, key))
        return clean


def read_scenario(reader: Reader, item: object, index: int, line: int | None) -> Scenario | None:
    """One scenario of a tests file, or None (with findings) when it cannot be read."""
    label = f"scenarios[{index}]"
    if not isinstance(item, dict):
        reader.error(
            [label], "a scenario is a mapping with name, start and calls: write `- name: ...`", line
        )
        return None
    name = item.get("name")
    if isinstance(name, str) and name.strip():
        label = name
    else:
        reader.error(
            [label],
            "a scenario needs a name (text): say what it checks, e.g. `name: E01, card expired`",
            line_of(item),
        )
    ok = reader.unknown_keys(item, SCENARIO_KEYS, [label])
    start = _read_start(
        reader, item.get("start"), label, key_line_of(item, "start") or line_of(item)
    )
    calls: list[Call] = []
    raw_calls = item.get("calls")
    if raw_calls is None:
        raw_calls = []
    if not isinstance(raw_calls, list):
        reader.error(
            [label, "calls"],
            "calls is a list: write each call as `- answer: ...`, `- back: ...` or `- close: ...`",
            key_line_of(item, "calls"),
        )
        raw_calls, ok = [], False
    lines = getattr(raw_calls, "item_lines", [])
    for number, raw in enumerate(raw_calls, 1):
        call = _read_call(
            reader, raw, [label, f"call {number}"], lines[number - 1] if lines else None
        )
        if call is None:
            ok = False
        else:
            calls.append(call)
    today = _read_today(reader, item, label)
    if today is False:
        ok = False
    endpoints = _read_endpoints(reader, item, label)
    if endpoints is None:
        ok = False
    if start is None or not ok or not isinstance(name, str) or not name.strip():
        return None
    if "error" in start.expect and calls:
        reader.error(
            [label, "start"],
            "the start is expected to be refused, so no run exists for the calls after it: "
            "move those calls to another scenario",
            start.line,
        )
        return None
    return Scenario(
        name=name,
        start=start,
        calls=tuple(calls),
        line=line_of(item),
        today=today or None,
        endpoints=frozen_mapping(endpoints or {}),
    )


def _read_today(
    reader: Reader, item: Mapping[object, object], label: str
) -> date | None | Literal[False]:
    if item.get("today") is None:
        return None
    raw = item["today"]
    try:
        if not isinstance(raw, str) or len(raw) != 10:
            raise ValueError(raw)
        return date.fromisoformat(raw)
    except ValueError:
        reader.error(
            [label, "today"],
            f"today is the date of the scenario's steps, YYYY-MM-DD, not {inline(raw)}: "
            "write `today: 2024-03-31`",
            key_line_of(item, "today"),
        )
        return False


def _read_endpoints(
    reader: Reader, item: Mapping[object, object], label: str
) -> dict[str, Looked] | None:
    """``endpoints``: name -> what a call of it comes back with; None when unreadable."""
    raw = item.get("endpoints")
    if raw is None:
        return {}
    parts = [label, "endpoints"]
    if not isinstance(raw, dict):
        reader.error(
            parts,
            "endpoints is a mapping of endpoint names to their answers: "
            "`endpoints: {orders: {label: shipped}}`",
            key_line_of(item, "endpoints"),
        )
        return None
    stubs: dict[str, Looked] = {}
    for name, answer in raw.items():
        line = key_line_of(raw, name)
        problem = endpoint_name_problem(name) if isinstance(name, str) else "it is not text"
        if problem is not None:
            reader.error(parts, f"endpoint {inline(name)}: {problem}", line)
            continue
        looked = _stub(answer)
        if looked is None:
            reader.error(
                [*parts, name],
                f"what {name} answers is the JSON object an endpoint sends, "
                "`{label: ..., values: {...}}`, or `{fail: <why the call failed>}`, "
                f"not {inline(answer)}",
                line,
            )
            continue
        stubs[name] = looked
    return stubs if len(stubs) == len(raw) else None


def _stub(answer: object) -> Looked | None:
    if not isinstance(answer, dict):
        return None
    if FAIL not in answer:
        return Looked(response=compact_json(answer))
    reason = answer[FAIL]
    if len(answer) != 1 or not isinstance(reason, str) or not reason.strip():
        return None
    return Looked(failed=reason)


def _read_start(reader: Reader, raw: object, label: str, line: int | None) -> Call | None:
    if raw is None:
        return Call("start", line=line)
    parts = [label, "start"]
    if not isinstance(raw, dict):
        reader.error(parts, "start is a mapping: `start: {values: {...}, expect: {...}}`", line)
        return None
    ok = reader.unknown_keys(raw, ("values", "expect"), parts)
    values = _read_values(reader, raw, parts)
    expect = _read_expect(reader, raw, parts, "start")
    if not ok or values is False or expect is None:
        return None
    return Call(
        "start",
        values=values,
        expect=frozen_mapping(expect),
        line=line_of(raw) or line,
        expect_lines=_expect_lines(raw),
    )


def _read_call(reader: Reader, raw: object, parts: list[str], line: int | None) -> Call | None:
    usage = "a call is a mapping with one of answer, back or close, and an optional expect"
    if not isinstance(raw, dict):
        reader.error(parts, usage + ": write `- answer: E01`", line)
        return None
    ok = reader.unknown_keys(raw, (*CALL_KINDS, "expect"), parts)
    kinds = [kind for kind in CALL_KINDS if kind in raw]
    if len(kinds) != 1:
        reader.error(parts, usage + (f", not {' and '.join(kinds)}" if kinds else ""), line_of(raw))
        return None
    kind = kinds[0]
    spec = raw[kind]
    at = [*parts, kind]
    spec_line = key_line_of(raw, kind)
    expect = _read_expect(reader, raw, parts, kind)
    call = Call(kind, line=line_of(raw) or line, expect_lines=_expect_lines(raw))
    if kind == "answer":
        if isinstance(spec, dict):
            ok = reader.unknown_keys(spec, ("choice", "values"), at) and ok
            values = _read_values(reader, spec, at)
            if values is False:
                ok = False
            elif "choice" not in spec and values is None:
                reader.error(at, "an answer needs a choice or values", line_of(spec) or spec_line)
                ok = False
            else:
                call = replace(call, choice=spec.get("choice"), values=values)
        elif spec is None or isinstance(spec, list):
            reader.error(
                at,
                "write the label (`answer: E01`) or a mapping "
                "(`answer: {choice: E01, values: {...}}`)",
                spec_line,
            )
            ok = False
        else:
            call = replace(call, choice=spec)
    elif kind == "back":
        to = _read_text_arg(
            reader, spec, "to", at, spec_line, "back: n_node` or `back: {to: n_node}"
        )
        ok = ok and to is not False
        if to is not False:
            call = replace(call, to=to)
    else:
        why = _read_text_arg(
            reader,
            spec,
            "reason",
            at,
            spec_line,
            "close: the person left` or `close: {reason: ...}",
        )
        ok = ok and why is not False
        if why is not False:
            call = replace(call, reason=why)
    if expect is None or not ok:
        return None
    return replace(call, expect=frozen_mapping(expect))


def _read_text_arg(
    reader: Reader,
    spec: object,
    key: str,
    parts: list[str],
    line: int | None,
    example: str,
) -> str | None | Literal[False]:
    """``spec`` as ``null``, text, or ``{key: text}``; False (reported) for anything else."""
    if spec is None:
        return None
    if isinstance(spec, str):
        return spec
    if isinstance(spec, dict) and reader.unknown_keys(spec, (key,), parts):
        value = spec.get(key)
        if value is None or isinstance(value, str):
            return value
    reader.error(parts, f"write `{example}`", line)
    return False


def _read_values(
    reader: Reader, spec: Mapping[object, object], parts: list[str]
) -> Mapping[str, object] | None | Literal[False]:
    if "values" not in spec or spec["values"] is None:
        return None
    values = spec["values"]
    if isinstance(values, dict) and all(isinstance(k, str) for k in values):
        return frozen_mapping(values)
    reader.error(
        [*parts, "values"],
        "values is a mapping of value keys to text: `values: {n_error_code: E01}`",
        key_line_of(spec, "values"),
    )
    return False


def _read_expect(
    reader: Reader, spec: Mapping[object, object], parts: list[str], kind: CallKind
) -> dict[str, object] | None:
    if "expect" not in spec or spec["expect"] is None:
        return {}
    expect = spec["expect"]
    at = [*parts, "expect"]
    if not isinstance(expect, dict):
        reader.error(
            at, "expect is a mapping: `expect: {status: advanced, node: n_next}`", line_of(spec)
        )
        return None
    allowed = _CLOSE_EXPECT_KEYS if kind == "close" else tuple(EXPECT_KEYS)
    ok = reader.unknown_keys(expect, allowed, at)
    for key, value in expect.items():
        if key not in EXPECT_KEYS or key not in allowed:
            continue
        what, check, _ = EXPECT_KEYS[key]
        if not check(value):
            reader.error(
                [*at, key],
                f"{key} must be {what}, not {inline(value)}",
                key_line_of(expect, key),
            )
            ok = False
    if "error" in expect and len(expect) > 1:
        reader.error(
            at,
            "a call expected to be refused returns no result: expect only `error` here",
            key_line_of(expect, "error"),
        )
        ok = False
    return dict(expect) if ok else None


def _expect_lines(spec: Mapping[object, object]) -> Mapping[str, int]:
    expect = spec.get("expect")
    lines = getattr(expect, "key_lines", {})
    return frozen_mapping({str(k): v for k, v in lines.items()})


def check_scenario(flow: Flow, scenario: Scenario, reader: Reader) -> list[Finding]:
    """Mistakes of a scenario against ``flow``: node ids, outcomes and labels it names that
    the flow does not have. Calls expected to be refused are left alone (they may name
    anything on purpose)."""
    before = len(reader.findings)
    nodes = list(flow.nodes)
    outcomes = sorted({n.outcome for n in flow.nodes.values() if isinstance(n, EndNode)})
    labels = sorted({lb for n in flow.nodes.values() if isinstance(n, AskNode) for lb in n.accepts})
    lookups = [n for n in flow.nodes.values() if isinstance(n, LookupNode)]
    returned = sorted({lb for n in lookups for lb in n.returns} | ({ERROR} if lookups else set()))
    called = sorted({n.call for n in lookups})
    for name in scenario.endpoints:
        if name not in called:
            hint = missing_hint(name, called, "endpoints it calls")
            reader.error(
                [scenario.name, "endpoints", name],
                f"{flow.id} calls no endpoint {name!r}{hint}",
                scenario.line,
            )
    for index, call in enumerate((scenario.start, *scenario.calls)):
        if "error" in call.expect:
            continue
        parts = [scenario.name, "start" if index == 0 else f"call {index}"]
        named: list[tuple[str, str, Sequence[str], str]] = []
        if call.kind == "back" and call.to is not None:
            named.append(("back", call.to, nodes, "node"))
        for key in ("node", "common"):
            named += [(key, v, nodes, "node") for v in _texts([call.expect.get(key)])]
        for key in _NODE_LIST_KEYS:
            named += [(key, v, nodes, "node") for v in _texts(call.expect.get(key))]
        named += [("outcome", v, outcomes, "outcome") for v in _texts([call.expect.get("outcome")])]
        named += [("branches", v, labels, "label") for v in _texts(call.expect.get("branches"))]
        named += [
            ("looked_up", v, returned, "lookup label") for v in _texts(call.expect.get("looked_up"))
        ]
        for key, name, known, what in named:
            if name in known:
                continue
            hint = missing_hint(name, known, f"{what}s")
            where = [*parts, key] if key == "back" else [*parts, "expect", key]
            line = call.expect_lines.get(key, call.line)
            reader.error(where, f"{flow.id} has no {what} {name!r}{hint}", line)
    return reader.findings[before:]


def _texts(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


# --- running ------------------------------------------------------------------------------


def run_scenario(flow: Flow, scenario: Scenario) -> ScenarioResult:
    """Run ``scenario`` through the engine; stop at the first call whose result does not
    hold its ``expect``. Never raises for what the scenario does: a refusal the scenario
    did not expect is a failure."""
    state: RunState | None = None
    states: list[RunState] = []
    for index, call in enumerate((scenario.start, *scenario.calls)):
        try:
            state, got = _perform(flow, state, call, scenario)
        except _Unstubbed as missing:
            mismatches = [Mismatch("endpoints", missing.node, missing.endpoint)]
        except Refusal as refusal:
            want = call.expect.get("error", ABSENT)
            if want == refusal.error:
                continue  # refused as expected; the run stays as it was
            mismatches = [Mismatch("error", want, f"{refusal.error} ({refusal.reason})")]
        else:
            states.append(state)
            if "error" in call.expect:
                mismatches = [Mismatch("error", call.expect["error"], ABSENT)]
            else:
                mismatches = _compare(call.expect, got)
        if mismatches:
            failure = ScenarioFailure(index, call, tuple(mismatches))
            return ScenarioResult(scenario, failure, states=tuple(states))
    return ScenarioResult(scenario, states=tuple(states))


class _Unstubbed(Exception):
    """A run reached a lookup whose endpoint the scenario does not stub."""

    def __init__(self, node: str, endpoint: str) -> None:
        super().__init__(f"{node} calls {endpoint}")
        self.node = node
        self.endpoint = endpoint


def _perform(
    flow: Flow, state: RunState | None, call: Call, scenario: Scenario
) -> tuple[RunState, dict[str, object]]:
    today = scenario.today
    if call.kind == "start":
        transition = _looking_up(
            scenario, lambda lookups: engine.start(flow, call.values, today=today, lookups=lookups)
        )
        return transition.state, observe(transition.result, transition.state)
    assert state is not None  # a scenario whose start is refused has no calls (see reading)
    if call.kind == "answer":
        choice = call.choice
        transition = _looking_up(
            scenario,
            lambda lookups: engine.answer(
                flow,
                state,
                choice=choice,  # type: ignore[arg-type]  # the engine refuses a non-string itself
                values=call.values,
                today=today,
                lookups=lookups,
            ),
        )
    elif call.kind == "back":
        transition = engine.back(flow, state, call.to)
    else:
        closed = engine.close(state)
        return closed, {"state": closed.state}
    return transition.state, observe(transition.result, transition.state)


def _looking_up(
    scenario: Scenario, ask: Callable[[Mapping[str, Looked]], engine.Transition]
) -> engine.Transition:
    """``ask`` the engine, giving each lookup it reaches what the scenario's stub of its
    endpoint answers, as the server gives what the endpoint came back with."""
    lookups: dict[str, Looked] = {}
    while True:
        try:
            return ask(lookups)
        except LookupNeeded as needed:
            node = needed.node
            stub = scenario.endpoints.get(node.call)
            if stub is None:
                raise _Unstubbed(node.id, node.call) from None
            # A flow is acyclic: each lookup is reached once in a call, so this ends.
            assert node.id not in lookups, node.id
            lookups[node.id] = stub


def observe(result: StepResult, state: RunState) -> dict[str, object]:
    """What an ``expect`` can name, read from one step result and the state after it."""
    return {
        **result_seen(result),
        "state": state.state,
        "values": dict(state.values),
        "path": [entry.id for entry in state.effective_path()],
        "folded": state.folded,
    }


# The keys of a step result an ``expect`` names as the result gives them.
RESULT_KEYS = ("reason", "handoff", "attempt", "rejected")


def result_seen(result: Mapping[str, Any]) -> dict[str, object]:
    """What an ``expect`` can name of a step result alone: where the result holds objects
    (its node, tell items, ignored keys, branches, common node), their ids."""
    node = result.get("node")
    seen: dict[str, object] = {
        "status": result["status"],
        "node": node["id"] if isinstance(node, Mapping) else None,
        "tell": [item["id"] for item in result.get("tell") or []],
        "checked": [item["took"] for item in result.get("checked") or []],
        "looked_up": [item["took"] for item in result.get("looked_up") or []],
        "ignored": [item["key"] for item in result.get("ignored") or []],
        "skipped": list(result.get("skipped") or []),
    }
    if "outcome" in result:
        seen["outcome"] = result["outcome"]
    if "branches" in result:
        seen["branches"] = [branch["label"] for branch in result["branches"]]
    if "common" in result:
        common = result["common"]
        seen["common"] = common["id"] if isinstance(common, Mapping) else None
    for key in RESULT_KEYS:
        if key in result:
            seen[key] = result[key]
    return seen


def _compare(expect: Mapping[str, object], got: Mapping[str, object]) -> list[Mismatch]:
    mismatches: list[Mismatch] = []
    for key, want in expect.items():
        have = got.get(key, ABSENT)
        if key == "values" and isinstance(want, dict):
            held = have if isinstance(have, dict) else {}
            for name, value in want.items():
                actual = held.get(name, ABSENT)
                expected = ABSENT if value is None else value
                if actual != expected:
                    mismatches.append(Mismatch(f"values.{name}", expected, actual))
        elif not _same(want, have):
            mismatches.append(Mismatch(key, want, have))
    return mismatches


def _same(want: object, have: object) -> bool:
    # 1 == True in Python; a count is never a boolean here, and the reverse neither.
    return want == have and isinstance(want, bool) == isinstance(have, bool)


# --- text ---------------------------------------------------------------------------------

_PLAIN_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
# Plain scalars that a YAML 1.1 or 1.2 reader would not take as text.
_NOT_TEXT_RE = re.compile(
    r"(?i:y|n|yes|no|on|off|true|false|null|~)"
    r"|[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)(?:[eE][-+]?[0-9]+)?"
    r"|0[xob][0-9a-fA-F_]+|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
    r"|[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?"
    r"|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt ].*)?"  # a YAML 1.1 timestamp
)


def quoted(text: str) -> str:
    """``text`` as a YAML double-quoted scalar that any YAML reader reads back exactly.

    >>> print(quoted('say "hi"\\n'), quoted("返金"))
    "say \\"hi\\"\\n" "返金"
    """
    out = ['"']
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif 0x20 <= code <= 0x7E or (
            code >= 0xA0 and code not in (0x2028, 0x2029, 0xFEFF) and not 0xD800 <= code <= 0xDFFF
        ):
            out.append(char)
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def scalar(value: object) -> str:
    """One scalar as YAML text: ids and labels plain, everything else that is text quoted.

    >>> [scalar(v) for v in ("n_retry", "yes", "3.10", "E01", None, True, 3)]
    ['n_retry', '"yes"', '"3.10"', 'E01', 'null', 'true', '3']
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    text = str(value)
    if _PLAIN_RE.fullmatch(text) and not _NOT_TEXT_RE.fullmatch(text):
        return text
    return quoted(text)


_BLOCK_PLAIN_RE = re.compile(r"[^\s\-?:,\[\]{}#&*!|>'\"%@`](?:[^\x00-\x1f\x7f]*[^\s:])?")


def block_scalar(value: object) -> str:
    """A scalar as the value of a block mapping: text stays plain where YAML allows it.

    >>> [block_scalar(v) for v in ("E01, card expired", "a: b", "yes", " x", "返金した")]
    ['E01, card expired', '"a: b"', '"yes"', '" x"', '返金した']
    """
    if (
        isinstance(value, str)
        and _BLOCK_PLAIN_RE.fullmatch(value)
        and ": " not in value
        and " #" not in value
        and not _NOT_TEXT_RE.fullmatch(value)
        and all(char == quoted(char)[1:-1] for char in value)
    ):
        return value
    return scalar(value)


def inline(value: object) -> str:
    """``value`` in YAML flow style, on one line.

    >>> inline({"choice": "E01", "values": {"phone": "090 1234"}})
    '{choice: E01, values: {phone: "090 1234"}}'
    """
    if isinstance(value, _Absent):
        return "nothing"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{scalar(k)}: {inline(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(inline(v) for v in value) + "]"
    return scalar(value)
