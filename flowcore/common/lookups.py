"""A lookup asks a system of record (issue 45): what its endpoint may be named, and
whether the endpoint's answer fits the node that asked.

A flow names an endpoint (``call``), never a URL; the node lists the labels the answer
may take (``returns``, label to what it means) and the value keys it may fill, each with
its type (``sets``). An answer is a JSON object, ``{"label": LABEL, "values": {KEY:
VALUE}}`` with ``values`` optional, and ``answer_fits`` judges it whole: one failure in
words (``label 'x' is not one of: a, b``) is what the run's ``lookup failed: …`` says.

Whether a value fits its type is ``flowcore.flow.slot_types``'s question, a floor above
this one: the caller passes that judge in (``Fit``), as a run's engine and the server
each do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from flowcore.common.limits import (
    MAX_ECHO_LENGTH,
    MAX_LISTED,
    MAX_SLOT_VALUE_LENGTH,
)
from flowcore.common.names import ID_HELP, ID_RE
from flowcore.common.text import control_character, shown

# The types a lookup may set: a slot's, but choice (its options are a collect node's).
LOOKUP_TYPES = ("text", "number", "integer", "date", "boolean")
# The keys of an answer.
ANSWER_KEYS = ("label", "values")

# A value as a run records it (flowcore.flow.model.Value).
Scalar = str | int | float | bool
# (type, the JSON value sent) -> the value recorded, or None when it does not fit.
Fit = Callable[[str, object], Scalar | None]


@dataclass(frozen=True)
class Fitted:
    """An answer that fits: its label, and its values as the run records them."""

    label: str
    values: dict[str, Scalar]


@dataclass(frozen=True)
class Misfit:
    """An answer that does not fit, and why, in words."""

    reason: str


def endpoint_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an endpoint (None: it can).

    >>> endpoint_name_problem("crm_orders") is None, endpoint_name_problem("CRM orders")
    (True, "'CRM orders' is not a name (1 to 64 characters: lower-case letters, digits and '_')")
    """
    if ID_RE.fullmatch(name):
        return None
    return f"{shown(name)} is not a name ({ID_HELP})"


def answer_fits(
    answer: object, *, returns: Mapping[str, str], sets: Mapping[str, str], fit: Fit
) -> Fitted | Misfit:
    """``answer`` as the node takes it, or why it does not fit: its label one of
    ``returns``, each key of its values one of ``sets`` and each value fitting that key's
    type (``fit`` judges). Raises ValueError for a type of ``sets`` that is not one of
    LOOKUP_TYPES: lint's to refuse, never the endpoint's fault.

    >>> def fit(kind, raw): return raw if isinstance(raw, str) else None
    >>> answer_fits({"label": "found", "values": {"tier": "gold"}},
    ...             returns={"found": "", "missing": ""}, sets={"tier": "text"}, fit=fit)
    Fitted(label='found', values={'tier': 'gold'})
    >>> answer_fits({"label": "lost"}, returns={"found": "", "missing": ""}, sets={}, fit=fit)
    Misfit(reason="label 'lost' is not one of: found, missing")
    """
    unknown = [kind for kind in sets.values() if kind not in LOOKUP_TYPES]
    if unknown:
        raise ValueError(f"sets holds the type {unknown[0]!r}, not one of {LOOKUP_TYPES}")
    shaped = answer_shape(answer)
    if isinstance(shaped, Misfit):
        return shaped
    label, given = shaped
    if label not in returns:
        return Misfit(f"label {shown(label)} is not one of: {_listed(list(returns), quoted=False)}")
    values: dict[str, Scalar] = {}
    for key, raw in given.items():
        if key not in sets:
            may = _listed(list(sets), quoted=False) if sets else "none"
            return Misfit(f"value {shown(key)} is not one it may set (it may set: {may})")
        problem = _text_problem(raw) if isinstance(raw, str) else None
        fitted = None if problem else fit(sets[key], raw)
        if fitted is None:
            return Misfit(
                f"value {shown(key)} does not fit its type {sets[key]}: "
                f"{problem or _json_shown(raw)}"
            )
        values[key] = fitted
    return Fitted(label, values)


def answer_shape(answer: object) -> tuple[str, dict[str, object]] | Misfit:
    """``answer``'s label and values when it is shaped as an answer, whatever node asked:
    an object of ``label`` (text) and optionally ``values`` (an object), nothing else.

    >>> answer_shape({"label": "found"}), answer_shape({"label": "found", "tier": "gold"})
    (('found', {}), Misfit(reason="the answer holds 'tier' beside label and values"))
    """
    if not isinstance(answer, dict):
        return Misfit(f'the answer is {_json_kind(answer)}, not an object {{"label": …}}')
    beside = [key for key in answer if key not in ANSWER_KEYS]
    if beside:
        return Misfit(f"the answer holds {_listed(beside)} beside label and values")
    label = answer.get("label")
    if label is None:
        return Misfit("the answer has no label")
    if not isinstance(label, str):
        return Misfit(f"the label is {_json_kind(label)}, not text")
    values = answer.get("values", {})
    if not isinstance(values, dict):
        return Misfit(f"values is {_json_kind(values)}, not an object")
    return label, values


def _text_problem(text: str) -> str | None:
    """What no value of a run may be, of any type: too long, holding a control character
    other than a tab or a line break, empty, or reserved (``__unknown__``'s form)."""
    if len(text) > MAX_SLOT_VALUE_LENGTH:
        return f"{len(text)} characters, over {MAX_SLOT_VALUE_LENGTH}"
    found = control_character(text, lines=True)
    if found is not None:
        return f"it holds the control character {found[1]}"
    if not text.strip():
        return "it is empty"
    if text.strip().startswith("__"):
        return f"{shown(text)} starts with __, which only the engine's own values do"
    return None


def _json_kind(value: object) -> str:
    """What a JSON value is, with its article.

    >>> [_json_kind(v) for v in (None, True, 3, "x", [], {})]
    ['null', 'a boolean', 'a number', 'a string', 'an array', 'an object']
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _json_shown(value: object) -> str:
    """A JSON value the endpoint sent, as an error quotes it: a string quoted and cut, a
    number or a boolean as JSON writes it, an array or an object by its kind alone.

    >>> [_json_shown(v) for v in ("12,5", 1e3, True, None, [1])]
    ["'12,5'", '1000.0', 'true', 'null', 'an array']
    """
    if isinstance(value, str):
        return shown(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)[:MAX_ECHO_LENGTH]
    return _json_kind(value)


def _listed(names: list[str], *, quoted: bool = True) -> str:
    """At most MAX_LISTED names, comma-separated, and how many more."""
    head = [shown(name) if quoted else name for name in names[:MAX_LISTED]]
    more = f" and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else ""
    return ", ".join(head) + more
