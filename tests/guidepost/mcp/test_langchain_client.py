"""langchain-mcp-adapters (the agent ecosystem's MCP client) drives the real server.

langchain-mcp-adapters 0.3.2 pins ``mcp<2``, which cannot share this project's
environment (mcp 2.x), so ``langchain_probe.py`` runs in an isolated uv
environment and prints JSON for these tests. The first run downloads packages.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import REPO, Server

PROBE = Path(__file__).with_name("langchain_probe.py")
PROBE_TIMEOUT = 300


def find_uv() -> str:
    """The uv binary: $UV, then PATH, then the repository's .tools, then the machine's."""
    candidates = [
        os.environ.get("UV", ""),
        shutil.which("uv") or "",
        str(REPO / ".tools" / "bin" / "uv"),
        "/opt/uvtool/bin/uv",
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail("uv not found: set UV, put uv on PATH, or install it at .tools/bin/uv")


@pytest.fixture(scope="module")
def report(server: Server) -> dict[str, Any]:
    isolated = ["run", "--isolated", "--no-project"]
    packages = ["--with", "langchain-mcp-adapters==0.3.2", "--with", "mcp<2"]
    command = [find_uv(), *isolated, *packages, "python", str(PROBE), server.url]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT")}
    done = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=PROBE_TIMEOUT
    )
    assert done.returncode == 0, f"probe failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert isinstance(result, dict)
    return result


def test_langchain_client_runs_on_mcp_1x(report: dict[str, Any]) -> None:
    assert report["versions"]["langchain-mcp-adapters"] == "0.3.2"
    assert report["versions"]["mcp"].startswith("1.")


def test_langchain_client_lists_the_seven_tools(report: dict[str, Any]) -> None:
    assert report["tools"] == [
        "guide_answer",
        "guide_back",
        "guide_close",
        "guide_draft",
        "guide_flows",
        "guide_start",
        "guide_status",
    ]
    schema = report["answer_schema"]
    assert schema["required"] == ["run_id"]
    assert set(schema["properties"]) == {"run_id", "choice", "values", "at"}


def test_langchain_client_lists_flows_of_a_category(report: dict[str, Any]) -> None:
    assert set(report["flows"]) == {"payment_failed", "refund_request"}


def test_langchain_client_starts_and_answers_a_run(report: dict[str, Any]) -> None:
    start = report["start"]
    assert start["status"] == "advanced"
    assert start["flow"] == {"id": "payment_failed", "title": "支払いが失敗した", "version": 3}
    assert start["node"]["id"] == "n_error_code"
    assert report["answer"] == {"status": "advanced", "node": "n_card_age"}


def test_langchain_client_sees_a_bad_argument_as_a_tool_error(report: dict[str, Any]) -> None:
    error = report["error"]
    assert error["status"] == "error"
    payload = error["payload"]
    assert set(payload) == {"error", "reason", "next", "retryable", "attempt"}, payload
    assert (payload["error"], payload["retryable"], payload["attempt"]) == (
        "invalid arguments",
        True,
        1,
    )
    assert "guide_answer" in payload["next"]
