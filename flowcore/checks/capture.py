"""Scenarios from recorded runs: a run's calls and results, written as a scenario.

``scenario_from_steps`` turns a run's steps (each tool call's input and the result
that came back) into a scenario; ``append_scenario`` adds it to the text of a
tests file. The file is extended as text, never re-dumped, so its other scenarios,
guarantees and comments stay exactly as written; the result is read back and
compared before anyone writes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from flowcore.checks.scenarios import FAIL, block_scalar, inline, result_seen, scalar
from flowcore.common.errors import Refusal
from flowcore.common.lookups import Misfit
from flowcore.flow.model import Flow, LookupNode
from flowcore.flow.yaml_safe import NOT_A_MAPPING, YamlMap, YamlRefused, parse_yaml
from flowcore.run.lookups import Looked, judged, recorded_lookups
from flowcore.run.results import ADOPT, TODAY_KEY


@dataclass(frozen=True)
class RecordedStep:
    """One accepted call of a run: the tool, its arguments as stored, its result."""

    tool: str
    input: Mapping[str, Any]
    result: Mapping[str, Any]


@dataclass(frozen=True)
class CapturedScenario:
    """A scenario as data (what the file must read back as) and the comments above it."""

    name: str
    data: dict[str, Any]
    comments: tuple[str, ...] = ()


def scenario_from_steps(
    name: str,
    steps: Sequence[RecordedStep],
    comments: Sequence[str] = (),
    *,
    flow: Flow | None = None,
) -> CapturedScenario:
    """The scenario that replays ``steps`` and expects what each returned; what the run's
    lookups came back with is written as stubs of their endpoints, which ``flow`` (the
    run's version) names.

    Raises ValueError when the first step is not a start (a run always begins with one),
    or when a step made a lookup and no ``flow`` is given.
    """
    if not steps or steps[0].tool != "guide_start":
        raise ValueError("a recorded run begins with guide_start")
    first = steps[0]
    start: dict[str, Any] = {}
    if first.input.get("values"):
        start["values"] = dict(first.input["values"])
    start["expect"] = expect_from_result(first.result)
    calls: list[dict[str, Any]] = []
    for step in steps[1:]:
        call: dict[str, Any]
        if step.tool == ADOPT:  # the run changed hands, not its path
            continue
        if step.tool == "guide_answer":
            choice, values = step.input.get("choice"), step.input.get("values")
            if values is None and isinstance(choice, str):
                call = {"answer": choice}
            else:
                args = {"choice": choice} if choice is not None else {}
                if values is not None:
                    args["values"] = dict(values)
                call = {"answer": args}
        elif step.tool == "guide_back":
            to = step.input.get("to")
            call = {"back": {"to": to} if to is not None else {}}
        elif step.tool == "guide_close":
            call = {"close": step.input.get("reason")}
        else:
            raise ValueError(f"a run has no {step.tool} step")
        call["expect"] = expect_from_result(step.result)
        calls.append(call)
    data: dict[str, Any] = {"name": name}
    dates = [s.input[TODAY_KEY] for s in steps if isinstance(s.input.get(TODAY_KEY), str)]
    if dates:
        # Only a step that passed a check records its date, and a scenario has one date:
        # the first such step's (a run whose checks fall on two days is rare).
        data["today"] = dates[0]
    endpoints = _endpoints(steps, flow)
    if endpoints:
        data["endpoints"] = endpoints
    data["start"] = start
    if calls:
        data["calls"] = calls
    return CapturedScenario(name, data, tuple(comments))


def _endpoints(steps: Sequence[RecordedStep], flow: Flow | None) -> dict[str, Any]:
    """What each endpoint the run called came back with, as a scenario stubs it. A stub
    answers every call of its endpoint alike: where a run called one endpoint twice,
    the first answer is kept."""
    stubs: dict[str, Any] = {}
    for step in steps:
        for node_id, looked in recorded_lookups(step.input).items():
            if flow is None:
                raise ValueError("a run that made lookups is captured with its flow")
            node = flow.nodes.get(node_id)
            if not isinstance(node, LookupNode):
                raise ValueError(f"{node_id} is no lookup of {flow.id}")
            stubs.setdefault(node.call, _stub(node, looked))
    return stubs


def _stub(node: LookupNode, looked: Looked) -> dict[str, Any]:
    """A stub that gives ``node`` what ``looked`` gave it: the answer as it came, or, for
    a failed call or an answer that was no JSON object, the failure the run recorded."""
    if looked.response is not None:
        try:
            answer = json.loads(looked.response)
        except (ValueError, RecursionError):
            answer = None
        if isinstance(answer, dict):
            return answer
    misfit = judged(node, looked)
    assert isinstance(misfit, Misfit), "only a JSON object fits a lookup"
    return {FAIL: misfit.reason}


def expect_from_result(result: Mapping[str, Any]) -> dict[str, Any]:
    """What a step result returned, as the ``expect`` of a scenario call (an empty list of
    tell items, checks, lookups, ignored keys or skipped nodes left out)."""
    if "status" not in result:  # guide_close
        return {"state": result.get("state", "closed")}
    return {
        key: value
        for key, value in result_seen(result).items()
        if value or key not in ("tell", "checked", "looked_up", "ignored", "skipped")
    }


def scenario_text(scenario: CapturedScenario, indent: str = "  ") -> str:
    lines = [f"{indent}# {comment}" for comment in scenario.comments]
    lines += _block(scenario.data, indent + "- ", indent + "  ")
    return "\n".join(lines) + "\n"


# A mapping that fits on one line this long is written inline (`expect: {status: ...}`).
_INLINE_WIDTH = 100


def _block(mapping: Mapping[str, Any], first: str, rest: str) -> list[str]:
    """A mapping in block style: ``start`` and ``calls`` as blocks, other mappings inline
    when they fit on a line. ``first`` prefixes the first line, ``rest`` the others."""
    lines: list[str] = []
    for key, value in mapping.items():
        prefix = first if not lines else rest
        text = block_scalar(value) if isinstance(value, str) else inline(value)
        line = f"{prefix}{scalar(key)}: {text}"
        if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            lines.append(f"{prefix}{scalar(key)}:")
            for item in value:
                lines += _block(item, rest + "  - ", rest + "    ")
        elif (
            isinstance(value, Mapping)
            and value
            and (key == "start" or (key == "expect" and len(line) > _INLINE_WIDTH))
        ):
            lines.append(f"{prefix}{scalar(key)}:")
            lines += _block(value, rest + "  ", rest + "  ")
        else:
            lines.append(line)
    return lines


def append_scenario(existing: str | None, scenario: CapturedScenario, *, flow_id: str) -> str:
    """The text of a tests file with ``scenario`` appended to its ``scenarios`` list,
    everything already in the file kept byte for byte.

    Raises Refusal when the file does not parse, already has a scenario of that name, or
    is laid out so that appending text would change what it says.
    """
    if existing is None or not _has_document(existing):
        head = existing if existing and existing.strip() else _header(flow_id)
        text = _ensure_newline(head) + "scenarios:\n" + scenario_text(scenario)
        return _verified(None, text, scenario)
    data = _parse(existing)
    raw = data.get("scenarios")
    names = [item.get("name") for item in raw or [] if isinstance(item, Mapping)]
    if scenario.name in names:
        raise Refusal(
            "scenario exists",
            f"the tests file already has a scenario named {scenario.name!r}",
            "Remove or rename that scenario first if the run should be captured again.",
        )
    lines = existing.splitlines(keepends=True)
    if "scenarios" not in data:
        text = _ensure_newline(existing) + "scenarios:\n" + scenario_text(scenario)
        return _verified(data, text, scenario)
    indent, gap = "  ", ""
    item_lines = getattr(raw, "item_lines", [])
    if item_lines:
        first = lines[item_lines[0] - 1]
        indent = first[: len(first) - len(first.lstrip(" "))]
        gap = "\n"  # a blank line between scenarios, as the bundled files have
    keys = list(data.key_lines)
    after = keys[keys.index("scenarios") + 1 :]
    cut = data.key_lines[after[0]] - 1 if after else len(lines)  # the next top-level key
    while cut > 0 and (not lines[cut - 1].strip() or (after and lines[cut - 1].startswith("#"))):
        cut -= 1
    head = _ensure_newline("".join(lines[:cut]))
    rest = "".join(lines[cut:])
    text = head + gap + scenario_text(scenario, indent) + rest
    return _verified(data, text, scenario)


def _header(flow_id: str) -> str:
    return (
        f"# Scenarios and guarantees of the flow {flow_id}: `guidepost-mcp test {flow_id}` runs\n"
        '# them (docs/authoring.md, "Testing a flow").\n'
    )


def _has_document(text: str) -> bool:
    """False for text with no YAML document in it (empty, or only comments)."""
    try:
        parse_yaml(text)
    except YamlRefused as exc:
        return not (exc.line is None and exc.message == NOT_A_MAPPING)
    except yaml.YAMLError:
        return True
    return True


def _parse(text: str) -> YamlMap:
    try:
        return parse_yaml(text).data
    except (YamlRefused, yaml.YAMLError) as exc:
        raise Refusal(
            "tests file unreadable",
            f"the tests file does not parse as YAML: {exc}",
            "Fix the file (guidepost-mcp test reports where), then capture the run again.",
        ) from None


def _verified(before: YamlMap | None, text: str, scenario: CapturedScenario) -> str:
    try:
        after: YamlMap | None = parse_yaml(text).data
    except (YamlRefused, yaml.YAMLError):
        after = None
    old = dict(before or {})
    old_items = list(old.pop("scenarios", None) or [])
    new = dict(after or {})
    new_items = list(new.pop("scenarios", None) or [])
    if after is None or new != old or new_items != [*old_items, scenario.data]:
        raise Refusal(
            "tests file layout",
            "appending the scenario as text would change what the tests file says",
            "Write `scenarios:` as a block list (one `- name: ...` per scenario), then "
            "capture the run again.",
        )
    return text


def _ensure_newline(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"
