"""The in-memory shape of a flow: frozen, typed, built only from lint-clean YAML.

See ``docs/authoring.md`` for what each field means to a flow author.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Literal

from flowcore.common.graph import immediate_postdominators

NodeKind = Literal["ask", "tell", "collect", "check", "lookup", "end"]
OnUnknown = Literal["broaden", "escalate"]
# What a slot's value must be (ADR 0116); "text" is every slot without a ``type``.
SlotType = Literal["text", "number", "integer", "date", "boolean", "choice"]
TEXT: SlotType = "text"
# A value as a run records it, and as JSON gives it back: text, a label, a date as
# YYYY-MM-DD, or a typed slot's number (int for an integer, float for a number) or boolean.
Value = str | int | float | bool

UNKNOWN = "__unknown__"
OTHER = "__other__"
RESERVED_NEXT_KEYS = (OTHER, UNKNOWN)
# The way out of a check when no condition holds (a condition can never be written so).
ELSE = "else"
# The way out of a lookup whose call failed (a label an endpoint can never answer).
ERROR = "__error__"

DEFAULT_MAX_UNMATCHED = 3
DEFAULT_MAX_BRANCH_FANOUT = 3
DEFAULT_BRANCH_DEPTH = 2
DEFAULT_ON_UNKNOWN: OnUnknown = "escalate"
DEFAULT_ON_STUCK = (
    "The procedure cannot go on from here: take over the conversation, "
    "read the run's path and values, and decide the next step."
)


def frozen_mapping[K, V](items: Mapping[K, V] | None = None) -> MappingProxyType[K, V]:
    """A read-only view of a copy of ``items`` (insertion order kept)."""
    return MappingProxyType(dict(items or {}))


@dataclass(frozen=True)
class Slot:
    """One slot of a collect node."""

    name: str
    ask: str
    required: bool = False
    pattern: str | None = None
    hint: str | None = None
    # The value is personal data (spec §1.2): masked for people without the permission.
    personal: bool = False
    type: SlotType = TEXT
    options: tuple[str, ...] = ()  # the labels a "choice" takes, in author order


@dataclass(frozen=True)
class AskNode:
    id: str
    say: str
    accepts: MappingProxyType[str, str]  # label -> condition, in author order
    next: Mapping[str, str]  # label (or __other__/__unknown__) -> node id
    on_unknown: OnUnknown | None = None
    on_stuck: str | None = None
    # The answer is personal data (spec §1.2): masked for people without the permission.
    personal: bool = False
    # What an answer outside the labels (its __other__ route) must be, and is recorded as.
    type: SlotType = TEXT
    kind: Literal["ask"] = "ask"

    def successors(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.next.values()))


@dataclass(frozen=True)
class TellNode:
    id: str
    say: str
    next: str
    kind: Literal["tell"] = "tell"

    def successors(self) -> tuple[str, ...]:
        return (self.next,)


@dataclass(frozen=True)
class CollectNode:
    id: str
    say: str
    slots: tuple[Slot, ...]
    next: str
    on_unknown: OnUnknown | None = None
    on_stuck: str | None = None
    kind: Literal["collect"] = "collect"

    def successors(self) -> tuple[str, ...]:
        return (self.next,)

    @property
    def required_slots(self) -> tuple[Slot, ...]:
        return tuple(s for s in self.slots if s.required)


@dataclass(frozen=True)
class Branch:
    """One ``when`` of a check: where the run goes when the condition ``if_`` holds."""

    if_: str
    next: str


@dataclass(frozen=True)
class CheckNode:
    """A node the engine passes on its own (ADR 0117): the first condition of ``when``
    that holds chooses the next node, ``else`` the one when none does."""

    id: str
    say: str
    when: tuple[Branch, ...]
    else_: str
    kind: Literal["check"] = "check"

    def successors(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*(b.next for b in self.when), self.else_]))

    def edges(self) -> tuple[tuple[str, str], ...]:
        """(label, target) of each way out: a condition by its text (a repeated one once,
        since it can never hold), then ``else``; how paths, coverage and drawings name
        them."""
        edges: dict[str, str] = {}
        for branch in self.when:
            edges.setdefault(branch.if_, branch.next)
        edges[ELSE] = self.else_
        return tuple(edges.items())


@dataclass(frozen=True)
class LookupNode:
    """A node the engine passes on a system of record's answer (ADR 0119): the endpoint
    registered as ``call`` is sent the values of ``send`` and answers one label of
    ``returns`` (label -> what it means), with values for keys of ``sets`` (key -> type);
    ``next`` maps each label, and ``__error__`` when the node has a way out of a failed
    call, to a node. Without ``__error__`` a failed call stalls the run."""

    id: str
    say: str
    call: str
    send: tuple[str, ...]
    returns: MappingProxyType[str, str]  # label -> what it means, in author order
    next: Mapping[str, str]  # label (or __error__) -> node id
    sets: MappingProxyType[str, SlotType] = field(default_factory=frozen_mapping)
    on_stuck: str | None = None
    # The values it sets are personal data (spec §1.2), as a slot's may be: masked for
    # people without the permission, its recorded answers with them.
    personal: bool = False
    kind: Literal["lookup"] = "lookup"

    def successors(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.next.values()))


@dataclass(frozen=True)
class EndNode:
    id: str
    say: str
    outcome: str
    kind: Literal["end"] = "end"

    def successors(self) -> tuple[str, ...]:
        return ()


Node = AskNode | TellNode | CollectNode | CheckNode | LookupNode | EndNode


# Two words, never mixed (ADR 0069): a flow's *version* is its own ``version`` key, as its
# author wrote it ("version 2024.2"); a *revision* is one exact text of the flow, named by
# the first digits of its content hash ("revision b6ace70912ba"), which runs are pinned to.
REVISION_DIGITS = 12


def revision_name(content_hash: str) -> str:
    """How people read a content hash.

    >>> revision_name("b6ace70912ba" + "0" * 52)
    'revision b6ace70912ba'
    """
    return f"revision {content_hash[:REVISION_DIGITS]}"


def version_and_revision(version: object, content_hash: str) -> str:
    """A flow text named both ways; a flow without a ``version`` key by its revision alone.

    >>> version_and_revision("2024.2", "b6ace70912ba" + "0" * 52)
    'version 2024.2, revision b6ace70912ba'
    >>> version_and_revision("", "b6ace70912ba" + "0" * 52)
    'revision b6ace70912ba'
    """
    revision = revision_name(content_hash)
    return revision if version in (None, "") else f"version {version}, {revision}"


@dataclass(frozen=True)
class Flow:
    """A lint-clean flow. ``nodes`` keeps the author's order (used for tie-breaks)."""

    id: str
    title: str
    category: str
    entry: str
    nodes: Mapping[str, Node]
    summary: str | None = None
    version: str | int | None = None
    max_unmatched: int = DEFAULT_MAX_UNMATCHED
    max_branch_fanout: int = DEFAULT_MAX_BRANCH_FANOUT
    branch_depth: int = DEFAULT_BRANCH_DEPTH
    on_unknown: OnUnknown = DEFAULT_ON_UNKNOWN
    on_stuck: str | None = None
    # Where the flow came from; the engine never reads these.
    source: str = field(default="", compare=False, repr=False)
    content_hash: str = field(default="", compare=False)

    @cached_property
    def slot_owner(self) -> Mapping[str, str]:
        """Slot name -> id of the collect node that owns it."""
        return frozen_mapping(
            {
                s.name: n.id
                for n in self.nodes.values()
                if isinstance(n, CollectNode)
                for s in n.slots
            }
        )

    @cached_property
    def slots(self) -> Mapping[str, Slot]:
        return frozen_mapping(
            {s.name: s for n in self.nodes.values() if isinstance(n, CollectNode) for s in n.slots}
        )

    @cached_property
    def lookup_owner(self) -> Mapping[str, str]:
        """Each key a lookup may set -> the lookup node's id."""
        return frozen_mapping(
            {key: n.id for n in self.nodes.values() if isinstance(n, LookupNode) for key in n.sets}
        )

    @cached_property
    def value_keys(self) -> tuple[str, ...]:
        """Every key a run's values may hold, in author order: ask node ids and slot names,
        and a lookup's id (the label its endpoint answered) and the keys it sets."""
        keys: list[str] = []
        for n in self.nodes.values():
            if isinstance(n, AskNode):
                keys.append(n.id)
            elif isinstance(n, CollectNode):
                keys.extend(s.name for s in n.slots)
            elif isinstance(n, LookupNode):
                keys.append(n.id)
                keys.extend(n.sets)
        return tuple(keys)

    @cached_property
    def key_types(self) -> Mapping[str, str]:
        """Every value key and what it holds, as a check's condition reads it: ``label``
        for an ask or a lookup, else its slot's or its lookup's type."""
        types: dict[str, str] = {}
        for n in self.nodes.values():
            if isinstance(n, AskNode):
                # A typed ask's key holds its type: a label there is no value of it.
                types[n.id] = "label" if n.type == TEXT else n.type
            elif isinstance(n, CollectNode):
                types.update((s.name, s.type) for s in n.slots)
            elif isinstance(n, LookupNode):
                types[n.id] = "label"
                types.update(n.sets)
        return frozen_mapping(types)

    @cached_property
    def has_checks(self) -> bool:
        """Whether a run of the flow can pass a check, whose conditions may read the date."""
        return any(isinstance(n, CheckNode) for n in self.nodes.values())

    @cached_property
    def waiting_nodes(self) -> tuple[str, ...]:
        """Ids of the nodes a run can wait at (ask and collect), in author order."""
        return tuple(n.id for n in self.nodes.values() if isinstance(n, AskNode | CollectNode))

    @cached_property
    def personal_keys(self) -> frozenset[str]:
        """The value keys marked ``personal: true``: ask node ids, slot names, and the keys a
        lookup marked so sets (spec §1.2)."""
        keys: set[str] = set()
        for n in self.nodes.values():
            if isinstance(n, AskNode) and n.personal:
                keys.add(n.id)
            elif isinstance(n, CollectNode):
                keys.update(s.name for s in n.slots if s.personal)
            elif isinstance(n, LookupNode) and n.personal:
                keys.update(n.sets)
        return frozenset(keys)

    @cached_property
    def has_lookups(self) -> bool:
        """Whether a run of the flow can reach a lookup, which calls out of the server."""
        return any(isinstance(n, LookupNode) for n in self.nodes.values())

    def owner_of(self, key: str) -> str | None:
        """The node a value key belongs to: the ask or lookup node itself, a slot's
        collect, or the lookup that sets it."""
        node = self.nodes.get(key)
        if isinstance(node, AskNode | LookupNode):
            return key
        return self.slot_owner.get(key) or self.lookup_owner.get(key)

    def on_unknown_at(self, node: AskNode | CollectNode) -> OnUnknown:
        return node.on_unknown or self.on_unknown

    def handoff_at(self, node: Node) -> str:
        own = node.on_stuck if isinstance(node, AskNode | CollectNode | LookupNode) else None
        return own or self.on_stuck or DEFAULT_ON_STUCK

    @cached_property
    def successors(self) -> Mapping[str, tuple[str, ...]]:
        """Node id -> the ids its ``next`` leads to (each once, in author order)."""
        return frozen_mapping({nid: node.successors() for nid, node in self.nodes.items()})

    @cached_property
    def ipdom(self) -> Mapping[str, str | None]:
        """Node id -> its immediate post-dominator (None: only the virtual exit)."""
        return frozen_mapping(immediate_postdominators(self.successors))

    @property
    def display_summary(self) -> str:
        return self.summary or self.title


@dataclass(frozen=True)
class Category:
    id: str
    title: str
    description: str = ""
