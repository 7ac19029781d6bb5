"""Layer 1, structure (``schema``): keys, types, id syntax, duplicate keys."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from flowcore.common.limits import (
    MAX_CONDITION_LENGTH,
    MAX_CONDITIONS,
    MAX_OPTIONS,
    MAX_RETURNS,
)
from flowcore.common.lookups import LOOKUP_TYPES, endpoint_name_problem
from flowcore.common.text import a_kind, shown
from flowcore.flow.flow_ids import FLOW_ID_RE, reserved_flow_id
from flowcore.flow.labels import LABEL_RE, normal_form, similar_pairs
from flowcore.flow.lint.common import (
    FLOW_OPTIONAL,
    FLOW_REQUIRED,
    KEY_OWNERS,
    NODE_ID_RE,
    NODE_KEYS,
    OUTCOME_RE,
    SLOT_KEYS,
    WHEN_KEYS,
    YAML11_BOOLS,
    Report,
    as_text,
    check_keys,
    check_on_unknown,
    check_positive_int,
    describe,
    did_you_mean,
    item_line,
    key_at,
    key_line,
    node_at,
    text_fix,
    text_value,
)
from flowcore.flow.model import ERROR, OTHER, TEXT
from flowcore.flow.slot_types import SLOT_TYPES
from flowcore.flow.yaml_safe import line_of


def check_duplicate_keys(report: Report, data: Mapping[Any, Any]) -> None:
    known = getattr(data, "any_duplicates", None)  # what the parser recorded, if it did
    if known is False or (known is None and not _has_repeated_key(data)):
        return  # nearly always: then no path needs to be worked out
    found: list[tuple[int, tuple[str, ...], object]] = []
    seen: set[int] = set()
    stack: list[tuple[object, tuple[object, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict | list):
            if id(value) in seen:  # an alias: the same object again
                continue
            seen.add(id(value))
        if isinstance(value, dict):
            for key, line in getattr(value, "duplicates", ()):
                found.append((line, _path_at(data, (*path, key)), key))
            stack.extend((child, (*path, key)) for key, child in value.items())
        elif isinstance(value, list):
            stack.extend((child, (*path, i)) for i, child in enumerate(value))
    for line, at, key in sorted(found, key=lambda item: item[0]):
        report.error(
            "schema",
            f"key '{as_text(key)}' appears twice in one mapping and YAML keeps only the last: "
            "remove or rename one of them",
            at=at,
            line=line,
        )


def _has_repeated_key(data: Mapping[Any, Any]) -> bool:
    seen: set[int] = set()
    stack: list[object] = [data]
    while stack:
        value = stack.pop()
        if id(value) in seen:  # an alias: the same object again
            continue
        seen.add(id(value))
        if isinstance(value, dict):
            if getattr(value, "duplicates", ()):
                return True
            children: Iterable[object] = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        for child in children:
            if isinstance(child, (dict, list)):  # a tuple: faster than dict | list
                stack.append(child)
    return False


def _path_at(data: Mapping[Any, Any], path: tuple[object, ...]) -> tuple[str, ...]:
    nodes = data.get("nodes")
    if (
        len(path) >= 2
        and path[0] == "nodes"
        and isinstance(nodes, list)
        and isinstance(path[1], int)
    ):
        where = node_at(nodes[path[1]], path[1])
        return (where,) if len(path) == 2 else (where, as_text(path[2]))
    return ()


def check_flow(report: Report, data: Mapping[Any, Any], expected_id: str | None) -> None:
    check_keys(report, data, FLOW_REQUIRED + FLOW_OPTIONAL, at=(), what="the flow")
    flow_id = text_value(report, data, "id", at=(), what="the flow", required=True)
    if flow_id is not None:
        if not FLOW_ID_RE.fullmatch(flow_id):
            report.error(
                "schema",
                f"flow id '{flow_id}' must be 1-64 lowercase letters, digits or _ "
                "(like payment_failed): rename it and the file",
                line=key_line(data, "id"),
            )
        elif (reserved := reserved_flow_id(flow_id)) is not None:
            report.error(
                "schema",
                f"flow id '{flow_id}' cannot be used: {reserved}; choose another id",
                line=key_line(data, "id"),
            )
        if expected_id is not None and flow_id != expected_id:
            report.error(
                "id_mismatch",
                f"id '{flow_id}' differs from the file name '{expected_id}.yaml' (a flow "
                f"file is named after its id, wherever it is): rename the file to "
                f"{flow_id}.yaml or set id: {expected_id}",
                line=key_line(data, "id"),
            )
    title = text_value(report, data, "title", at=(), what="the flow", required=True)
    if title is not None and not title.strip():
        report.error(
            "schema",
            "'title' is empty: give the flow a one-line title",
            line=key_line(data, "title"),
        )
    for key in ("category", "entry"):
        text_value(report, data, key, at=(), what="the flow", required=True)
    for key in ("summary", "on_stuck"):
        text_value(report, data, key, at=(), what="the flow")
    version = data.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, str | int)):
        report.error(
            "schema",
            f"'version' must be text or a whole number, not {describe(version)}: "
            f"{text_fix(version)}",
            line=key_line(data, "version"),
        )
    for key in ("max_unmatched", "max_branch_fanout", "branch_depth"):
        check_positive_int(report, data, key, ())
    check_on_unknown(report, data, ())
    nodes = data.get("nodes")
    if "nodes" not in data:
        report.error("schema", "the flow has no 'nodes': add the list of nodes", line=line_of(data))
    elif isinstance(nodes, list) and not nodes:
        report.error(
            "schema",
            "'nodes' is empty: add at least the entry node and an end node",
            line=key_line(data, "nodes"),
        )
    elif not isinstance(nodes, list):
        report.error(
            "schema",
            f"'nodes' must be a list of nodes, not {describe(nodes)}: "
            "write each node as '- id: ...'",
            line=key_line(data, "nodes"),
        )


def check_nodes(report: Report, data: Mapping[Any, Any]) -> list[tuple[int, Mapping[Any, Any]]]:
    """Check every node's structure; return the nodes that are mappings, with their index."""
    raw = data.get("nodes")
    if not isinstance(raw, list):
        return []
    nodes: list[tuple[int, Mapping[Any, Any]]] = []
    for index, node in enumerate(raw):
        if not isinstance(node, dict):
            report.error(
                "schema",
                f"node #{index + 1} is {describe(node)}, not a mapping: "
                "write it as '- id: ...' followed by kind and say",
                at=(f"nodes[{index}]",),
                line=item_line(raw, index),
            )
            continue
        nodes.append((index, node))
        _check_node(report, node, index)
    return nodes


