"""Warnings that need a built Flow: ``unfoldable``, judged by the engine's own fold planner,
and ``similar_labels``, judged by the engine's own matching rule."""

from __future__ import annotations

from collections.abc import Mapping

from flowcore.flow.findings import Finding
from flowcore.flow.folding import Unfoldable, plan_fold
from flowcore.flow.labels import normal_form, similar_pairs
from flowcore.flow.lint.common import Report
from flowcore.flow.model import UNKNOWN, AskNode, CollectNode, Flow


def lint_flow(
    flow: Flow, *, file: str | None = None, lines: Mapping[str, int] | None = None
) -> list[Finding]:
    """``unfoldable`` and ``similar_labels`` warnings for a lint-clean Flow.

    ``lines`` maps node ids to their line. Never raises.
    """
    report = Report(flow.id, file)
    lines = lines or {}
    for node in flow.nodes.values():
        if isinstance(node, AskNode):
            for a, b in similar_pairs(node.accepts):
                report.warning(
                    "similar_labels",
                    _similar_message(node, a, b),
                    at=(node.id, b),
                    line=lines.get(node.id),
                )
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
    else:
        why = f"a branch reaches collect node {exc.at}, which is never folded"
    return (
        f"under on_unknown: broaden, an unknown answer at {node.id} stalls the run: {why}. "
        "Add a __unknown__ route to next, or set on_unknown: escalate"
    )


def _similar_message(node: AskNode, a: str, b: str) -> str:
    if normal_form(a) == normal_form(b):
        why = (
            "are one label to the matching rule (case, spaces, _ and - aside): a value "
            "sent in another form than either is taken as neither"
        )
    else:
        why = (
            "differ by a slip (a character missing, extra, wrong or swapped): a slip on one "
            "can be the other, which is taken as sent"
        )
    return f"labels '{a}' and '{b}' of {node.id} {why}. Rename one so that they differ more"
