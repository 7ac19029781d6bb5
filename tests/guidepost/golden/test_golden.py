"""Recorded transcripts: every tool, lint and show, compared byte for byte.

The files in ``recorded/`` were written by this test from a known-good version.
A change that alters what an agent receives (a result, an error, a tool's
description), what ``lint`` prints or what ``show`` prints fails here with a
diff. When such a change is intended, record again and review the diff of the
files in the commit::

    GUIDEPOST_RECORD_GOLDEN=1 .venv/bin/pytest tests/guidepost/golden

Run ids, draft ids and times are random or depend on the clock; they are replaced
by stable placeholders (``<run:1>``, ``<draft:1>``, ``<time>``) before comparing.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support import forks
from tests.support.mcp_http import http_post
from tests.support.paths import BROKEN_FLOWS
from tests.support.servers import REPO, Server

RECORDED = Path(__file__).parent / "recorded"
RECORD = os.environ.get("GUIDEPOST_RECORD_GOLDEN") == "1"
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}

ORDER = {"order_number": "A00118"}  # refund_request's slot
UNSAFE_DRAFT = 'id: evil\ntitle: !!python/object/apply:os.system ["echo pwned"]\n'
DRAFT_WITH_ERRORS = """\
id: golden_draft
title: 下書き
category: payments
entry: n_ask
nodes:
  - id: n_ask
    kind: ask
    say: 確認する
    accepts:
      ok: 問題ない
    next:
      ok: n_nowhere
  - id: n_done
    kind: end
    outcome: resolved
    say: 締める
