"""A check's conditions: CEL expressions over a run's values and the step's date.

CEL (the Common Expression Language) is evaluated by Google's own runtime,
``cel-expr-python`` (ADR 0117), whose type checker refuses, before any run, an
expression that names an unknown key or compares across types. Everything here is
pure: the date is given, never read from a clock.

Two departures from plain CEL, both written into the expression before it is compiled,
so that an author writes the names of the flow: ``has(email)`` (CEL's ``has`` takes only
a field, ``has(m.f)``) is ``has(__set.email)``, a map of the keys the run holds; and a
``date`` slot and ``today`` are timestamps at midnight UTC (CEL has no date type), so
``order_date < today - duration('720h')`` reads as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from cel_expr_python import cel  # type: ignore[import-untyped]

from flowcore.common.cache import BoundedCache
from flowcore.common.limits import CEL_ENVIRONMENTS, CONDITIONS_COMPILED
from flowcore.flow.model import UNKNOWN, Value

TODAY = "today"
# The map ``has(key)`` reads; its name begins with ``__``, which no key of a flow may.
_SET = "__set"
ENGINE = "cel-expr-python"

# CEL's type of a value of each kind of key: an ask's label and a text or choice slot are
# strings, a date slot a timestamp (see the module's docstring).
_CEL_TYPES = {
    "label": cel.Type.STRING,
    "text": cel.Type.STRING,
    "choice": cel.Type.STRING,
    "number": cel.Type.DOUBLE,
    "integer": cel.Type.INT,
    "boolean": cel.Type.BOOL,
    "date": cel.Type.TIMESTAMP,
}
# A key's kind as ``_CEL_TYPES`` names it, for every key a flow's conditions may read.
KeyTypes = Mapping[str, str]

_TOKEN = re.compile(
    r"""(?P<string>[rRbB]{0,2}(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"
        |'(?:\\.|[^\\'\n])*'|"(?:\\.|[^\\"\n])*"))
    |(?P<name>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<other>\S)""",
    re.VERBOSE | re.DOTALL,
)


class ConditionError(ValueError):
    """A condition that cannot be compiled; ``str()`` says why, in CEL's words."""


@dataclass(frozen=True)
class Reads:
    """The names a condition reads: ``names`` in order of first use, ``guarded`` those
    only asked about with ``has()`` or read where ``has()`` names them too."""

    names: tuple[str, ...]
    guarded: frozenset[str]


def _tokens(expression: str) -> Iterator[tuple[str, str]]:
    for match in _TOKEN.finditer(expression):
        kind = match.lastgroup
        assert kind is not None
        yield kind, match.group()


def reads(expression: str, keys: frozenset[str]) -> Reads:
    """The keys of ``keys`` (and ``today``) that ``expression`` reads.

    A name counts unless it follows a ``.`` (a field or method) or comes before a ``(``
    (a function): the names left are variables, and the flow's keys are its only ones.

    >>> keys = frozenset({"email", "country"})
    >>> r = reads("has(email) && email.endsWith('.de') || size(country) > 0", keys)
    >>> r.names, sorted(r.guarded)
    (('email', 'country'), ['email'])
    """
    tokens = list(_tokens(expression))
    names: dict[str, None] = {}
    guarded: set[str] = set()
    for i, (kind, text) in enumerate(tokens):
        if kind != "name" or (text not in keys and text != TODAY):
            continue
        before = tokens[i - 1][1] if i else ""
        after = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if before == "." or after == "(":
            continue
        names[text] = None
        if i >= 2 and tokens[i - 2][1] == "has" and before == "(" and after == ")":
            guarded.add(text)
    return Reads(tuple(names), frozenset(guarded))


def as_cel(expression: str) -> str:
    """``expression`` as CEL compiles it: ``has(key)`` becomes ``has(__set.key)``.

    >>> as_cel("has(email) && email == 'has(x)'")
    "has(__set.email) && email == 'has(x)'"
    """
    out: list[str] = []
    last = 0
    tokens = [(m.lastgroup, m.group(), m.start(), m.end()) for m in _TOKEN.finditer(expression)]
    for i in range(len(tokens) - 3):
        (_, has, _, _), (_, op, _, _), (kind, name, start, end), (_, close, _, _) = tokens[
            i : i + 4
        ]
        before = tokens[i - 1][1] if i else ""
        if has == "has" and op == "(" and kind == "name" and close == ")" and before != ".":
            out.append(expression[last:start])
            out.append(f"{_SET}.{name}")
            last = end
    out.append(expression[last:])
    return "".join(out)


