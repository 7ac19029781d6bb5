"""The audit trail and the access log over real HTTP, and ``verify`` on a real server's
runs (ADR 0033): one record and one log line per tool call and API request, accepted or
refused at any level; nothing secret in either; a tampered history named.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from tests.support.mcp_http import (
    RPC_HEADERS,
    async_http_client,
    bearer,
    fail,
    http_client,
    http_refusal,
    ok,
    post,
)
from tests.support.servers import Server, django_eval, guidepost_command, serving
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

# Values that must never be written to a record or a log line.
SECRET_VALUE = "A77731"  # an order number: fits the slot's pattern A[0-9]{5}
DRAFT_MARK = "zq-draft-body-4410"
DRAFT = f"""\
id: audit_probe
title: {DRAFT_MARK}
category: payments
entry: n_done
nodes:
  - id: n_done
    kind: end
    outcome: resolved
    say: {DRAFT_MARK}
"""
ACCESS_LINE = re.compile(
    r"INFO guidepost\.access: key=(?P<key>\S+) client=(?P<client>\"[^\"]*\"|\S+) "
    r"peer=(?P<peer>\S+) tool=(?P<tool>\"[^\"]*\"|\S+) run=(?P<run>\S+) "
    r"outcome=(?P<outcome>\"[^\"]*\"|\S+) status=(?P<status>\d+) ms=(?P<ms>\d+\.\d)"
    r"( count=\d+)?( request=(?P<request>[0-9a-f]{32}))?$"
)
RECORDS = (
    "from access_app.models import AuditRecord\n"
    "result = list(AuditRecord.objects.order_by('id').values("
    "'key_name', 'caller', 'client', 'peer', 'tool', 'run_id', 'outcome', 'status',"
    " 'duration_ms'))"
)


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    """A server with one key, ``auditor``."""
    tmp = tmp_path_factory.mktemp("audit")
    with serving(tmp) as running:
        database_url = running.database_url
        done = guidepost_command(database_url, "createkey", "auditor")
        assert done.returncode == 0, done.stderr
        yield running, done.stdout.splitlines()[-1]


def records(server: Server) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = django_eval(server.database_url, RECORDS)
    return found


def new_records(server: Server, before: int) -> list[dict[str, Any]]:
    return records(server)[before:]


def access_lines(server: Server) -> list[str]:
    return [line for line in server.output().splitlines() if "guidepost.access" in line]


def api_get(server: Server, path: str, headers: dict[str, str]) -> httpx2.Response:
    with http_client(timeout=30) as http:
        return http.get(server.base + path, headers=headers)


def sdk_start(server: Server, key: str) -> str:
    """guide_start through the MCP SDK's client, which sends its name and version."""

    async def call() -> str:
        async with (
            async_http_client(headers=bearer(key)) as http,
            Client(
                streamable_http_client(server.url, http_client=http),
                client_info=Implementation(name="audit-agent", version="3.1"),
            ) as client,
        ):
            result = await client.call_tool(
                "guide_start", {"flow_id": "refund_request", "values": {"order_number": "A00118"}}
            )
            assert not result.is_error, result.content
            return str(result.structured_content["run_id"])  # type: ignore[index]

    return anyio.run(call)


def test_an_accepted_tool_call_is_recorded_with_its_key_client_run_and_outcome(
    audited: tuple[Server, str],
) -> None:
    server, key = audited
    before = len(records(server))

    run_id = sdk_start(server, key)

    [record] = [r for r in new_records(server, before) if r["tool"] == "guide_start"]
    assert {k: v for k, v in record.items() if k != "duration_ms"} == {
        "key_name": "auditor",
        "caller": "key:auditor",
        "client": "audit-agent/3.1",
        "peer": "127.0.0.1",
        "tool": "guide_start",
        "run_id": run_id,
        "outcome": "ok",
        "status": 200,
    }
    assert record["duration_ms"] > 0


