"""Properties of the engine over random valid flows (hypothesis).

Expected paths come from ``expected_path``, a reading of the flow graph written
here independently of the engine; a refusal is accepted only when the generated
input makes it legitimate (``refusals_for_*``), and then only with the error
that input justifies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from flowcore.common.errors import InvalidInput, Refusal
from flowcore.common.limits import MAX_LABEL_LENGTH, MAX_SLOT_VALUE_LENGTH, MAX_VALUES_PER_CALL
from flowcore.flow.building import build_flow
from flowcore.flow.findings import has_errors
from flowcore.flow.labels import LABEL_RE, SHORT_WORD, normal_form
from flowcore.flow.model import (
    OTHER,
    UNKNOWN,
    AskNode,
    Category,
    CollectNode,
    EndNode,
    Flow,
    TellNode,
    frozen_mapping,
)
from flowcore.run import engine
from flowcore.run.engine import Transition
from flowcore.run.state import PathEntry, RunState
from tests.flowcore.run.engine.strategies import (
    BOUNDARY_VALUES,
    any_value,
    any_values,
    flow_to_yaml,
    flows,
    valid_answers,
)

STATUSES = {"advanced", "completed", "unmatched", "branched", "stalled"}
# The run state each status leaves the run in (a fold continues at common or ends the run).
STATES_OF_STATUS = {
    "advanced": {"active"},
    "unmatched": {"active"},
    "completed": {"completed"},
    "stalled": {"stalled"},
    "branched": {"active", "completed"},
}

Passed = list[tuple[str, str]]  # (node id, via) in order


# --- an oracle independent of the engine ---------------------------------------------------


def expected_path(
    flow: Flow, start: str, answers: Mapping[str, str], given: Mapping[str, str]
) -> tuple[Passed, str]:
    """The nodes passed from ``start`` when each node waiting for input is answered from
    ``answers``, with ``given`` sent in advance; and the end reached.

    Read straight off the flow (spec §3.1): a tell is told; an ask is skipped when its
    value was given in advance, else asked; a collect is skipped when every required
    slot was given in advance (so always, when it has none), else asked.
    """
    passed: Passed = []
    current = start
    while True:
        node = flow.nodes[current]
        if isinstance(node, EndNode):
            return passed, current
        if isinstance(node, TellNode):
            passed.append((node.id, "told"))
            current = node.next
        elif isinstance(node, AskNode):
            passed.append((node.id, "skipped" if node.id in given else "asked"))
            current = node.next[answers[node.id]]
        else:
            ready = all(s.name in given for s in node.required_slots)
            passed.append((node.id, "skipped" if ready else "asked"))
            current = node.next


def expected_values(
    flow: Flow, passed: Passed, answers: Mapping[str, str], given: Mapping[str, str]
) -> dict[str, str]:
    """The values a run holds after passing ``passed``: an ask's label, every slot of a
    collect that was asked (all are sent), the slots given in advance of one skipped."""
    values: dict[str, str] = {}
    for node_id, via in passed:
        node = flow.nodes[node_id]
        if isinstance(node, AskNode):
            values[node.id] = answers[node.id]
        elif isinstance(node, CollectNode):
            for slot in node.slots:
                if via == "asked" or slot.name in given:
                    values[slot.name] = answers[slot.name]
    return values


def path_of(state: RunState) -> Passed:
    return [(e.id, e.via) for e in state.effective_path()]


# --- walking -------------------------------------------------------------------------------


def answer_for(flow: Flow, state: RunState, answers: Mapping[str, str]) -> Transition:
    """Answer the node the run waits at, as a person would, one node per call."""
    assert state.node is not None
    node = flow.nodes[state.node]
    if isinstance(node, AskNode):
        return engine.answer(flow, state, choice=answers[node.id])
    assert isinstance(node, CollectNode)
    return engine.answer(flow, state, values={s.name: answers[s.name] for s in node.slots})


def walk_on(flow: Flow, first: Transition, answers: Mapping[str, str]) -> list[Transition]:
    steps = [first]
    while steps[-1].state.state == "active":
        steps.append(answer_for(flow, steps[-1].state, answers))
        assert len(steps) <= len(flow.nodes) + 1, "the run must end within one call per node"
    return steps


def walk(
    flow: Flow, answers: Mapping[str, str], given: Mapping[str, str] | None = None
) -> list[Transition]:
    return walk_on(flow, engine.start(flow, given), answers)


def essence(state: RunState) -> tuple[Any, ...]:
    """A state without its history: what decides every later transition."""
    return (
        state.state,
        state.node,
        dict(state.values),
        dict(state.stamps),
        dict(state.unmatched),
        state.outcome,
        state.folded,
        state.handoff,
        [(e.id, e.via, e.value) for e in state.effective_path()],
    )


def assert_invariants(flow: Flow, transition: Transition) -> None:
    state = transition.state
    assert state.state in STATES_OF_STATUS[transition.result["status"]], transition.result
    passed = [e.id for e in state.effective_path()]
    assert len(passed) == len(set(passed)), "a node was entered twice"
    if state.state == "active":
        assert state.node is not None and state.node not in passed
        assert isinstance(flow.nodes[state.node], AskNode | CollectNode)
    for key in state.values:
        assert flow.owner_of(key) is not None
    assert set(state.stamps) == set(state.values)


# --- prefill -------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_prefilling_a_paths_values_ends_where_answering_step_by_step_ends(
    data: st.DataObject,
) -> None:
    flow = data.draw(flows())
    answers = valid_answers(flow, data.draw)
    all_given, _ = expected_path(flow, flow.entry, answers, answers)
    by_hand, end = expected_path(flow, flow.entry, answers, {})
    outcome = flow.nodes[end]
    assert isinstance(outcome, EndNode)

    steps = walk(flow, answers)
    by_steps = steps[-1]
    prefilled = engine.start(flow, answers)

    for reached, passed in ((prefilled, all_given), (by_steps, by_hand)):
        assert reached.result["status"] == reached.state.state == "completed"
        assert reached.result["outcome"] == reached.state.outcome == outcome.outcome
        assert reached.state.node == end
        assert path_of(reached.state) == passed
    assert prefilled.result.get("skipped", []) == [i for i, via in all_given if via == "skipped"]
    told = [i for i, via in all_given if via == "told"]
    assert [t["id"] for t in prefilled.result.get("tell", [])] == told
    assert [t["id"] for s in steps for t in s.result.get("tell", [])] == told
    assert dict(by_steps.state.values) == expected_values(flow, by_hand, answers, {})
    assert dict(prefilled.state.values) == answers  # every value given, reached or not


# --- back ----------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_back_then_the_same_answer_gives_the_same_state(data: st.DataObject) -> None:
    flow = data.draw(flows())
    answers = valid_answers(flow, data.draw)
    steps = walk(flow, answers)
    if len(steps) == 1:
        # Nothing waited for input: the path holds only tells and collects that need no slot.
        passed, _ = expected_path(flow, flow.entry, answers, {})
        assert all(via != "asked" for _, via in passed), passed
        assert path_of(steps[0].state) == passed
        return
    k = data.draw(st.integers(min_value=0, max_value=len(steps) - 2))
    before, after = steps[k], steps[k + 1]
    assert before.state.node is not None
    reopened = engine.back(flow, after.state, before.state.node)
    assert essence(reopened.state)[:-1] == essence(before.state)[:-1]
    again = answer_for(flow, reopened.state, answers)
    assert essence(again.state) == essence(after.state)
    assert again.result == after.result


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_back_restores_a_nodes_first_arrival_without_the_values_given_in_advance(
    data: st.DataObject,
) -> None:
    """Back to any ask or collect the run passed (asked, or skipped thanks to a value given
    in advance) reopens it as first reached: the values of the nodes before it stay, every
    value given for it or for a later node is gone, and answering from there walks the
    rest of the flow asking every node again."""
    flow = data.draw(flows())
    answers = valid_answers(flow, data.draw)
    keys = sorted(answers)
    given_keys = data.draw(st.sets(st.sampled_from(keys))) if keys else set()
    given = {k: answers[k] for k in given_keys}
    passed, end = expected_path(flow, flow.entry, answers, given)

    final = walk(flow, answers, given)[-1].state
    assert (final.state, final.node) == ("completed", end)
    assert path_of(final) == passed

    reopenable = [i for i, (node_id, _) in enumerate(passed) if node_id in _asks_and_collects(flow)]
    if not reopenable:
        with pytest.raises(InvalidInput) as refused:
            engine.back(flow, final, flow.entry)
        assert refused.value.error == "node not on the path"
        assert refused.value.candidates == ()
        return
    position = data.draw(st.sampled_from(reopenable))
    target = passed[position][0]

    reopened = engine.back(flow, final, target)

    assert reopened.result["status"] == "advanced"
    assert reopened.result["node"]["id"] == target
    state = reopened.state
    assert (state.state, state.node, state.outcome) == ("active", target, None)
    assert path_of(state) == passed[:position]
    assert dict(state.values) == expected_values(flow, passed[:position], answers, given)
    assert dict(state.unmatched) == {}
    rest, rest_end = expected_path(flow, target, answers, {})
    rest[0] = (target, "asked")  # the run waits there: it is asked, whatever it needs
    again = walk_on(flow, reopened, answers)[-1].state
    assert (again.state, again.node) == ("completed", rest_end)
    assert path_of(again) == passed[:position] + rest


def _asks_and_collects(flow: Flow) -> set[str]:
    return {n.id for n in flow.nodes.values() if isinstance(n, AskNode | CollectNode)}


# --- loader round trip ---------------------------------------------------------------------


def loaded(flow: Flow) -> Flow:
    """The generated flow written out as YAML and read back by the real loader, lint-clean."""
    return loaded_text(flow_to_yaml(flow))


def loaded_text(text: str) -> Flow:
    built, findings = build_flow(text, categories={"test": Category("test", "Test")})
    assert built is not None and not has_errors(findings), findings
    return built


@settings(max_examples=100, deadline=None)
@given(flows())
def test_generated_flows_lint_clean_and_load_back_identically(flow: Flow) -> None:
    assert loaded(flow) == flow


# --- any input -----------------------------------------------------------------------------


def has_control(text: str, *, lines: bool) -> bool:
    """C0 and C1 controls, DEL and lone surrogates are refused; tab, LF and CR only in
    slot text."""
    allowed = "\t\n\r" if lines else ""
    return any(
        (ord(c) < 32 or 0x7F <= ord(c) <= 0x9F or 0xD800 <= ord(c) <= 0xDFFF) and c not in allowed
        for c in text
    )


def value_problems(raw: object, limit: int) -> set[str]:
    """The refusals a single value justifies (spec §2's limits)."""
    if not isinstance(raw, str):
        return {"value is not a string"}
    found = set()
    if not raw.strip():
        found.add("empty value")
    if len(raw) > limit:
        found.add("value too long")
    if not found and has_control(raw, lines=limit > MAX_LABEL_LENGTH):
        return {"control character"}  # checked once the value's size is right
    if raw.startswith("__") and raw != UNKNOWN:
        found.add("reserved value")
    return found


def refusals_for_values(flow: Flow, values: Mapping[str, object]) -> set[str]:
    """Keys the flow does not know are ignored, never refused; a known key's bad value is."""
    found = {"too many values"} if len(values) > MAX_VALUES_PER_CALL else set()
    for key, raw in values.items():
        owner = flow.owner_of(key)
        if owner is not None:
            limit = MAX_LABEL_LENGTH if owner == key else MAX_SLOT_VALUE_LENGTH
            found |= value_problems(raw, limit)
    return found


def refusals_for_answer(
    flow: Flow, state: RunState, choice: object, values: Mapping[str, object]
) -> set[str]:
    if state.state != "active":
        return {f"run is {state.state}"}
    if choice is None and not values:
        return {"nothing to answer"}
    found = refusals_for_values(flow, values)
    if choice is not None:
        found |= value_problems(choice, MAX_LABEL_LENGTH)
        assert state.node is not None
        node = flow.nodes[state.node]
        if isinstance(node, AskNode):
            given = values.get(node.id)
            if given is not None and not says_the_same_label(node, given, choice):
                found.add("choice and values disagree")
        elif choice != UNKNOWN:
            found.add("choice at a collect node")
    return found


def says_the_same_label(node: AskNode, first: object, second: object) -> bool:
    """Spec §3.1 and §5.3: two answers for an ask agree when they are equal or stand for the
    same label (a label exactly, else the one label alike in normal form)."""

    def label(value: object) -> str | None:
        if not isinstance(value, str):
            return None
        if value in node.accepts:
            return value
        alike = [lb for lb in node.accepts if normal_form(lb) == normal_form(value)]
        return alike[0] if len(alike) == 1 else None

    return first == second or (label(first) is not None and label(first) == label(second))


def refusals_for_back(flow: Flow, state: RunState, to: str | None) -> set[str]:
    """Spec §3.5: ``to`` names an ask or collect on the effective path or the node the
    run waits at; without ``to``, back undoes the last answer: a stalled run reopens where
    it stalled, any other run the last ask or collect it passed (answered, folded, or
    passed by values given in advance), so only a run that passed none has nothing to undo."""
    if state.state == "closed":
        return {"run is closed"}
    passed = state.effective_path()
    reopenable = {e.id for e in passed if e.kind in ("ask", "collect")}
    if to is None:
        return set() if state.state == "stalled" or reopenable else {"nothing to go back to"}
    waiting = state.node if state.state in ("active", "stalled") else None
    return set() if to in reopenable or to == waiting else {"node not on the path"}


LIMITS_FLOW = """\
id: limits
title: Limits
category: test
entry: c_who
nodes:
  - id: c_who
    kind: collect
    say: who is it
    slots: {name: the name}
    next: a_pick
  - id: a_pick
    kind: ask
    say: pick one
    accepts: {x: the first, y: the second}
    next: {x: e_done, y: e_done, __other__: e_done}
  - id: e_done
    kind: end
    say: done
    outcome: resolved
"""


@pytest.mark.parametrize("key", ["a_pick", "name"], ids=["label", "slot-value"])
@pytest.mark.parametrize(
    "value",
    [*BOUNDARY_VALUES, UNKNOWN, "x", 7, None],
    # No backslash in an id: mutmut could not select the test by it again.
    ids=lambda v: repr(v)[:12].replace("\\", "/"),
)
def test_a_value_is_refused_exactly_when_a_limit_of_the_spec_says(key: str, value: object) -> None:
    """The property below draws these values only now and then; here each one is sent, as
    a label and as a slot value, and refused with exactly the error its limit gives."""
    flow = loaded_text(LIMITS_FLOW)
    expected = refusals_for_values(flow, {key: value})
    assert len(expected) <= 1
    if expected:
        with pytest.raises(InvalidInput) as refused:
            engine.start(flow, {key: value})
        assert {refused.value.error} == expected
    else:
        assert engine.start(flow, {key: value}).result["status"] in STATUSES


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_no_input_crashes_the_engine_or_enters_a_node_twice(data: st.DataObject) -> None:
    """Any sequence of calls, valid or not: every refusal is one the input justifies (with
    the error it justifies), every call the input does not invalidate is accepted, and
    every accepted call leaves a consistent state."""
    flow = loaded(data.draw(flows()))
    values = data.draw(any_values(flow))
    justified = refusals_for_values(flow, values)
    try:
        transition = engine.start(flow, values)
    except Refusal as refused:
        assert refused.error in justified, (refused, justified)
        transition = engine.start(flow)
    else:
        assert not justified, f"start should have been refused with one of {justified}"
    assert_invariants(flow, transition)
    state = transition.state
    for _ in range(data.draw(st.integers(min_value=1, max_value=12))):
        action = data.draw(st.sampled_from(["answer", "answer", "back", "back_to", "close"]))
        try:
            if action == "answer":
                choice = data.draw(st.none() | any_value(flow))
                values = data.draw(any_values(flow))
                justified = refusals_for_answer(flow, state, choice, values)
                transition = engine.answer(flow, state, choice=choice, values=values)
            elif action == "back":
                justified = refusals_for_back(flow, state, None)
                transition = engine.back(flow, state)
            elif action == "back_to":
                to = data.draw(st.sampled_from(list(flow.nodes)))
                justified = refusals_for_back(flow, state, to)
                transition = engine.back(flow, state, to)
            else:
                refusal = {"closed": "run is closed", "completed": "run already ended"}
                justified = {refusal[state.state]} if state.state in refusal else set()
                state = engine.close(state)
                assert not justified, f"a {state.state} run was closed"
                assert state.state == "closed"
                continue
        except Refusal as refused:
            assert justified, f"{action} refused without cause: {refused}"
            assert refused.error in justified, (refused, justified)
            assert refused.reason and refused.next
            continue
        assert not justified, f"{action} should have been refused with one of {justified}"
        assert transition.result["status"] in STATUSES
        state = transition.state
        assert_invariants(flow, transition)
        assert RunState.from_dict(state.to_dict()) == state


# --- unknown -------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_unknown_everywhere_ends_in_a_fold_a_stall_or_an_end(data: st.DataObject) -> None:
    flow = data.draw(flows())
    values = {key: UNKNOWN for key in flow.value_keys}
    transition = engine.start(flow, values)
    status = transition.result["status"]
    assert status in {"branched", "stalled", "completed"}, transition.result
    assert transition.state.state in STATES_OF_STATUS[status]
    if status == "stalled":
        assert transition.result["reason"] in {"escalate", "unfoldable"}
        assert transition.result["handoff"] == transition.state.handoff
        assert transition.result["handoff"]
    elif status == "completed":
        end = flow.nodes[transition.state.node or ""]
        assert isinstance(end, EndNode)
        assert transition.result["outcome"] == end.outcome
    else:
        assert "branches" in transition.result and "common" in transition.result


CATASTROPHIC_FLOW = """\
id: catastrophic
title: a pattern that backtracks
category: test
entry: n_get
nodes:
  - id: n_get
    kind: collect
    say: ask
    slots:
      code: {ask: the code, required: true, pattern: "(A+)+[0-9]{5}", hint: A then 5 digits}
    next: n_done
  - id: n_done
    kind: end
    outcome: done
    say: done
"""


def test_a_catastrophic_pattern_runs_on_re2_and_answers_at_once() -> None:
    """``(A+)+[0-9]{5}`` against 29 A's froze a worker for 18 s on Python's ``re``; on RE2
    the same match is linear. The engine's only matcher is RE2 (its module imports no
    ``re``), and the value is simply unmatched."""
    import flowcore.run.engine as engine_module
    from flowcore.flow import patterns

    assert not hasattr(engine_module, "re")
    # The matcher is RE2: unlike a backtracking engine it cannot run a backreference at all.
    with pytest.raises(patterns.re2.error):
        patterns.full_match("(a)\\1", "aa")
    flow = loaded_text(CATASTROPHIC_FLOW)
    transition = engine.start(flow, {"code": "A" * 29})
    assert transition.result["status"] == "unmatched"
    assert engine.start(flow, {"code": "AAA12345"}).result["status"] == "completed"


# --- the matching rule (spec §3.1) -----------------------------------------------------------

LABEL_CHARS = st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._")
SEPARATORS = st.text(st.sampled_from(" _-"), min_size=1, max_size=3)
PICK = "n_pick"


def pick_flow(labels: list[str]) -> Flow:
    """One ask node with ``labels`` (each to its own end) and an ``__other__`` route."""
    ends = {f"e_{i}": EndNode(f"e_{i}", "done", f"o_{i}") for i in range(len(labels))}
    other = EndNode("e_other", "other", "other")
    ask = AskNode(
        PICK,
        "pick one",
        frozen_mapping({label: f"when {label}" for label in labels}),
        frozen_mapping({**{lb: f"e_{i}" for i, lb in enumerate(labels)}, OTHER: "e_other"}),
    )
    nodes = {PICK: ask, **ends, "e_other": other}
    return Flow("pick", "Pick", "test", PICK, frozen_mapping(nodes))


labels_of_a_node = st.lists(
    st.text(LABEL_CHARS, min_size=3, max_size=12).filter(lambda t: not t.startswith("_")),
    min_size=1,
    max_size=4,
    unique=True,
)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_label_in_another_case_with_other_separators_is_taken_as_that_label(
    data: st.DataObject,
) -> None:
    labels = data.draw(labels_of_a_node)
    label = data.draw(st.sampled_from(labels))
    assume(sum(normal_form(lb) == normal_form(label) for lb in labels) == 1)
    # Every run of `_` becomes a random run of spaces, `_` and `-`; letters change case.
    parts = [p for p in re.split(r"(_+)", label)]
    sent = "".join(data.draw(SEPARATORS) if p.startswith("_") else p for p in parts)
    sent = "".join(c.upper() if data.draw(st.booleans()) else c.lower() for c in sent)
    sent = (
        data.draw(st.sampled_from(["", " ", "  "])) + sent + data.draw(st.sampled_from(["", " "]))
    )
    assume(not sent.strip().startswith("__"))

    transition = engine.start(pick_flow(labels), {PICK: sent})

    assert transition.result["status"] == "completed", (sent, transition.result)
    assert transition.state.values[PICK] == label
    assert transition.state.path[0].value == label


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_value_with_a_number_no_label_holds_takes_other_as_sent(data: st.DataObject) -> None:
    """A label with its numbers replaced by (or followed by) one that no label holds is
    another code, however close its letters: it takes __other__, recorded as sent."""
    labels = data.draw(labels_of_a_node)
    label = data.draw(st.sampled_from(labels))
    numbers = {int(n) for lb in labels for n in re.findall(r"\d+", lb)}
    number = str(data.draw(st.integers(0, 99).filter(lambda n: n not in numbers)))
    sent = re.sub(r"\d+", number, label) if re.search(r"\d", label) else label + number

    transition = engine.start(pick_flow(labels), {PICK: sent})

    assert transition.result["status"] == "completed", (sent, transition.result)
    assert transition.state.node == "e_other"
    assert transition.state.values[PICK] == sent


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_slip_on_a_label_never_takes_other(data: st.DataObject) -> None:
    """One letter dropped, doubled, changed or swapped with its neighbour (the numbers
    left as they are): the value is taken as a label (the slip made another one) or
    refused with the label in candidates."""
    labels = data.draw(labels_of_a_node)
    label = data.draw(st.sampled_from(labels))
    letters = [i for i, c in enumerate(label) if c.isalpha()]
    assume(letters)
    i = data.draw(st.sampled_from(letters))
    # A word shorter than SHORT_WORD takes no slip (spec §3.1): "0A_" is the word "0a".
    word = next(m for m in re.finditer(r"[^\s_-]+", label) if m.start() <= i < m.end())
    assume(len(word.group()) >= SHORT_WORD)
    slip = data.draw(st.sampled_from(["drop", "double", "change", "swap"]))
    if slip == "drop":
        # Not between two digits: that would join two numbers into another one.
        assume(not (0 < i < len(label) - 1 and label[i - 1].isdigit() and label[i + 1].isdigit()))
        sent = label[:i] + label[i + 1 :]
    elif slip == "double":
        sent = label[:i] + label[i] + label[i:]
    elif slip == "change":
        sent = label[:i] + ("z" if label[i].lower() != "z" else "y") + label[i + 1 :]
    else:
        assume(i + 1 < len(label) and label[i + 1].isalpha())
        sent = label[:i] + label[i + 1] + label[i] + label[i + 2 :]
    assume(sent.strip() and not sent.strip().startswith("__") and sent not in labels)

    result = engine.start(pick_flow(labels), {PICK: sent}).result

    if result["status"] == "unmatched":
        assert label in result.get("candidates", []), (sent, result)
    else:
        assert result["node"]["id"] != "e_other", (sent, result)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_only_a_short_code_unlike_the_labels_takes_other(data: st.DataObject) -> None:
    """Prose, a list, a label's condition or a reserved word never ends a run through
    __other__: such a value is refused, and a step that takes __other__ says so."""
    labels = data.draw(labels_of_a_node)
    label = data.draw(st.sampled_from(labels))
    sent = data.draw(
        st.one_of(
            st.text(max_size=40),
            st.just(f"when {label}"),  # the condition of `label` (pick_flow's)
            st.sampled_from([f"{label}, {labels[0]}", f"{label} or {labels[-1]}", f"{label} x"]),
            st.sampled_from(["unknown", "Unknown", "unknwon", "dont_know", "don't know", "other"]),
        )
    )
    assume(sent.strip() and not sent.strip().startswith("__") and "\x00" not in sent)
    try:
        result = engine.start(pick_flow(labels), {PICK: sent}).result
    except InvalidInput:
        return  # a value the spec's limits refuse (a control character)
    took_other = result["node"]["id"] == "e_other"
    assert result.get("other", False) is took_other, (sent, result)
    if took_other:
        assert LABEL_RE.fullmatch(sent.strip()), (sent, result)
        assert "outside the labels" in result["next"], result
        assert sent.casefold() not in ("unknown", "unknwon", "dont_know", "other"), result
        assert not sent.startswith(f"when {label}"), result


def test_a_state_is_stored_without_its_defaults_and_with_path_entries_as_lists() -> None:
    state = RunState(
        state="active",
        node="n_b",
        path=(PathEntry("n_a", "ask", "asked", "yes"), PathEntry("n_t", "tell", "told")),
        passed=2,
    )
    assert state.to_dict() == {
        "state": "active",
        "node": "n_b",
        "path": [["n_a", "ask", "asked", "yes"], ["n_t", "tell", "told"]],
        "passed": 2,
    }
    assert RunState.from_dict(state.to_dict()) == state


def test_a_state_stored_without_the_length_of_its_path_has_it_counted_on_reading() -> None:
    stored = {
        "state": "active",
        "node": "n_c",
        "path": [
            ["n_a", "ask", "asked", "yes"],
            ["n_b", "ask", "asked", "no"],
            ["n_a", "ask", "back"],
        ],
    }
    # Going back to n_a undid both answers.
    assert RunState.from_dict(stored).passed == 0
    assert RunState.from_dict({**stored, "path": stored["path"][:2]}).passed == 2


def test_a_state_stored_in_the_earlier_form_reads_as_the_same_state() -> None:
    earlier = {
        "state": "stalled",
        "node": "n_a",
        "values": {"n_a": "__unknown__"},
        "stamps": {"n_a": 0},
        "unmatched": {},
        "path": [{"id": "n_a", "kind": "ask", "via": "asked", "value": "__unknown__"}],
        "outcome": None,
        "folded": False,
        "handoff": "a person decides",
    }
    state = RunState.from_dict(earlier)
    assert state.path == (PathEntry("n_a", "ask", "asked", "__unknown__"),)
    assert (state.values["n_a"], state.stamps["n_a"], state.handoff) == (
        "__unknown__",
        0,
        "a person decides",
    )
    assert RunState.from_dict(state.to_dict()) == state
