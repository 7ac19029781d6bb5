"""Layer 2, references: ids, targets, labels, the category and slot patterns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flowcore.common.text import shown
from flowcore.flow.lint.common import (
    Report,
    as_text,
    did_you_mean,
    item_line,
    key_line,
    node_at,
)
from flowcore.flow.model import ERROR, RESERVED_NEXT_KEYS, Category
from flowcore.flow.patterns import pattern_error


def check_references(
    report: Report,
    data: Mapping[Any, Any],
    nodes: Sequence[tuple[int, Mapping[Any, Any]]],
    categories: Mapping[str, Category],
) -> None:
    ids = _check_node_ids(report, nodes)
    _check_slot_names(report, nodes, ids)
    value_keys = _value_keys(nodes)
    entry = data.get("entry")
    if isinstance(entry, str) and entry not in ids:
        report.error(
            "bad_entry",
            f"entry '{entry}' names no node{did_you_mean(entry, ids)}: "
            "set entry to the id of the first node",
            line=key_line(data, "entry"),
        )
    category = data.get("category")
    if isinstance(category, str) and category not in categories:
        known = ", ".join(categories) or "none defined"
        report.error(
            "unknown_category",
            f"category '{category}' is not in categories.yaml"
            f"{did_you_mean(category, categories)}: use one of {known}, "
            "or add it to categories.yaml",
            line=key_line(data, "category"),
        )
    for index, node in nodes:
        at = (node_at(node, index),)
        kind = node.get("kind")
        if kind == "ask":
            _check_ask_references(report, node, at, ids)
        elif kind in ("tell", "collect"):
            _check_single_target(report, node, "next", at, ids)
        elif kind == "check":
            _check_check_references(report, node, at, ids)
        elif kind == "lookup":
            _check_lookup_references(report, node, at, ids, value_keys)
        if kind == "collect":
            _check_patterns(report, node, at)


def _check_node_ids(
    report: Report, nodes: Sequence[tuple[int, Mapping[Any, Any]]]
) -> dict[str, int]:
    ids: dict[str, int] = {}
    for index, node in nodes:
        node_id = node.get("id")
        if not isinstance(node_id, str):
            continue
        if node_id in ids:
            report.error(
                "duplicate_id",
                f"node id '{node_id}' is already used by node #{ids[node_id] + 1}: "
                "give each node its own id",
                at=(node_id,),
                line=key_line(node, "id"),
            )
        else:
            ids[node_id] = index
    return ids


def _check_slot_names(
    report: Report, nodes: Sequence[tuple[int, Mapping[Any, Any]]], ids: Mapping[str, int]
) -> None:
    """A slot's name and a key a lookup sets: each names one value of the flow, so neither
    may be a node's id or another slot's or set key's name."""
    owners: dict[str, tuple[str, str]] = {}  # name -> (its node, slot or set key)
    for index, node in nodes:
        kind = node.get("kind")
        names = node.get("slots") if kind == "collect" else node.get("sets")
        if kind not in ("collect", "lookup") or not isinstance(names, dict):
            continue
        where = node_at(node, index)
        what = "slot" if kind == "collect" else "set key"
        for name in names:
            if not isinstance(name, str):
                continue
            line = key_line(names, name)
            if name in ids:
                message = (
                    f"{what} '{name}' has the same name as a node; values are addressed by "
                    f"name: rename the {what}"
                )
            elif name in owners and what == owners[name][1] == "slot":
                message = (
                    f"slot '{name}' is also a slot of {owners[name][0]}; "
                    "slot names are unique in a flow: rename one of them"
                )
            elif name in owners:
                owner, owned = owners[name]
                message = (
                    f"{what} '{name}' is also a {owned} of {owner}; each value of a flow has "
                    "one name: rename one of them"
                )
            else:
                owners[name] = (where, what)
                continue
            report.error("duplicate_id", message, at=(where, name), line=line)


def _value_keys(nodes: Sequence[tuple[int, Mapping[Any, Any]]]) -> list[str]:
    """Every key a run's values may hold, as written: ask and lookup ids, slot names and
    the keys lookups set."""
    keys: list[str] = []
    for _, node in nodes:
        kind, node_id = node.get("kind"), node.get("id")
        if kind in ("ask", "lookup") and isinstance(node_id, str):
            keys.append(node_id)
        names = node.get("slots") if kind == "collect" else node.get("sets")
        if kind in ("collect", "lookup") and isinstance(names, dict):
            keys.extend(name for name in names if isinstance(name, str))
    return keys


def _check_ask_references(
    report: Report, node: Mapping[Any, Any], at: Sequence[str], ids: Mapping[str, int]
) -> None:
    _check_routes(report, node, at, ids, labels_key="accepts", reserved=RESERVED_NEXT_KEYS)


