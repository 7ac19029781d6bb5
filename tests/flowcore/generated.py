"""Seeded random flows of a given size, valid by construction, for the diagram tests.

Every node but the entry gets a parent among the nodes before it (a random tree, so
every node is reachable), then asks get extra labels to later nodes (cross edges,
some of them repeating a target: two labels to one node) and every tell or collect
without a ``next`` points at a later node. Edges only go forward: no cycle. The last
node is an end, so everything finishes.
"""

from __future__ import annotations

import random

from flowcore.flow.model import (
    UNKNOWN,
    AskNode,
    CollectNode,
    EndNode,
    Flow,
    Node,
    Slot,
    TellNode,
    frozen_mapping,
)

SAYS = (
    "決済画面に出ているエラーコードを確認する",
    "Ask which device the person uses and whether the VPN client shows an error",
    "カード会社の本人認証（3Dセキュア）の画面で失敗したかを聞く",
    "Tell them to restart",
    "注文番号を聞く",
)


def generated_flow(size: int, *, seed: int = 0, cross: float = 0.6) -> Flow:
    """A flow of ``size`` nodes ``n0``..; ``cross`` is the chance an ask gets extra labels."""
    rnd = random.Random(seed)
    kinds = ["ask"] + [
        rnd.choice(["ask", "ask", "ask", "tell", "collect", "end", "end"]) for _ in range(size - 1)
    ]
    kinds[-1] = "end"
    if size == 1:
        kinds = ["end"]
    targets: list[list[str]] = [[] for _ in range(size)]
    for i in range(1, size):
        open_parents = [
            p
            for p in range(i)
            if (kinds[p] == "ask" and len(targets[p]) < 4)
            or (kinds[p] in ("tell", "collect") and not targets[p])
        ]
        parent = rnd.choice(open_parents) if open_parents else 0
        targets[parent].append(f"n{i}")
    for i, kind in enumerate(kinds):
        later = [f"n{j}" for j in range(i + 1, size)]
        if kind in ("tell", "collect") and not targets[i]:
            targets[i].append(rnd.choice(later))
        elif kind == "ask":
            if not targets[i] or rnd.random() < cross:
                targets[i] += rnd.sample(later, min(len(later), rnd.randint(1, 2)))
    nodes: list[Node] = []
    for i, kind in enumerate(kinds):
        node_id, say = f"n{i}", f"{SAYS[i % len(SAYS)]} ({i})"
        if kind == "end":
            nodes.append(EndNode(node_id, say, rnd.choice(["resolved", "escalated"])))
        elif kind == "tell":
            nodes.append(TellNode(node_id, say, targets[i][0]))
        elif kind == "collect":
            slots = (Slot(f"s{i}a", "ask a", required=True), Slot(f"s{i}b", "ask b"))
            nodes.append(CollectNode(node_id, say, slots, targets[i][0]))
        else:
            labels = [f"l{j}" for j in range(len(targets[i]))]
            nexts = dict(zip(labels, targets[i], strict=True))
            if rnd.random() < 0.3:
                nexts[UNKNOWN] = rnd.choice(targets[i])  # often a second label to one target
            accepts = {label: f"when {label}" for label in labels}
            nodes.append(AskNode(node_id, say, frozen_mapping(accepts), frozen_mapping(nexts)))
    return Flow(
        id=f"generated_{size}",
        title=f"Generated flow of {size} nodes",
        category="test",
        entry="n0",
        nodes=frozen_mapping({n.id: n for n in nodes}),
    )