def _check_node(report: Report, node: Mapping[Any, Any], index: int) -> None:
    at = (node_at(node, index),)
    node_id = text_value(report, node, "id", at=at, what=f"node #{index + 1}", required=True)
    if node_id is not None and not NODE_ID_RE.fullmatch(node_id):
        report.error(
            "schema",
            f"node id '{node_id}' must be 1-64 letters, digits or _ (like n_card_age): rename it",
            at=at,
            line=key_line(node, "id"),
        )
    kind = node.get("kind")
    if "kind" not in node:
        report.error(
            "schema",
            "the node has no 'kind': add kind: ask, tell, collect, check, lookup or end",
            at=at,
            line=line_of(node),
        )
        return
    if not isinstance(kind, str) or kind not in NODE_KEYS:
        shown = (
            f"'{kind}'{did_you_mean(kind, NODE_KEYS)}" if isinstance(kind, str) else describe(kind)
        )
        report.error(
            "schema",
            f"unknown kind {shown}: use ask, tell, collect, check, lookup or end",
            at=key_at(at, "kind"),
            line=key_line(node, "kind"),
        )
        return
    what = f"{a_kind(kind)} node"
    check_keys(report, node, NODE_KEYS[kind], at=at, what=what, owners=KEY_OWNERS)
    say = text_value(report, node, "say", at=at, what=f"this {kind} node", required=True)
    if say is not None and not say.strip():
        report.warning(
            "empty_say",
            "'say' is empty: write what this node must convey (the agent chooses the words)",
            at=at,
            line=key_line(node, "say"),
        )
    if kind in ("ask", "collect"):
        check_on_unknown(report, node, at)
    if kind in ("ask", "collect", "lookup"):
        text_value(report, node, "on_stuck", at=at, what=what)
    if kind == "ask":
        _check_ask(report, node, at)
        flag_value(report, node, "personal", at=at, what="this ask node")
        _check_ask_type(report, node, at)
    elif kind == "collect":
        _check_collect(report, node, at)
        _check_single_next(report, node, at, kind)
    elif kind == "tell":
        _check_single_next(report, node, at, kind)
    elif kind == "check":
        _check_check(report, node, at)
    elif kind == "lookup":
        _check_lookup(report, node, at)
        flag_value(report, node, "personal", at=at, what="this lookup node")
    else:
        outcome = text_value(report, node, "outcome", at=at, what="this end node", required=True)
        if outcome is not None and not OUTCOME_RE.fullmatch(outcome):
            report.error(
                "schema",
                f"outcome '{outcome}' must be a short machine word (letters, digits, _ . -), "
                "like resolved or escalated",
                at=key_at(at, "outcome"),
                line=key_line(node, "outcome"),
            )