class _Envs:
    """One CEL environment per set of key types (making one costs microseconds, but the
    first costs a tenth of a second), and each compiled condition, kept by its text; both
    bounded, since drafts bring flows of any shape."""

    def __init__(self) -> None:
        self.envs: BoundedCache[tuple[tuple[str, str], ...], Any] = BoundedCache(CEL_ENVIRONMENTS)
        self.compiled: BoundedCache[tuple[tuple[tuple[str, str], ...], str], Any] = BoundedCache(
            CONDITIONS_COMPILED
        )

    def env(self, types: tuple[tuple[str, str], ...]) -> Any:
        found = self.envs.get(types)
        if found is None:
            variables = {name: _CEL_TYPES[kind] for name, kind in types}
            variables[TODAY] = cel.Type.TIMESTAMP
            variables[_SET] = cel.Type.Map(cel.Type.STRING, cel.Type.BOOL)
            found = self.envs.put(types, cel.NewEnv(variables=variables))
        return found

    def compile(self, types: tuple[tuple[str, str], ...], expression: str) -> Any:
        key = (types, expression)
        found = self.compiled.get(key)
        if found is not None:
            return found
        try:
            program = self.env(types).compile(as_cel(expression))
        except RuntimeError as exc:
            raise ConditionError(_cel_message(str(exc))) from None
        if program.return_type() != cel.Type.BOOL:
            raise ConditionError(
                f"it gives a {program.return_type().name().lower()}, not true or false"
            )
        return self.compiled.put(key, program)


_ENVS = _Envs()


def _cel_message(text: str) -> str:
    """CEL's error without its status prefix and with the caret lines folded into one.

    >>> _cel_message("INVALID_ARGUMENT: ERROR: <input>:1:7: no overload\\n | a\\n | ^")
    'column 7: no overload'
    """
    first = text.split("\n", 1)[0]
    first = re.sub(r"^[A-Z_]+: ERROR: <input>:\d+:(\d+): ", r"column \1: ", first)
    first = first.replace(f"{_SET}.", "").replace(" [INVALID_ARGUMENT]", "")
    return first.replace(" (in container '')", "")


def _signature(types: KeyTypes) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(types.items()))


def check(expression: str, types: KeyTypes) -> None:
    """Raise ConditionError unless ``expression`` compiles, over keys of ``types``, to a
    condition (true or false)."""
    _ENVS.compile(_signature(types), expression)


def always_holds(expression: str, types: KeyTypes) -> bool:
    """Whether ``expression`` holds whatever the values and the date: it reads neither,
    and holds."""
    if reads(expression, frozenset(types)).names:
        return False
    program = _ENVS.compile(_signature(types), expression)
    result = program.eval(data={_SET: {}})
    return result.type() == cel.Type.BOOL and result.value() is True


def _bound(kind: str, value: Value) -> object | None:
    """A recorded value as CEL reads it; None when it is no value of its key's type (the
    person did not know it)."""
    if value == UNKNOWN:
        return None
    if kind == "date":
        if not isinstance(value, str):
            return None
        try:
            day = date.fromisoformat(value)
        except ValueError:
            return None
        return datetime(day.year, day.month, day.day, tzinfo=UTC)
    if kind in ("label", "text", "choice"):
        return value if isinstance(value, str) else None
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if kind == "integer":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if kind == "number":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return float(value) if ok else None
    return None


def holds(
    expression: str, types: KeyTypes, values: Mapping[str, Value], today: date | None
) -> bool:
    """Whether ``expression`` holds over ``values`` on ``today``.

    A key without a value (or valued ``__unknown__``) is unbound: ``has()`` says false, and
    reading it is an error. A condition whose evaluation ends in an error (an unbound
    value, a division by zero, an overflow) does not hold: the check goes on to its next
    condition, and at worst to ``else``.
    """
    program = _ENVS.compile(_signature(types), expression)
    data: dict[str, object] = {}
    for key, kind in types.items():
        if key in values:
            bound = _bound(kind, values[key])
            if bound is not None:
                data[key] = bound
    data[_SET] = dict.fromkeys(data, True)
    if today is not None:
        data[TODAY] = datetime(today.year, today.month, today.day, tzinfo=UTC)
    result = program.eval(data=data)
    return result.type() == cel.Type.BOOL and result.value() is True
