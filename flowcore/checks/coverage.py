"""Coverage: the share of a flow's nodes and edges that scenario runs take.

The edges are exactly those the engine can take (``paths.FlowMoves.edges``): every
label of an ask, its ``__other__`` and ``__unknown__`` routes, each tell's and
collect's ``next``, each condition of a check and its ``else``, each label of a lookup
and its ``__error__``, and the fold of every ask that can fold. So 100% is always
reachable, and an edge never taken is a path nobody has tried.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from flowcore.flow.model import Flow
from flowcore.run.paths import Edge, FlowMoves, edge_of
from flowcore.run.state import RunState


@dataclass(frozen=True)
class Share:
    taken: int
    total: int

    def percent(self) -> str:
        """Rounded down to a tenth, so 100% means every one.

        >>> Share(2, 3).percent(), Share(0, 0).percent(), Share(399, 400).percent()
        ('66.6%', '100%', '99.7%')
        """
        if self.total == 0:
            return "100%"
        tenths = self.taken * 1000 // self.total
        whole, tenth = divmod(tenths, 10)
        return f"{whole}%" if tenth == 0 else f"{whole}.{tenth}%"

    def at_least(self, percent: float) -> bool:
        return self.total == 0 or self.taken * 100 >= percent * self.total

    def __str__(self) -> str:
        return f"{self.percent()} ({self.taken}/{self.total})"


@dataclass(frozen=True)
class Coverage:
    nodes: tuple[str, ...]
    nodes_taken: frozenset[str]
    edges: tuple[Edge, ...]
    edges_taken: frozenset[tuple[str, str]]

    @property
    def node_share(self) -> Share:
        return Share(sum(1 for n in self.nodes if n in self.nodes_taken), len(self.nodes))

    @property
    def edge_share(self) -> Share:
        return Share(
            sum(1 for e in self.edges if (e.node, e.key) in self.edges_taken), len(self.edges)
        )

    @property
    def missed_edges(self) -> list[Edge]:
        return [e for e in self.edges if (e.node, e.key) not in self.edges_taken]

    def at_least(self, percent: float) -> bool:
        return self.node_share.at_least(percent) and self.edge_share.at_least(percent)


def coverage_of(moves: FlowMoves, states: Iterable[RunState]) -> Coverage:
    """The nodes and edges taken by runs that went through ``states`` (any order).

    A node is taken when a run passed it, waits at it, stalled at it or ended there;
    an edge when a run passed its node along it (history undone by ``back`` counts:
    the run did take it).
    """
    flow: Flow = moves.flow
    nodes: set[str] = set()
    edges: set[tuple[str, str]] = set()
    for state in states:
        if state.node is not None:
            nodes.add(state.node)
        for entry in state.path:
            if entry.via == "back":
                continue
            nodes.add(entry.id)
            edge = edge_of(flow, entry)
            if edge is not None:
                edges.add((entry.id, edge))
    return Coverage(
        nodes=tuple(flow.nodes),
        nodes_taken=frozenset(nodes),
        edges=tuple(moves.edges()),
        edges_taken=frozenset(edges),
    )