def _check_label(
    report: Report,
    label: object,
    at: Sequence[str],
    mapping: Mapping[Any, Any],
    *,
    reserved: str = "__other__ and __unknown__ go",
    prose: str = "the condition",
) -> None:
    if not isinstance(label, str):
        message = (
            f"label {as_text(label)} is read as {describe(label)}, not text: "
            f"quote it ('{as_text(label)}')"
        )
    elif label.startswith("__"):
        message = (
            f"label '{label}' starts with __, which is reserved: rename it "
            f"({reserved} in next only)"
        )
    elif not LABEL_RE.fullmatch(label):
        message = (
            f"label '{label}' must be 1-64 letters, digits, _ . or -: use a short code "
            f"and put the prose in {prose}"
        )
    else:
        return
    report.error("schema", message, at=(at[0], as_text(label)), line=key_line(mapping, label))


def _check_ask(report: Report, node: Mapping[Any, Any], at: Sequence[str]) -> None:
    accepts = node.get("accepts")
    if "accepts" not in node:
        report.error(
            "schema",
            "an ask node needs 'accepts': label → when it applies",
            at=at,
            line=line_of(node),
        )
    elif not isinstance(accepts, dict) or not accepts:
        report.error(
            "schema",
            "'accepts' is empty: add at least one label: condition"
            if isinstance(accepts, dict)
            else f"'accepts' must be a mapping label → condition, not {describe(accepts)}",
            at=key_at(at, "accepts"),
            line=key_line(node, "accepts"),
        )
    else:
        for label, condition in accepts.items():
            _check_label(report, label, at, accepts)
            if isinstance(label, str) and not isinstance(condition, str):
                report.error(
                    "schema",
                    f"the condition of label '{label}' must be text telling when it applies, "
                    f"not {describe(condition)}: {text_fix(condition)}",
                    at=(at[0], label),
                    line=key_line(accepts, label),
                )
        # Judged on the text, not a built flow, so it is reported beside any error.
        labels = [label for label in accepts if isinstance(label, str)]
        for a, b in similar_pairs(labels):
            report.warning(
                "similar_labels", _similar_message(at[0], a, b), at=(at[0], b), line=line_of(node)
            )
    targets = node.get("next")
    if "next" not in node:
        report.error(
            "schema", "an ask node needs 'next': label → node id", at=at, line=line_of(node)
        )
        return
    if not isinstance(targets, dict):
        report.error(
            "schema",
            f"'next' of an ask node must be a mapping label → node id, not {describe(targets)}",
            at=key_at(at, "next"),
            line=key_line(node, "next"),
        )
        return
    for label, target in targets.items():
        if not isinstance(label, str):
            _check_label(report, label, at, targets)
        elif not isinstance(target, str):
            report.error(
                "schema",
                f"next '{label}' must be a node id, not {describe(target)}: "
                f"write {label}: <node id>",
                at=(at[0], label),
                line=key_line(targets, label),
            )


def _similar_message(node_id: str, a: str, b: str) -> str:
    if normal_form(a) == normal_form(b):
        why = (
            "are one label to the matching rule (case, spaces, _ and - aside): a value "
            "sent in another form than either is taken as neither"
        )
    else:
        why = (
            "differ by a slip (a character missing, extra, wrong or swapped): a slip on one "
            "can be the other, which is taken as sent"
        )
    return f"labels '{a}' and '{b}' of {node_id} {why}. Rename one so that they differ more"


def _check_single_next(
    report: Report,
    node: Mapping[Any, Any],
    at: Sequence[str],
    kind: str,
    *,
    key: str = "next",
    when: str = "",
) -> None:
    """``key`` (a tell's or collect's ``next``, a check's ``else``): one node id."""
    if key not in node:
        report.error(
            "schema",
            f"a {kind} node needs '{key}': the id of the node that follows{when}",
            at=at,
            line=line_of(node),
        )
        return
    target = node[key]
    if not isinstance(target, str):
        fix = " (only ask nodes branch)" if isinstance(target, dict) else ""
        report.error(
            "schema",
            f"'{key}' of a {kind} node must be one node id, not {describe(target)}{fix}: "
            f"write {key}: <node id>",
            at=key_at(at, key),
            line=key_line(node, key),
        )


