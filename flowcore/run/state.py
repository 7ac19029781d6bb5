"""A run's state: everything the engine needs to continue it, as plain data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from flowcore.flow.model import NodeKind, Value, frozen_mapping

_VIA = itemgetter(2)  # PathEntry.via, read without a Python-level call
_NOTHING: MappingProxyType[Any, Any] = MappingProxyType({})

RunStateName = Literal["active", "completed", "stalled", "closed"]
Via = Literal["asked", "skipped", "told", "folded", "back", "person", "check", "lookup"]


class PathEntry(NamedTuple):
    """One node the run passed (or, with ``via == "back"``, the node it went back to; or,
    last on a stalled run's path, the node where it stalled, with ``__unknown__``).

    A named tuple rather than a frozen dataclass, like RunState: the engine makes one
    per node passed, and a tuple is built without a Python-level ``__init__``.
    """

    id: str
    kind: NodeKind
    via: Via
    value: str | None = None
    # A check's entry: the values its conditions read, in the order they were read, as
    # (key, value) pairs, a tuple so that the entry stays hashable; ``today`` as
    # YYYY-MM-DD, and None for a key without a value. A lookup's: the values it sent.
    read: tuple[tuple[str, Value | None], ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "via": self.via}
        if self.value is not None:
            out["value"] = self.value
        if self.read is not None:
            out["read"] = dict(self.read)
        return out

    def stored(self) -> list[Any]:
        """How a run's stored state holds the entry: ``[id, kind, via]`` and the value
        when there is one (a run passes tens of nodes: no key is repeated in each), and
        for a check the values it read."""
        if self.read is not None:
            return [self.id, self.kind, self.via, self.value, dict(self.read)]
        if self.value is None:
            return [self.id, self.kind, self.via]
        return [self.id, self.kind, self.via, self.value]

    @classmethod
    def from_stored(cls, entry: Sequence[Any] | Mapping[str, Any]) -> PathEntry:
        """Inverse of ``stored``; runs stored before it hold ``to_dict``'s mappings."""
        if isinstance(entry, Mapping):
            entry = [entry.get(k) for k in cls._fields]
        read = entry[4] if len(entry) > 4 else None
        value = entry[3] if len(entry) > 3 else None
        return cls(
            entry[0], entry[1], entry[2], value, None if read is None else tuple(read.items())
        )


class RunState(NamedTuple):
    """Everything the engine needs to continue a run; plain data, JSON-friendly.

    ``path`` is the full history (``back`` appends a marker, it never erases);
    ``stamps`` hold, per value, how long the effective path was when the value was
    recorded, which is what ``back`` needs to restore a node's first arrival exactly;
    ``passed`` is how long the effective path is (``len(effective_path())``): runs are
    stored with it and the replay compares it like any other field, so the engine sets it
    on every state it makes (None is a state built by hand). ``rules`` is the version of
    the engine's decision rules the run was started under (``engine.RULES``): a run
    decides by them to its end, and ``verify`` replays it by them.

    Immutable: a named tuple of read-only mappings and tuples (the engine makes one per
    call, and a frozen dataclass's ``__init__`` alone cost 2 µs of a 16 µs
    transition). Change one with ``_replace``.
    """

    state: RunStateName
    node: str | None
    values: MappingProxyType[str, Value] = _NOTHING
    stamps: MappingProxyType[str, int] = _NOTHING
    unmatched: MappingProxyType[str, int] = _NOTHING
    path: tuple[PathEntry, ...] = ()
    outcome: str | None = None
    folded: bool = False
    handoff: str | None = None
    passed: int | None = None
    # Runs stored before the field decided by the first rules.
    rules: int = 1

    def effective_path(self) -> list[PathEntry]:
        """The nodes the run has passed, with every ``back`` applied."""
        # A stalled run's path ends with the node where it stalled, which it has not
        # passed. No other entry can name the run's own node: a run waits at or ends on a
        # node it has not passed, and ``back``'s own entry says ``via: back``.
        path = self.path
        if path and path[-1].id == self.node and path[-1].via != "back":
            path = path[:-1]
        if "back" not in map(_VIA, path):
            return list(path)  # the common case: nothing to undo
        passed: list[PathEntry] = []
        for entry in path:
            if entry.via != "back":
                passed.append(entry)
                continue
            for i, earlier in enumerate(passed):
                if earlier.id == entry.id:
                    del passed[i:]
                    break
        return passed

    def to_dict(self) -> dict[str, object]:
        """The stored form (``Run.engine_state``): a field at its default is left out,
        and path entries are lists (``PathEntry.stored``)."""
        out: dict[str, object] = {"state": self.state, "node": self.node}
        if self.values:
            out["values"] = dict(self.values)
        if self.stamps:
            out["stamps"] = dict(self.stamps)
        if self.unmatched:
            out["unmatched"] = dict(self.unmatched)
        if self.path:
            out["path"] = [e.stored() for e in self.path]
        if self.outcome is not None:
            out["outcome"] = self.outcome
        if self.folded:
            out["folded"] = True
        if self.handoff is not None:
            out["handoff"] = self.handoff
        if self.passed:
            out["passed"] = self.passed
        if self.rules != 1:
            out["rules"] = self.rules
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunState:
        """Inverse of ``to_dict``; ``data`` comes from our own storage. A state stored
        without ``passed`` (at 0, or stored before the field) has it counted."""
        state = cls(
            state=data["state"],
            node=data.get("node"),
            values=frozen_mapping(data.get("values") or {}),
            stamps=frozen_mapping(data.get("stamps") or {}),
            unmatched=frozen_mapping(data.get("unmatched") or {}),
            path=tuple(map(PathEntry.from_stored, data.get("path") or ())),
            outcome=data.get("outcome"),
            folded=bool(data.get("folded")),
            handoff=data.get("handoff"),
            passed=data.get("passed"),
            rules=data.get("rules", 1),
        )
        if state.passed is None:
            return state._replace(passed=len(state.effective_path()))
        return state
