"""Typed slots (ADR 0116): whether a value fits a slot's ``type``, and the JSON value a
run records for it.

``fit`` is the one judge, called wherever a value for a slot arrives: an agent's answer,
values given in advance, a person's answer. A later expression reads the recorded value
as it is (an ``int``, a ``float``, a ``bool``, a label) or, for a date, through
``date.fromisoformat``.
"""

from __future__ import annotations

import math
import re
from datetime import date
from decimal import Decimal
from typing import get_args

from flowcore.common.limits import MAX_DIGITS
from flowcore.flow.labels import normal_form
from flowcore.flow.model import TEXT, Slot, SlotType, Value

SLOT_TYPES: tuple[SlotType, ...] = get_args(SlotType)

_NUMBER_RE = re.compile(r"-?([0-9]+)(?:\.([0-9]+))?")
_INTEGER_RE = re.compile(r"-?([0-9]+)")
# date.fromisoformat alone also takes 20240331 and 2024-W13-7: the format is one form.
_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_BOOLEANS = {"true": True, "false": False, "yes": True, "no": False}


def fit(slot: Slot, text: str) -> Value | None:
    """The value ``text`` records in ``slot``, or None when it does not fit its type.

    A text slot records the text as sent; a typed one reads it with surrounding white
    space removed and records it normalized.

    >>> amount = Slot("amount", "", type="number")
    >>> fit(amount, " 12.50 "), fit(amount, "1,200"), fit(amount, "1e3")
    (12.5, None, None)
    >>> fit(Slot("paid", "", type="boolean"), "Yes"), fit(Slot("n", "", type="integer"), "007")
    (True, 7)
    >>> on = Slot("on", "", type="date")
    >>> fit(on, "2024-02-30"), fit(on, "2024-02-29"), fit(on, "2024-2-29")
    (None, '2024-02-29', None)
    >>> fit(Slot("via", "", type="choice", options=("bank_transfer", "card")), "Bank transfer")
    'bank_transfer'
    """
    if slot.type == TEXT:
        return text
    given = text.strip()
    if slot.type == "number":
        match = _NUMBER_RE.fullmatch(given)
        if match is None or _digits(match.group(1), match.group(2) or "") > MAX_DIGITS:
            return None
        return float(given) + 0.0  # + 0.0: "-0" is recorded as 0.0, not -0.0
    if slot.type == "integer":
        match = _INTEGER_RE.fullmatch(given)
        if match is None or _digits(match.group(1), "") > MAX_DIGITS:
            return None
        return int(given)
    if slot.type == "date":
        if not _DATE_RE.fullmatch(given):
            return None
        try:
            return date.fromisoformat(given).isoformat()
        except ValueError:
            return None
    if slot.type == "boolean":
        return _BOOLEANS.get(given.casefold())
    if given in slot.options:
        return given
    form = normal_form(given)
    same = [option for option in slot.options if normal_form(option) == form]
    return same[0] if len(same) == 1 else None


def _digits(whole: str, fraction: str) -> int:
    return len(whole.lstrip("0")) + len(fraction.rstrip("0"))


def describe(slot: Slot) -> str:
    """What a value of ``slot``'s type must be, naming the type with an example: the end
    of every "does not fit" a typed slot gives (an answer, values given in advance, a
    person's answer).

    >>> describe(Slot("paid_on", "", type="date"))
    'it must be a date (type date) written YYYY-MM-DD, e.g. 2024-03-31'
    """
    if slot.type == "number":
        return (
            "it must be a number (type number), digits with an optional decimal point and "
            "no thousands separators, e.g. 12.50"
        )
    if slot.type == "integer":
        return "it must be a whole number (type integer), e.g. 42"
    if slot.type == "date":
        return "it must be a date (type date) written YYYY-MM-DD, e.g. 2024-03-31"
    if slot.type == "boolean":
        return "it must be true or false (type boolean; yes and no are taken too)"
    assert slot.type == "choice", "text slots are described by their hint or pattern"
    return f"it must be one of {', '.join(slot.options)} (type choice)"


def as_text(raw: object) -> str:
    """A JSON number or boolean sent for a typed slot, as the text ``fit`` reads: how it is
    judged, and echoed when it does not fit.

    >>> as_text(True), as_text(12.5), as_text(1e-05), as_text(7)
    ('true', '12.5', '0.00001', '7')
    """
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, float) and math.isfinite(raw):
        return format(Decimal(repr(raw)), "f")
    return str(raw)


def json_fit(kind: str, raw: object) -> Value | None:
    """A JSON value an endpoint answered for a key of type ``kind`` as a run records it,
    or None: a typed key takes a JSON number or boolean as it takes their text, as an
    agent's values.

    >>> json_fit("number", 12), json_fit("boolean", "yes"), json_fit("integer", 1.5)
    (12.0, True, None)
    """
    if kind != TEXT and isinstance(raw, bool | int | float):
        raw = as_text(raw)
    if not isinstance(raw, str):
        return None
    return fit(Slot("", "", type=kind), raw)  # type: ignore[arg-type]
