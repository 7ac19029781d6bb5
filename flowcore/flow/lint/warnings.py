"""The findings that need a built Flow: ``unfoldable``, judged by the engine's own fold
planner, and those on checks' conditions (``lint/conditions.py``)."""

from __future__ import annotations

from collections.abc import Mapping

from flowcore.flow.findings import Finding
from flowcore.flow.folding import Unfoldable, plan_fold
from flowcore.flow.lint.common import Report
from flowcore.flow.lint.conditions import check_conditions
from flowcore.flow.model import UNKNOWN, AskNode, CollectNode, Flow


def lint_flow(
    flow: Flow, *, file: str | None = None, lines: Mapping[str, int] | None = None
) -> list[Finding]:
    """``unfoldable`` warnings and the findings on checks' conditions for a Flow that
    passed the other layers.

    ``lines`` maps node ids to their line (and ``node/when/N`` to a condition's). Never
    raises.
    """
    report = Report(flow.id, file)
    lines = lines or {}
    check_conditions(report, flow, lines)
    for node in flow.nodes.values():
        if isinstance(node, AskNode):
            if UNKNOWN in node.next or flow.on_unknown_at(node) != "broaden":
                continue
            try:
                plan_fold(flow, node.id)
            except Unfoldable as exc:
                report.warning(
                    "unfoldable",
                    _unfoldable_message(flow, node, exc),
                    at=(node.id,),
                    line=lines.get(node.id),
                )
        elif (
            isinstance(node, CollectNode)
            and node.required_slots
            and flow.on_unknown_at(node) == "broaden"
        ):
            report.warning(
                "unfoldable",
                f"under on_unknown: broaden, an unknown required slot at {node.id} stalls the run, "
                "because a collect is never folded: set on_unknown: escalate on it "
                "(or make its slots optional)",
                at=(node.id,),
                line=lines.get(node.id),
            )
    return report.findings


def _unfoldable_message(flow: Flow, node: AskNode, exc: Unfoldable) -> str:
    if exc.reason == "fanout":
        folded = flow.nodes[exc.at]
        count = len(folded.accepts) if isinstance(folded, AskNode) else 0
        why = f"{exc.at} has {count} labels, more than max_branch_fanout ({flow.max_branch_fanout})"
    elif exc.reason == "depth":
        why = f"a branch needs more than branch_depth ({flow.branch_depth}) steps (at {exc.at})"
    elif exc.reason in ("check", "lookup"):
        why = f"a branch reaches {exc.reason} node {exc.at}, which is never folded"
    else:
        why = f"a branch reaches collect node {exc.at}, which is never folded"
    return (
        f"under on_unknown: broaden, an unknown answer at {node.id} stalls the run: {why}. "
        "Add a __unknown__ route to next, or set on_unknown: escalate"
    )