def _check_check(report: Report, node: Mapping[Any, Any], at: Sequence[str]) -> None:
    """A check's shape: ``when``, a list of ``{if, next}``, and ``else``, one node id."""
    when = node.get("when")
    if "when" not in node:
        report.error(
            "schema",
            "a check node needs 'when': a list of '- if: <condition>' with 'next: <node id>'",
            at=at,
            line=line_of(node),
        )
    elif not isinstance(when, list) or not when or len(when) > MAX_CONDITIONS:
        report.error(
            "schema",
            f"'when' must be a list of 1 to {MAX_CONDITIONS} conditions, not "
            + (describe(when) if not isinstance(when, list) else f"{len(when)}")
            + ": write each as '- if: <condition>' with 'next: <node id>'",
            at=key_at(at, "when"),
            line=key_line(node, "when"),
        )
    else:
        for index, item in enumerate(when):
            _check_when(report, item, at, index, item_line(when, index))
    _check_single_next(report, node, at, "check", key="else", when=" when no condition holds")


def _check_when(
    report: Report, item: object, at: Sequence[str], index: int, line: int | None
) -> None:
    where = (at[0], f"when[{index}]")
    if not isinstance(item, dict):
        report.error(
            "schema",
            f"condition #{index + 1} is {describe(item)}, not a mapping: "
            "write it as '- if: <condition>' with 'next: <node id>'",
            at=where,
            line=line,
        )
        return
    check_keys(report, item, WHEN_KEYS, at=where, what=f"condition #{index + 1}")
    for key in WHEN_KEYS:
        value = item.get(key)
        if key not in item or not isinstance(value, str) or not value.strip():
            report.error(
                "schema",
                f"condition #{index + 1} needs '{key}' as text"
                + ("" if key not in item else f", not {describe(value)}")
                + (": a CEL condition, like amount > 100.0" if key == "if" else ": a node id"),
                at=where,
                line=key_line(item, key),
            )
        elif key == "if" and len(value) > MAX_CONDITION_LENGTH:
            report.error(
                "schema",
                f"condition #{index + 1} has {len(value)} characters; the limit is "
                f"{MAX_CONDITION_LENGTH}: split it over several conditions",
                at=where,
                line=key_line(item, key),
            )


def _check_lookup(report: Report, node: Mapping[Any, Any], at: Sequence[str]) -> None:
    """A lookup's shape: ``call`` an endpoint's name, ``send`` a list of keys, ``returns``
    label -> what it means, ``sets`` key -> type, ``next`` label (or __error__) -> node id.
    Whether the keys and the targets exist is the references layer's question."""
    call = text_value(report, node, "call", at=at, what="this lookup node", required=True)
    if call is not None and (problem := endpoint_name_problem(call)) is not None:
        report.error(
            "schema",
            f"'call' names the endpoint to ask, and {problem}: write the name an operator "
            "registered, like orders",
            at=key_at(at, "call"),
            line=key_line(node, "call"),
        )
    send = node.get("send", [])
    if not isinstance(send, list) or not all(isinstance(key, str) for key in send):
        report.error(
            "schema",
            "'send' must be a list of the flow's value keys (ask node ids, slot names), not "
            + (describe(send) if not isinstance(send, list) else "a list holding other values")
            + ": write e.g. send: [order_id], or send: [] to send none",
            at=key_at(at, "send"),
            line=key_line(node, "send"),
        )
    _check_returns(report, node, at)
    _check_sets(report, node, at)
    targets = node.get("next")
    if "next" not in node:
        report.error(
            "schema",
            "a lookup node needs 'next': label → node id, for each label of returns "
            f"(and {ERROR} for a call that fails)",
            at=at,
            line=line_of(node),
        )
        return
    if not isinstance(targets, dict):
        report.error(
            "schema",
            f"'next' of a lookup node must be a mapping label → node id, not {describe(targets)}",
            at=key_at(at, "next"),
            line=key_line(node, "next"),
        )
        return
    for label, target in targets.items():
        if not isinstance(label, str):
            _check_label(report, label, at, targets, reserved=f"{ERROR} goes")
        elif not isinstance(target, str):
            report.error(
                "schema",
                f"next '{label}' must be a node id, not {describe(target)}: "
                f"write {label}: <node id>",
                at=(at[0], label),
                line=key_line(targets, label),
            )