def _check_routes(
    report: Report,
    node: Mapping[Any, Any],
    at: Sequence[str],
    ids: Mapping[str, int],
    *,
    labels_key: str,
    reserved: Sequence[str],
    why: str = "",
) -> None:
    """An ask's or a lookup's ``next``: every label of ``labels_key`` routed, every key a
    label or one of ``reserved``, every target a node."""
    mapping = node.get(labels_key)
    targets = node.get("next")
    if not isinstance(targets, dict):
        return
    labels = (
        [label for label in mapping if isinstance(label, str)]
        if isinstance(mapping, dict)
        else None
    )
    for label in labels or ():
        if label not in targets:
            report.error(
                "label_without_next",
                f"label '{label}' has no next: add {label}: <node id> under next",
                at=(at[0], label),
                line=key_line(mapping, label),
            )
    for key, target in targets.items():
        if not isinstance(key, str):
            continue
        if labels is not None and key not in labels and key not in reserved:
            report.error(
                "next_without_label",
                f"next '{key}' is neither a label of {labels_key} nor {'/'.join(reserved)}"
                f"{did_you_mean(key, [*labels, *reserved])}: "
                f"add it to {labels_key} or fix the spelling{why}",
                at=(at[0], key),
                line=key_line(targets, key),
            )
        if isinstance(target, str) and target not in ids:
            report.error(
                "bad_target",
                f"next '{key}' goes to '{target}', which names no node"
                f"{did_you_mean(target, ids)}: point it at an existing node id",
                at=(at[0], key),
                line=key_line(targets, key),
            )


def _check_check_references(
    report: Report, node: Mapping[Any, Any], at: Sequence[str], ids: Mapping[str, int]
) -> None:
    when = node.get("when")
    items = enumerate(when) if isinstance(when, list) else iter(())
    for index, item in items:
        target = item.get("next") if isinstance(item, dict) else None
        if isinstance(target, str) and target.strip() and target not in ids:
            report.error(
                "bad_target",
                f"condition #{index + 1} goes to '{target}', which names no node"
                f"{did_you_mean(target, ids)}: point it at an existing node id",
                at=(at[0], f"when[{index}]"),
                line=key_line(item, "next"),
            )
    _check_single_target(report, node, "else", at, ids)


def _check_lookup_references(
    report: Report,
    node: Mapping[Any, Any],
    at: Sequence[str],
    ids: Mapping[str, int],
    value_keys: Sequence[str],
) -> None:
    """A lookup's ``send`` names values of the flow; its ``next`` maps each label of
    ``returns``, and may add __error__, to a node."""
    send = node.get("send")
    for index, key in enumerate(send if isinstance(send, list) else ()):
        if isinstance(key, str) and key not in value_keys:
            report.error(
                "unset_value",
                f"send names '{key}', which no node of the flow sets"
                f"{did_you_mean(key, value_keys)}: send an ask node's id, a slot's name or "
                "a key a lookup sets",
                at=(at[0], "send"),
                line=item_line(send, index),
            )
    _check_routes(
        report,
        node,
        at,
        ids,
        labels_key="returns",
        reserved=(ERROR,),
        why=f" ({ERROR} is the way out of a call that fails)",
    )


def _check_single_target(
    report: Report, node: Mapping[Any, Any], key: str, at: Sequence[str], ids: Mapping[str, int]
) -> None:
    """A tell's or collect's ``next``, a check's ``else``: a node id that names a node."""
    target = node.get(key)
    if isinstance(target, str) and target not in ids:
        report.error(
            "bad_target",
            f"{key} '{target}' names no node{did_you_mean(target, ids)}: "
            "point it at an existing node id",
            at=(*at, key),
            line=key_line(node, key),
        )


def _check_patterns(report: Report, node: Mapping[Any, Any], at: Sequence[str]) -> None:
    slots = node.get("slots")
    if not isinstance(slots, dict):
        return
    for name, spec in slots.items():
        pattern = spec.get("pattern") if isinstance(spec, dict) else None
        if not isinstance(pattern, str):
            continue
        problem = pattern_error(pattern)
        if problem is not None:
            report.error(
                "bad_pattern",
                f"pattern {shown(pattern)} of slot '{name}' cannot be used: {problem}; "
                "fix it (it must match the whole value)",
                at=(at[0], as_text(name)),
                line=key_line(spec, "pattern"),
            )
            continue
        hint = spec.get("hint") if isinstance(spec, dict) else None
        if not (isinstance(hint, str) and hint.strip()):
            report.warning(
                "pattern_without_hint",
                f"slot '{name}' has a pattern but no hint: an agent whose value is rejected "
                "can only quote the regular expression to the person; add a hint that says "
                "the format in words, with an example",
                at=(at[0], as_text(name)),
                line=key_line(spec, "pattern"),
            )
