"""Graph algorithms over a flow's successor map (node id -> ids it can go to).

One home for them: lint uses reachability and cycles, folding uses
post-dominators. Nothing here knows what a node is; callers pass plain mappings
of ids.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence


def topological_order(succ: Mapping[str, Sequence[str]]) -> list[str]:
    """Nodes so that every edge goes forward. Raises ValueError on a cycle.

    >>> topological_order({"a": ["b", "c"], "b": ["c"], "c": []})
    ['a', 'b', 'c']
    """
    done: set[str] = set()
    active: set[str] = set()
    postorder: list[str] = []
    for root in succ:
        if root in done:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        active.add(root)
        while stack:
            node, i = stack[-1]
            children = succ[node]  # only nodes of succ are ever pushed
            if i < len(children):
                stack[-1] = (node, i + 1)
                child = children[i]
                if child in active:
                    raise ValueError(f"cycle through {child}")
                if child not in done and child in succ:
                    active.add(child)
                    stack.append((child, 0))
            else:
                stack.pop()
                active.discard(node)
                done.add(node)
                postorder.append(node)
    return postorder[::-1]


def immediate_postdominators(succ: Mapping[str, Sequence[str]]) -> dict[str, str | None]:
    """For each node of an acyclic graph, the nearest node every path to an exit passes.

    Nodes without successors lead to a virtual exit; ``None`` means only that exit
    post-dominates the node.

    The nearest one is where the successors' chains of immediate post-dominators meet;
    walking up those chains builds no set of post-dominators, so the work stays linear
    for the chains flows have.

    >>> ipdom = immediate_postdominators({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []})
    >>> ipdom["a"], ipdom["b"], ipdom["d"]
    ('d', 'd', None)
    """
    ipdom: dict[str, str | None] = {}
    # How many nodes the chain node, ipdom[node], ipdom[ipdom[node]] ... holds.
    height: dict[str, int] = {}
    for node in reversed(topological_order(succ)):
        children = [child for child in succ[node] if child in height]  # nodes of the graph
        common: str | None = children[0] if children else None
        for child in children[1:]:
            if common is None:
                break  # only the exit is common: nothing nearer can be
            common = _meet(common, child, ipdom, height)
        ipdom[node] = common
        height[node] = 1 if common is None else height[common] + 1
    return ipdom


def _meet(a: str, b: str, ipdom: Mapping[str, str | None], height: Mapping[str, int]) -> str | None:
    """The first node the chains from ``a`` and ``b`` share (None: only the exit)."""
    first: str | None = a
    while first is not None and first != b:
        if height[first] < height[b]:
            first, b = b, first
        first = ipdom[first]
    return first


def reachable(succ: Mapping[str, Sequence[str]], starts: Iterable[str]) -> set[str]:
    """Every node reachable from ``starts`` (``starts`` included).

    >>> sorted(reachable({"a": ["b"], "b": [], "c": ["a"]}, ["a"]))
    ['a', 'b']
    """
    seen = set(starts)
    stack = list(seen)
    while stack:
        for child in succ.get(stack.pop(), ()):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return seen


def strongly_connected(succ: Mapping[str, Sequence[str]], order: Sequence[str]) -> list[list[str]]:
    """Strongly connected components (iterative Tarjan), each sorted in ``order``.

    >>> strongly_connected({"a": ["b"], "b": ["a", "c"], "c": []}, ["a", "b", "c"])
    [['c'], ['a', 'b']]
    """
    position = {node: i for i, node in enumerate(order)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def open_node(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)

    for root in order:
        if root in index:
            continue
        open_node(root)
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, i = work[-1]
            children = succ.get(node, ())
            if i < len(children):
                work[-1] = (node, i + 1)
                child = children[i]
                if child not in index:
                    open_node(child)
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component, key=position.__getitem__))
    return components


def cycle_path(succ: Mapping[str, Sequence[str]], component: set[str], start: str) -> list[str]:
    """The shortest path start → ... → start inside one cyclic component.

    >>> cycle_path({"a": ["b"], "b": ["a"]}, {"a", "b"}, "a")
    ['a', 'b', 'a']
    """
    parent: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in succ[node]:
            if child == start:
                path = [node]
                while (previous := parent[path[-1]]) is not None:
                    path.append(previous)
                return [*reversed(path), start]
            if child in component and child not in parent:
                parent[child] = node
                queue.append(child)
    return [start, start]