def _check_returns(report: Report, node: Mapping[Any, Any], at: Sequence[str]) -> None:
    returns = node.get("returns")
    if "returns" not in node:
        report.error(
            "schema",
            "a lookup node needs 'returns': each label the endpoint may answer → what it means",
            at=at,
            line=line_of(node),
        )
        return
    if not isinstance(returns, dict) or not returns or len(returns) > MAX_RETURNS:
        if not isinstance(returns, dict):
            problem = f"must be a mapping label → what it means, not {describe(returns)}"
        elif not returns:
            problem = "is empty: add at least one label: what it means"
        else:
            problem = f"holds {len(returns)} labels; a lookup returns at most {MAX_RETURNS}"
        report.error(
            "schema",
            f"'returns' {problem}",
            at=key_at(at, "returns"),
            line=key_line(node, "returns"),
        )
        return
    for label, meaning in returns.items():
        _check_label(report, label, at, returns, reserved=f"{ERROR} goes", prose="what it means")
        if isinstance(label, str) and not isinstance(meaning, str):
            report.error(
                "schema",
                f"what label '{label}' means must be text, not {describe(meaning)}: "
                f"{text_fix(meaning)}",
                at=(at[0], label),
                line=key_line(returns, label),
            )


def _check_sets(report: Report, node: Mapping[Any, Any], at: Sequence[str]) -> None:
    """``sets``: key -> type. A key's name follows a slot's rule; whether it collides with
    another value key is the references layer's question."""
    sets = node.get("sets", {})
    if not isinstance(sets, dict):
        report.error(
            "schema",
            f"'sets' must be a mapping value key → type, not {describe(sets)}: "
            "write e.g. sets: {shipped_on: date}",
            at=key_at(at, "sets"),
            line=key_line(node, "sets"),
        )
        return
    for key, kind in sets.items():
        line = key_line(sets, key)
        if not isinstance(key, str) or not NODE_ID_RE.fullmatch(key):
            report.error(
                "schema",
                f"the key {shown(as_text(key))} of sets must be 1-64 letters, digits or _, "
                "like a slot's name: rename it",
                at=(at[0], as_text(key)),
                line=line,
            )
        elif kind not in LOOKUP_TYPES:
            why = (
                " (a choice's options are a collect's: an endpoint answers a label instead, "
                "in returns)"
                if kind == "choice"
                else ""
            )
            report.error(
                "bad_type",
                f"the type of '{key}' in sets must be one of {', '.join(LOOKUP_TYPES)}, "
                f"not {describe(kind)}{why}",
                at=(at[0], key),
                line=line,
            )


def _check_collect(report: Report, node: Mapping[Any, Any], at: Sequence[str]) -> None:
    slots = node.get("slots")
    if "slots" not in node:
        report.error(
            "schema",
            "a collect node needs 'slots': slot name → what to ask",
            at=at,
            line=line_of(node),
        )
        return
    if not isinstance(slots, dict) or not slots:
        report.error(
            "schema",
            "'slots' is empty: add at least one slot: what to ask"
            if isinstance(slots, dict)
            else f"'slots' must be a mapping slot name → what to ask, not {describe(slots)}",
            at=key_at(at, "slots"),
            line=key_line(node, "slots"),
        )
        return
    for name, spec in slots.items():
        _check_slot(report, name, spec, at=(at[0], as_text(name)), line=key_line(slots, name))


def _check_slot(
    report: Report, name: object, spec: object, *, at: Sequence[str], line: int | None
) -> None:
    if not isinstance(name, str):
        report.error(
            "schema",
            f"slot name {as_text(name)} is read as {describe(name)}, not text: rename it",
            at=at,
            line=line,
        )
        return
    if not NODE_ID_RE.fullmatch(name):
        report.error(
            "schema",
            f"slot name '{name}' must be 1-64 letters, digits or _: rename it",
            at=at,
            line=line,
        )
    if isinstance(spec, str):
        if not spec.strip():
            report.error(
                "schema", f"slot '{name}' asks nothing: write what to ask", at=at, line=line
            )
        return
    if not isinstance(spec, dict):
        report.error(
            "schema",
            f"slot '{name}' must be what to ask (text) or a mapping "
            f"{{ask, required, type, pattern, hint}}, not {describe(spec)}",
            at=at,
            line=line,
        )
        return
    check_keys(report, spec, SLOT_KEYS, at=at, what=f"slot '{name}'")
    text_value(report, spec, "ask", at=at, what=f"slot '{name}'", required=True)
    for key in ("pattern", "hint"):
        text_value(report, spec, key, at=at, what=f"slot '{name}'")
    for key in ("required", "personal"):
        flag_value(report, spec, key, at=at, what=f"slot '{name}'")
    _check_slot_type(report, name, spec, at=at)


