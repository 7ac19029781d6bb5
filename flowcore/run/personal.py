"""Values marked personal: what people without the permission to see personal values are
shown instead."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from flowcore.flow.slot_types import as_text
from flowcore.run.lookups import LOOKUPS_KEY

MASK = "••••"
# A value this long or longer keeps its last four characters (an order or card number is
# then recognisable); a shorter one keeps none (four of five characters tell too much).
SHOWN_FROM = 8


def mask(value: object) -> str:
    """``value`` masked: ``••••`` and, for a long value, its last four characters.

    >>> mask("4929123412341234"), mask("A0011")
    ('••••1234', '••••')
    """
    text = value if isinstance(value, str) else as_text(value)
    return MASK + text[-4:] if len(text) >= SHOWN_FROM else MASK


def masked_values(values: Mapping[str, Any], personal: frozenset[str]) -> dict[str, Any]:
    return {k: (mask(v) if k in personal and v is not None else v) for k, v in values.items()}


def personal_given(given: Mapping[str, Any], personal: frozenset[str], node: str) -> list[str]:
    """The personal values a step's input holds: its ``values`` of personal keys, and its
    ``choice`` when the step answered the personal ask node ``node``."""
    found = []
    values = given.get("values")
    if isinstance(values, Mapping):
        # A typed slot's JSON number or boolean is echoed as its text (slot_types.as_text).
        found += [
            as_text(v)
            for k, v in values.items()
            if k in personal and isinstance(v, str | int | float)
        ]
    if node in personal and isinstance(given.get("choice"), str):
        found.append(given["choice"])
    return [v for v in found if v]


def masked_step(
    given: Mapping[str, Any], result: Mapping[str, Any], personal: frozenset[str], node: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A step's input and result as people without the permission see them: the personal
    values of its input masked, and every echo of them in its result (``rejected``,
    ``rejected_slots``, the text of ``next``) replaced by their mask. ``node`` is the node
    the step answered (its ``node_before``).

    >>> masked_step({"values": {"dob": "1984-02-11"}}, {"next": "1984-02-11 does not fit"},
    ...             frozenset({"dob"}), "n_id")
    ({'values': {'dob': '••••2-11'}}, {'next': '••••2-11 does not fit'})
    """
    raw = personal_given(given, personal, node)
    shown = dict(given)
    if isinstance(shown.get(LOOKUPS_KEY), Mapping):
        shown[LOOKUPS_KEY] = {
            key: _answer_masked(made, personal) for key, made in shown[LOOKUPS_KEY].items()
        }
    if isinstance(shown.get("values"), Mapping):
        shown["values"] = masked_values(shown["values"], personal)
    if node in personal and isinstance(shown.get("choice"), str):
        shown["choice"] = mask(shown["choice"])
    # Longest first, so a value inside another is not masked inside the other's mask.
    swaps = [(v, mask(v)) for v in sorted(set(raw), key=len, reverse=True) if len(v) > 1]
    return shown, _replaced(result, swaps) if swaps else dict(result)


def _answer_masked(made: Any, personal: frozenset[str]) -> Any:
    """A lookup's recorded call, its answer masked whole when it sets a personal value:
    an endpoint's body is its own text, and may hold the value anywhere in it."""
    response = made.get("response") if isinstance(made, Mapping) else None
    if not isinstance(response, str):
        return made
    try:
        values = json.loads(response).get("values") or {}
    except (ValueError, AttributeError, RecursionError):
        values = {}
    if isinstance(values, Mapping) and personal.isdisjoint(values):
        return made
    return {**made, "response": MASK}


def _replaced(value: Any, swaps: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        for raw, masked in swaps:
            value = value.replace(raw, masked)
        return value
    if isinstance(value, Mapping):
        return {k: _replaced(v, swaps) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_replaced(v, swaps) for v in value]
    return value