def test_every_call_and_request_refused_or_not_leaves_exactly_one_record(
    audited: tuple[Server, str],
) -> None:
    server, key = audited
    run_id = ok(server.base, "guide_start", {"flow_id": "refund_request"}, key=key)["run_id"]
    before = len(records(server))
    lines_before = len(access_lines(server))
    big = {"flow_id": "refund_request", "ref": "x" * (2 * 1024 * 1024)}

    ok(server.base, "guide_status", {"run_id": run_id}, key=key)
    fail(server.base, "guide_status", {"run_id": "r_nothing_here"}, key=key)
    fail(server.base, "guide_answer", {"run_id": run_id, "colour": "red"}, key=key)
    http_refusal(post(server.base, "guide_flows", {}), 401, "key required")
    http_refusal(post(server.base, "guide_flows", {}, key="gpk_wrong"), 401, "invalid key")
    assert post(server.base, "guide_start", big, key=key).status_code == 413
    host = post(server.base, "guide_flows", {}, key=key, headers={"Host": "evil.example"})
    http_refusal(host, 421, "host not allowed")
    origin = post(server.base, "guide_flows", {}, key=key, headers={"Origin": "http://evil.test"})
    http_refusal(origin, 403, "origin not allowed")
    assert api_get(server, f"/api/runs/{run_id}", bearer(key)).status_code == 200
    assert api_get(server, "/api/runs", {}).status_code == 401
    assert api_get(server, "/api/runs?per_page=0", bearer(key)).status_code == 422
    assert api_get(server, "/api/flows", bearer(key)).status_code == 403

    # Refusals before a caller is known are summed per address and second, and written
    # once their second is over (ADR 0072): here each is alone in its kind, so a count of 1.
    # A wait that ends once they are all there; 60 s for a machine busy with other work.
    wait_until(
        lambda: len(new_records(server, before)) >= 12,
        60,
        0.2,
        message=lambda: str(new_records(server, before)),
    )
    rows = sorted(
        (r["key_name"], r["tool"], r["run_id"], r["outcome"], r["status"])
        for r in new_records(server, before)
    )
    assert rows == sorted(
        [
            ("auditor", "guide_status", run_id, "ok", 200),
            ("auditor", "guide_status", "r_nothing_here", "run not found", 200),
            ("auditor", "guide_answer", run_id, "invalid arguments", 200),
            ("", "POST /mcp", "", "key required", 401),
            ("", "POST /mcp", "", "invalid key", 401),
            ("auditor", "POST /mcp", "", "request too large", 413),
            ("", "POST /mcp", "", "host not allowed", 421),
            ("", "POST /mcp", "", "origin not allowed", 403),
            ("auditor", "GET /api/runs/<run_id>", run_id, "ok", 200),
            ("", "GET /api/runs", "", "not signed in", 401),
            ("auditor", "GET /api/runs", "", "invalid arguments", 422),
            ("auditor", "GET /api/flows", "", "permission denied", 403),
        ]
    )
    lines = access_lines(server)[lines_before:]
    assert len(lines) == len(rows), lines
    lines.sort(key=lambda line: _line_row(line))
    for line, (key_name, tool, run, outcome, status) in zip(lines, rows, strict=True):
        match = ACCESS_LINE.search(line)
        assert match, line
        assert match["key"] == (key_name or "-")
        assert match["tool"].strip('"') == tool
        assert match["run"] == (run or "-")
        assert match["outcome"].strip('"') == outcome
        assert int(match["status"]) == status
        if status == 200:  # answered, not summed with other refusals: the request's own id
            assert match["request"], line


def test_a_lone_api_refusal_is_written_once_its_second_is_over_without_a_later_request(
    audited: tuple[Server, str],
) -> None:
    server, _ = audited
    before = len(records(server))

    assert api_get(server, "/api/runs?lone=1", {}).status_code == 401

    # Nothing else reaches the server: only its timer can write the summary. The wait
    # ends once it is there; 60 s for a machine busy with other work.
    wait_until(lambda: new_records(server, before), 60, 0.2, message="no record written")
    assert [(r["tool"], r["outcome"], r["status"]) for r in new_records(server, before)] == [
        ("GET /api/runs", "not signed in", 401)
    ]


def _line_row(line: str) -> tuple[str, str, str, str, int]:
    match = ACCESS_LINE.search(line)
    assert match, line
    key = match["key"] if match["key"] != "-" else ""
    run = match["run"] if match["run"] != "-" else ""
    return (key, match["tool"].strip('"'), run, match["outcome"].strip('"'), int(match["status"]))