def _check_ask_type(report: Report, node: Mapping[Any, Any], at: Sequence[str]) -> None:
    """An ask's ``type`` types the answer its ``__other__`` route takes: a slot's type
    but choice (the labels are its choices), and only with that route."""
    if "type" not in node:
        return
    kind = node["type"]
    allowed = [t for t in SLOT_TYPES if t != "choice"]
    if kind not in allowed:
        report.error(
            "bad_type",
            f"'type' of an ask node must be one of {', '.join(allowed)}, not {describe(kind)}"
            + (": its labels are its choices" if kind == "choice" else ""),
            at=key_at(at, "type"),
            line=key_line(node, "type"),
        )
    elif kind != TEXT and not (isinstance(node.get("next"), dict) and OTHER in node["next"]):
        report.error(
            "bad_type",
            f"'type: {kind}' types an answer outside the labels, which only a __other__ "
            "route takes: add one to next, or remove the type",
            at=key_at(at, "type"),
            line=key_line(node, "type"),
        )


def _check_slot_type(
    report: Report, name: str, spec: Mapping[Any, Any], *, at: Sequence[str]
) -> None:
    """``type`` and ``options`` (ADR 0116): a type of SLOT_TYPES; options only, and always,
    on a choice; a pattern only on text."""
    slot_type = spec.get("type", TEXT)
    if slot_type not in SLOT_TYPES:
        report.error(
            "bad_type",
            f"'type' of slot '{name}' must be one of {', '.join(SLOT_TYPES)}, "
            f"not {describe(slot_type)}",
            at=at,
            line=key_line(spec, "type"),
        )
        return
    if "pattern" in spec and slot_type != TEXT:
        report.error(
            "bad_type",
            f"slot '{name}' of type {slot_type} has a pattern: a pattern applies to text "
            "only, and the type already says what fits; remove the pattern",
            at=at,
            line=key_line(spec, "pattern"),
        )
    if slot_type != "choice":
        if "options" in spec:
            report.error(
                "bad_type",
                f"slot '{name}' has options but is not of type choice: add type: choice, "
                "or remove the options",
                at=at,
                line=key_line(spec, "options"),
            )
        return
    options = spec.get("options")
    problem = _options_problem(options)
    if problem is not None:
        report.error(
            "bad_type",
            f"the options of slot '{name}' {problem}",
            at=at,
            line=key_line(spec, "options"),
        )


def _options_problem(options: object) -> str | None:
    """Why ``options`` cannot be a choice's (the end of a finding's message), or None."""
    if not isinstance(options, list) or not options:
        return (
            "are missing: a slot of type choice needs options, a list of labels"
            if options is None
            else f"must be a list of labels, not {describe(options)}"
        )
    if len(options) > MAX_OPTIONS:
        return f"are {len(options)}; a choice has at most {MAX_OPTIONS}"
    for option in options:
        if not isinstance(option, str) or option.startswith("__") or not LABEL_RE.fullmatch(option):
            return (
                f"hold {shown(as_text(option))}, which is not a label "
                "(1-64 letters, digits, _ . or -, not starting with __)"
            )
    forms: dict[str, str] = {}
    for option in options:
        if normal_form(option) in forms:
            return (
                f"hold '{forms[normal_form(option)]}' and '{option}', one option to the "
                "matching rule (case, spaces, _ and - aside): keep one"
            )
        forms[normal_form(option)] = option
    return None


def flag_value(
    report: Report, mapping: Mapping[Any, Any], key: str, *, at: Sequence[str], what: str
) -> None:
    """Report ``key`` of ``mapping`` unless it is absent, true or false."""
    value = mapping.get(key, False)
    if isinstance(value, bool):
        return
    note = (
        " (yes/no/on/off are text here, as in YAML 1.2)"
        if isinstance(value, str) and value.lower() in YAML11_BOOLS
        else ""
    )
    report.error(
        "schema",
        f"'{key}' of {what} must be true or false, not {describe(value)}{note}",
        at=at,
        line=key_line(mapping, key),
    )
