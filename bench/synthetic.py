"""A realistic 40-node flow for the bench, and a directory of many of them.

The shape: ten asks in a row, each followed by a tell (the ten values a ticket may
already hold, given at start as a prefill), then an ask whose branches fold (two tells
meeting at a common ask), then eight more asks each followed by a tell, and an end:
10 + 10 + 3 + 8 + 8 + 1 = 40 nodes.

Beside it, three small flows that differ in one node kind only (``kinds_flow_yaml``):
eight asks in a row, each answer passing nothing more (``bench_label``), one check
(``bench_check``) or one lookup (``bench_lookup``) on its way to the next ask.
"""

from __future__ import annotations

from pathlib import Path

CATEGORY = "bench"
NODES = 40
PREFILLED = 10  # asks answered by the prefill
LATER = 8  # asks after the fold


def flow_yaml(flow_id: str = "bench_flow") -> str:
    lines = [
        f"id: {flow_id}",
        f"title: Bench flow {flow_id}",
        f"category: {CATEGORY}",
        "summary: Forty nodes, a prefill of ten values, a fold and plain answers",
        "version: 1",
        "entry: q01",
        "max_branch_fanout: 3",
        "branch_depth: 2",
        "on_unknown: broaden",
        "on_stuck: Hand over to a person",
        "nodes:",
    ]

    def ask(node: str, after: str) -> None:
        lines.extend(
            [
                f"  - id: {node}",
                "    kind: ask",
                f"    say: Ask question {node} of the procedure",
                "    accepts:",
                "      'yes': The person says it applies",
                "      'no': The person says it does not apply",
                "    next:",
                f"      'yes': {after}",
                f"      'no': {after}",
            ]
        )

    def tell(node: str, after: str) -> None:
        lines.extend(
            [f"  - id: {node}", "    kind: tell", f"    say: Guidance {node}", f"    next: {after}"]
        )

    for i in range(1, PREFILLED + 1):
        ask(f"q{i:02d}", f"t{i:02d}")
        tell(f"t{i:02d}", f"q{i + 1:02d}" if i < PREFILLED else "fold")
    lines.extend(
        [
            "  - id: fold",
            "    kind: ask",
            "    say: Ask which case it is",
            "    accepts:",
            "      left: The first case",
            "      right: The second case",
            "    next:",
            "      left: fold_left",
            "      right: fold_right",
        ]
    )
    tell("fold_left", "p01")
    tell("fold_right", "p01")
    for i in range(1, LATER + 1):
        ask(f"p{i:02d}", f"s{i:02d}")
        tell(f"s{i:02d}", f"p{i + 1:02d}" if i < LATER else "done")
    lines.extend(
        [
            "  - id: done",
            "    kind: end",
            "    say: Close the conversation",
            "    outcome: resolved",
        ]
    )
    return "\n".join(lines) + "\n"


def prefill(fold: bool = True) -> dict[str, str]:
    """The ten prefilled values (and "does not know" for the folding ask)."""
    values = {f"q{i:02d}": "yes" for i in range(1, PREFILLED + 1)}
    if fold:
        values["fold"] = "__unknown__"
    return values


KINDS = ("label", "check", "lookup")
KINDS_ASKS = 8  # answers a run of each kinds flow takes to its end
LOOKUP_ENDPOINT = "bench"


def kinds_flow_yaml(kind: str) -> str:
    """``bench_<kind>``: asks a01…a08 and an end, an answer passing from each ask to the
    next through nothing (``label``), a check of the answer just given (``check``), or a
    lookup sending it to the endpoint ``bench`` and setting one number (``lookup``)."""
    lines = [
        f"id: bench_{kind}",
        f"title: Bench {kind} steps",
        f"category: {CATEGORY}",
        f"summary: Eight answers, each passing one {kind} node on its way",
        "version: 1",
        "entry: a01",
        "nodes:",
    ]
    for i in range(1, KINDS_ASKS + 1):
        ask, after = f"a{i:02d}", f"a{i + 1:02d}" if i < KINDS_ASKS else "done"
        via = {"label": after, "check": f"c{i:02d}", "lookup": f"l{i:02d}"}[kind]
        lines += [
            f"  - id: {ask}",
            "    kind: ask",
            f"    say: Ask question {ask} of the procedure",
            "    accepts:",
            "      'yes': The person says it applies",
            "      'no': The person says it does not apply",
            "    next:",
            f"      'yes': {via}",
            f"      'no': {via}",
        ]
        if kind == "check":
            lines += [
                f"  - id: {via}",
                "    kind: check",
                f"    say: Did the person say {ask} applies?",
                "    when:",
                f"      - if: {ask} == 'yes'",
                f"        next: {after}",
                f"    else: {after}",
            ]
        elif kind == "lookup":
            lines += [
                f"  - id: {via}",
                "    kind: lookup",
                f"    say: Ask the system of record about {ask}",
                f"    call: {LOOKUP_ENDPOINT}",
                f"    send: [{ask}]",
                "    returns:",
                "      found: The system of record knows it",
                "    sets:",
                f"      {lookup_key(via)}: number",
                "    next:",
                f"      found: {after}",
                "      __error__: failed",
            ]
    lines += ["  - id: done", "    kind: end", "    say: Close the conversation"]
    lines += ["    outcome: resolved"]
    if kind == "lookup":  # a failed call ends here, and the bench counts it as an error
        lines += ["  - id: failed", "    kind: end", "    say: Hand over", "    outcome: failed"]
    return "\n".join(lines) + "\n"


def lookup_key(node: str) -> str:
    """The value the lookup ``node`` sets (each lookup sets its own)."""
    return f"credit_{node}"


def write_kinds_flows(directory: Path) -> Path:
    """The three kinds flows, added to ``directory`` (its categories file written)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "categories.yaml").write_text(CATEGORIES_YAML, encoding="utf-8")
    for kind in KINDS:
        (directory / f"bench_{kind}.yaml").write_text(kinds_flow_yaml(kind), encoding="utf-8")
    return directory


CATEGORIES_YAML = f"{CATEGORY}:\n  title: Bench\n  description: Flows made by the bench\n"


def write_flows_dir(directory: Path, count: int) -> Path:
    """``count`` bench flows (bench_0000, ...) and their categories file in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "categories.yaml").write_text(CATEGORIES_YAML, encoding="utf-8")
    for i in range(count):
        flow_id = f"bench_{i:04d}"
        (directory / f"{flow_id}.yaml").write_text(flow_yaml(flow_id), encoding="utf-8")
    return directory