"""

# One conversation per entry: (tool, arguments), where "$run" is the run started
# last in the same conversation.
CONVERSATIONS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "flows": [
        ("guide_flows", {}),
        ("guide_flows", {"category": "payments"}),
        ("guide_flows", {"category": "paymnts"}),
        ("guide_flows", {"category": 5}),
    ],
    "payment_fold_and_stall": [
        ("guide_start", {"flow_id": "payment_failed", "ref": "ticket-1"}),
        ("guide_answer", {"run_id": "$run", "choice": "E01", "at": "n_error_code"}),
        ("guide_answer", {"run_id": "$run", "choice": "E01", "at": "n_error_code"}),
        ("guide_answer", {"run_id": "$run", "choice": "__unknown__", "at": "n_card_age"}),
        ("guide_status", {"run_id": "$run"}),
        ("guide_answer", {"run_id": "$run", "choice": "__unknown__", "at": "n_retry"}),
        ("guide_answer", {"run_id": "$run", "choice": "success"}),
        ("guide_back", {"run_id": "$run", "to": "n_retry"}),
        ("guide_answer", {"run_id": "$run", "choice": "failed", "at": "n_retry"}),
        ("guide_answer", {"run_id": "$run", "values": {"order_id": "B1"}}),
        ("guide_answer", {"run_id": "$run", "values": {"order_id": "A00118", "phone": "0312"}}),
        ("guide_answer", {"run_id": "$run", "choice": "match"}),
        ("guide_status", {"run_id": "$run"}),
        ("guide_back", {"run_id": "$run"}),
        ("guide_close", {"run_id": "$run", "reason": "お客様が離脱した"}),
        ("guide_close", {"run_id": "$run", "reason": "お客様が離脱した"}),
        ("guide_answer", {"run_id": "$run", "choice": "match"}),
    ],
    "payment_other_and_prefill": [
        (
            "guide_start",
            {
                "flow_id": "payment_failed",
                "values": {"n_error_code": "E07", "n_symptom": "frozen", "bogus": "x"},
            },
        ),
        ("guide_answer", {"run_id": "$run", "choice": "maybe"}),
        ("guide_answer", {"run_id": "$run", "choice": "maybe"}),
        ("guide_answer", {"run_id": "$run", "choice": "not_charged", "at": "n_charged"}),
        ("guide_back", {"run_id": "$run", "to": "n_nowhere"}),
        ("guide_back", {"run_id": "$run", "to": "n_symptom"}),
        ("guide_status", {"run_id": "$run"}),
    ],
    "refund_prefilled_to_the_end": [
        (
            "guide_start",
            {
                "flow_id": "refund_request",
                "values": {**ORDER, "n_reason": "wrong_item", "n_refund_method": "credit"},
            },
        ),
        ("guide_back", {"run_id": "$run"}),
        ("guide_status", {"run_id": "$run"}),
    ],
    "refused_calls": [
        ("guide_start", {"flow_id": "payment_faild"}),
        ("guide_start", {"flow_id": "payment_failed", "flow": "x"}),
        ("guide_start", {}),
        ("guide_status", {"run_id": "r_no_such_run_here"}),
        ("guide_flow", {}),
        ("guide_start", {"flow_id": "payment_failed"}),
        ("guide_answer", {"run_id": "$run", "chioce": "E01"}),
        ("guide_answer", {"run_id": "$run", "choice": 5}),
        ("guide_answer", {"run_id": "$run", "choice": "E01", "values": {"n_error_code": "E02"}}),
        ("guide_answer", {"run_id": "$run", "values": {"n_error_code": "E" * 65}}),
        ("guide_answer", {"run_id": "$run"}),
        ("guide_answer", {"run_id": "$run", "choice": "E01", "at": "n_nowher"}),
        ("guide_close", {"run_id": "$run"}),
    ],
    "drafts": [
        ("guide_draft", {"yaml": DRAFT_WITH_ERRORS}),
        ("guide_draft", {"yaml": DRAFT_WITH_ERRORS}),
        ("guide_draft", {"yaml": "title: 名前のない手順\n"}),
        ("guide_draft", {"yaml": "id: golden_draft\ntitle: [unclosed\n"}),
        ("guide_draft", {"yaml": UNSAFE_DRAFT}),
        ("guide_draft", {"yaml": "- id: a\n- id: b\n"}),
    ],
}


class Placeholders:
    """Replaces ids and times with stable names, numbered in order of appearance."""

    # Ids are URL-safe base64, so they may end in "-": bounded by what an id cannot hold.
    PATTERNS = {
        "run": re.compile(r"(?<![A-Za-z0-9_-])r_[A-Za-z0-9_-]{22}(?![A-Za-z0-9_-])"),
        "draft": re.compile(r"(?<![A-Za-z0-9_-])d_[A-Za-z0-9_-]{16}(?![A-Za-z0-9_-])"),
    }
    TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        for kind, pattern in self.PATTERNS.items():
            for found in pattern.findall(text):
                if found not in self.names:
                    count = sum(1 for n in self.names.values() if n.startswith(f"<{kind}:"))
                    self.names[found] = f"<{kind}:{count + 1}>"
                text = text.replace(found, self.names[found])
        return self.TIME.sub("<time>", text)


def rpc(server: Server, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = http_post(server.url, json=body, headers=HEADERS, timeout=30)
    assert response.status_code == 200, response.text
    payload: dict[str, Any] = response.json()
    return payload["result"]


def transcript(server: Server, calls: list[tuple[str, dict[str, Any]]]) -> str:
    """What the agent receives for each call: the text block and the error flag, in order."""
    stable = Placeholders()
    lines: list[str] = []
    run_id = ""
    for tool, arguments in calls:
        args = {k: (run_id if v == "$run" else v) for k, v in arguments.items()}
        result = rpc(server, "tools/call", {"name": tool, "arguments": args})
        (block,) = result["content"]
        text = block["text"]
        payload = json.loads(text)
        if result.get("structuredContent") is not None:
            assert result["structuredContent"] == payload
        if tool == "guide_start" and "run_id" in payload:
            run_id = payload["run_id"]
        shown_args = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
        flag = "ERROR" if result.get("isError") else "OK"
        lines.append(f"> {tool} {stable(shown_args)}\n< {flag} {stable(text)}\n")
    return "\n".join(lines)


def compare(name: str, actual: str) -> None:
    """Compare with the recording (or write it, when recording)."""
    path = RECORDED / name
    if RECORD:
        path.parent.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    assert path.is_file(), f"{path} is missing: record it with GUIDEPOST_RECORD_GOLDEN=1"
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"{name} differs from the recording"


def test_tools_list_is_as_recorded(server: Server) -> None:
    listed = rpc(server, "tools/list", {})
    compare("tools_list.json", json.dumps(listed, ensure_ascii=False, indent=1) + "\n")


def test_tool_transcripts_are_as_recorded(server: Server) -> None:
    # One test, in a fixed order: failure counts of a client carry from one
    # conversation to the next, so each transcript depends on the ones before.
    differ = []
    for name, calls in CONVERSATIONS.items():
        try:
            compare(f"{name}.txt", transcript(server, calls))
        except AssertionError as exc:
            differ.append(str(exc).splitlines()[0])
    assert not differ, differ


def cli(*args: str) -> str:
    done = forks.run(["-m", "guidepost.cli", *args], env={**os.environ, "NO_COLOR": "1"})
    return f"exit {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}"


def test_lint_output_is_as_recorded() -> None:
    compare(
        "lint_broken.txt",
        cli("lint", str(BROKEN_FLOWS.relative_to(REPO))),
    )


BUNDLED = sorted(p.stem for p in (REPO / "flows").glob("*.yaml") if p.stem != "categories")


@pytest.mark.parametrize("flow_id", BUNDLED)
def test_show_output_is_as_recorded(flow_id: str) -> None:
    compare(f"show_{flow_id}.txt", cli("show", flow_id, "--flows", "flows"))