def test_no_key_value_or_draft_text_reaches_a_record_or_a_log_line(
    audited: tuple[Server, str],
) -> None:
    server, key = audited
    run_id = ok(server.base, "guide_start", {"flow_id": "refund_request"}, key=key)["run_id"]
    ok(
        server.base,
        "guide_answer",
        {"run_id": run_id, "values": {"order_number": SECRET_VALUE}},
        key=key,
    )
    fail(server.base, "guide_answer", {"run_id": run_id, "choice": SECRET_VALUE * 20}, key=key)
    fail(server.base, "guide_status", {"run_id": f"{SECRET_VALUE} {SECRET_VALUE}"}, key=key)
    fail(server.base, SECRET_VALUE + "_tool", {}, key=key)
    ok(server.base, "guide_draft", {"yaml": DRAFT}, key=key)
    post(server.base, "guide_flows", {}, key=key + "x")  # a key almost right, refused
    post(server.base, "guide_flows", {}, path=f"/mcp/?access_token={key}")
    api_get(server, f"/api/runs?access_token={key}", {})
    api_get(server, f"/api/runs/{run_id}", bearer(key))

    text = server.output() + json.dumps(records(server), ensure_ascii=False)
    assert key not in text
    assert key[4:20] not in text  # not even part of it (only its first 12 characters are shown)
    assert SECRET_VALUE not in text.replace(f"{SECRET_VALUE}_tool", "")  # a tool name is kept
    assert DRAFT_MARK not in text


def test_verify_is_clean_on_real_runs_and_names_every_run_whose_history_was_edited(
    audited: tuple[Server, str],
) -> None:
    server, key = audited
    runs = []
    for answers in (
        [
            {"choice": "damaged"},
            {"choice": "yes"},
            {"choice": "original", "values": {"refund_amount": "50"}},
        ],
        [{"choice": "changed_mind"}],
        [{"choice": "damaged"}],
    ):
        run_id = ok(
            server.base,
            "guide_start",
            {"flow_id": "refund_request", "values": {"order_number": "A00118"}},
            key=key,
        )["run_id"]
        for given in answers:
            ok(server.base, "guide_answer", {"run_id": run_id, **given}, key=key)
        runs.append(run_id)
    ok(server.base, "guide_back", {"run_id": runs[1]}, key=key)
    ok(server.base, "guide_close", {"run_id": runs[2], "reason": "left"}, key=key)

    clean = guidepost_command(server.database_url, "verify")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "verified" in clean.stdout

    django_eval(server.database_url, TAMPER.format(edited=runs[0], state=runs[1]))
    tampered = guidepost_command(server.database_url, "verify")
    named = guidepost_command(server.database_url, "verify", runs[2], "r_gone")

    assert tampered.returncode != 0
    assert f"{runs[0]}: step 2 (guide_answer): the stored result differs" in tampered.stdout
    assert f"{runs[1]}: the stored state differs from the replay" in tampered.stdout
    assert runs[0] in tampered.stderr and runs[1] in tampered.stderr
    assert runs[2] not in tampered.stdout + tampered.stderr
    assert named.returncode != 0
    assert named.stdout.splitlines() == ["r_gone: no such run"]


# A careful forger: the edited step's hash, every later hash and the run's head are
# recomputed, so the chain alone would not tell. The replay does.
TAMPER = """
import json
from runs_app.chain import chain_append
from runs_app.models import GENESIS_HASH, Run
edited = Run.objects.get(public_id={edited!r})
step = edited.steps.get(seq=2)
result = json.loads(step.result_text)
result["next"] = "Approve the refund without photos."
step.result_text = json.dumps(result, ensure_ascii=False, separators=(",", ":"))
step.save()
edited.head_hash = GENESIS_HASH
for each in edited.steps.order_by("seq"):
    chain_append(edited, each)
    each.save()
edited.save()
state = Run.objects.get(public_id={state!r})
state.engine_state = {{**state.engine_state, "values": {{"n_reason": "damaged"}}}}
state.save()
result = True
"""


def test_the_raw_protocol_headers_of_a_refusal_are_error_shaped(
    audited: tuple[Server, str],
) -> None:
    """A refusal before any tool is an HTTP error with a JSON body, not a JSON-RPC error."""
    server, _ = audited
    with http_client(timeout=30) as http:
        response = http.post(server.url, content=b"{}", headers=RPC_HEADERS)
    http_refusal(response, 401, "key required")
