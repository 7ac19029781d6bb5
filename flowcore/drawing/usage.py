"""How a flow is used: per node and edge, how many runs passed, stalled or waited there,
and which answers fell outside its labels (where the procedure leaks). Pure.

Runs are matched to the flow by node id, so runs on an earlier version of the flow
count on the nodes it still has.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from flowcore.drawing.run_view import EdgeKey, edge_keys, run_view
from flowcore.flow.model import UNKNOWN, AskNode, Flow
from flowcore.run.state import RunState

LeakKind = Literal["rejected", "other", "unknown"]
LEAK_WORDS: Mapping[LeakKind, str] = {
    "rejected": "rejected as unmatched",
    "other": "sent on by __other__",
    "unknown": "not known (__unknown__)",
}
# What a rejected value is shown as when it is not a label (a slot value may be personal data).
SLOT_VALUE = "(a slot value)"
# What an answer in a person's own words at a personal ask node is shown as.
PERSONAL_ANSWER = "(a personal answer)"

_REACHED = frozenset({"answered", "prefilled", "told", "folded", "current", "stalled", "completed"})


@dataclass(frozen=True)
class NodeUsage:
    reached: int = 0  # runs that reached the node (passed it, or stopped at it)
    waiting: int = 0  # active runs waiting there now
    stalled: int = 0  # runs handed to a person there
    completed: int = 0  # runs that ended there
    leaks: int = 0  # answers outside the node's labels (rejected, __other__, __unknown__)

    def note(self) -> str:
        """A short text for the diagram, most telling first: ``"12 runs, 3 stalled, 2 off"``
        ("off": answers outside the node's labels). A narrow box clips it; the flow page's
        tables hold every number."""
        if not self.reached and not self.leaks:
            return ""
        parts = [f"{self.reached} run{'' if self.reached == 1 else 's'}"]
        if self.stalled:
            parts.append(f"{self.stalled} stalled")
        if self.leaks:
            parts.append(f"{self.leaks} off")
        if self.waiting:
            parts.append(f"{self.waiting} waiting")
        return ", ".join(parts)


@dataclass(frozen=True)
class Leak:
    node: str
    label: str
    kind: LeakKind
    count: int

    @property
    def how(self) -> str:
        return LEAK_WORDS[self.kind]


@dataclass(frozen=True)
class FlowUsage:
    runs: int
    nodes: Mapping[str, NodeUsage] = field(default_factory=dict)
    edges: Mapping[EdgeKey, int] = field(default_factory=dict)
    leaks: tuple[Leak, ...] = ()

    def node_notes(self) -> dict[str, str]:
        return {nid: note for nid, usage in self.nodes.items() if (note := usage.note())}

    def edge_notes(self, flow: Flow) -> dict[EdgeKey, str]:
        """Every edge of ``flow`` with its count, 0 included: labels sharing a drawn edge
        each show their own ("timeout 1", "__unknown__ 0")."""
        return {edge: str(self.edges.get(edge, 0)) for edge in edge_keys(flow)}

    def stalls(self) -> list[tuple[str, int]]:
        found = [(nid, u.stalled) for nid, u in self.nodes.items() if u.stalled]
        return sorted(found, key=lambda item: -item[1])


def flow_usage(
    flow: Flow,
    states: Iterable[RunState],
    rejected: Iterable[tuple[str, str | None, int]] = (),
    *,
    top: int = 20,
) -> FlowUsage:
    """Aggregate runs of ``flow``: ``states`` are the runs' current states; ``rejected``
    holds ``(node, label or None, count)`` for answers refused as unmatched (None: a
    value that was not a choice, such as a slot value). ``top`` bounds the leak list.
    """
    counts: dict[str, Counter[str]] = {nid: Counter() for nid in flow.nodes}
    edges: Counter[EdgeKey] = Counter()
    leaks: Counter[tuple[str, str, LeakKind]] = Counter()
    runs = 0
    for state in states:
        runs += 1
        view = run_view(flow, state)
        for nid, node_state in view.node_states.items():
            if node_state in _REACHED:
                counts[nid]["reached"] += 1
            if node_state == "current" and state.state == "active":
                counts[nid]["waiting"] += 1
            elif node_state == "stalled":
                counts[nid]["stalled"] += 1
            elif node_state == "completed":
                counts[nid]["completed"] += 1
        edges.update(view.taken)
        for entry in state.effective_path():
            node = flow.nodes.get(entry.id)
            if not isinstance(node, AskNode) or entry.value is None:
                continue
            if entry.value == UNKNOWN:
                leaks[(entry.id, UNKNOWN, "unknown")] += 1
            elif entry.value not in node.accepts:
                words = PERSONAL_ANSWER if node.personal else entry.value
                leaks[(entry.id, words, "other")] += 1
        # A run stalled on "not known" keeps __unknown__ as the value of the node it stopped at.
        if state.node in flow.nodes and state.values.get(state.node or "") == UNKNOWN:
            leaks[(state.node or "", UNKNOWN, "unknown")] += 1
    for node_id, label, count in rejected:
        if node_id in flow.nodes and count > 0:
            node = flow.nodes[node_id]
            if label is None:
                label = SLOT_VALUE
            elif isinstance(node, AskNode) and node.personal:
                label = PERSONAL_ANSWER
            leaks[(node_id, label, "rejected")] += count
    for (nid, _, _), count in leaks.items():
        counts[nid]["leaks"] += count
    order = {nid: i for i, nid in enumerate(flow.nodes)}
    ranked = sorted(leaks.items(), key=lambda item: (-item[1], order[item[0][0]]))
    return FlowUsage(
        runs=runs,
        nodes={nid: NodeUsage(**c) for nid, c in counts.items()},
        edges=dict(edges),
        leaks=tuple(Leak(nid, label, kind, n) for (nid, label, kind), n in ranked[:top]),
    )


@dataclass(frozen=True)
class VersionStats:
    """How the runs of one version of a flow went, for comparing versions side by side:
    runs started, waiting now, completed by outcome, stalled, closed, folded, and answers
    that fell outside the labels (unmatched), per node."""

    started: int = 0
    active: int = 0
    completed: Mapping[str, int] = field(default_factory=dict)
    stalled: int = 0
    closed: int = 0
    folds: int = 0
    unmatched: Mapping[str, int] = field(default_factory=dict)

    @property
    def completed_total(self) -> int:
        return sum(self.completed.values())

    @property
    def stalled_share(self) -> str:
        """Stalled runs as a share of those started ("12%"; "—" without runs).

        >>> VersionStats(started=8, stalled=1).stalled_share
        '12%'
        """
        return f"{100 * self.stalled // self.started}%" if self.started else "—"


def version_stats(
    states: Iterable[RunState], rejected: Iterable[tuple[str, str | None, int]] = ()
) -> VersionStats:
    """Sum up the runs of one version (``states``, their current states) and its answers
    refused as unmatched (``rejected``: ``(node, label or None, count)``).

    >>> done = RunState(state="completed", node="n_end", outcome="ok")
    >>> stats = version_stats([done, RunState(state="stalled", node="n_a")], [("n_a", "x", 2)])
    >>> stats.started, dict(stats.completed), stats.stalled, dict(stats.unmatched)
    (2, {'ok': 1}, 1, {'n_a': 2})
    """
    outcomes: Counter[str] = Counter()
    by_state: Counter[str] = Counter()
    folds = started = 0
    for state in states:
        started += 1
        by_state[state.state] += 1
        if state.state == "completed":
            outcomes[state.outcome or "(folded, no outcome)"] += 1
        if state.folded or any(e.via == "folded" for e in state.path):
            folds += 1
    unmatched: Counter[str] = Counter()
    for node_id, _, count in rejected:
        unmatched[node_id] += count
    return VersionStats(
        started=started,
        active=by_state["active"],
        completed=dict(outcomes.most_common()),
        stalled=by_state["stalled"],
        closed=by_state["closed"],
        folds=folds,
        unmatched=dict(unmatched.most_common()),
    )
