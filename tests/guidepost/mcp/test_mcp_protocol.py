"""The seven MCP tools over the real protocol, against a real server (spec §5, §7).

Every test runs twice: once with ``mcp.Client`` (the sessionless 2026-07-28
protocol) and once with ``ClientSession`` after ``initialize()`` (the 2025-11-25
handshake over Streamable HTTP). Results are checked the way an agent sees them:
one compact UTF-8 JSON text block that equals the structured content, keys that
do not apply left out, errors shaped as spec §7.

The module's server serves the bundled flows plus two additions made here: a
``probe`` category holding ``probe_unfoldable`` (an ask too wide to fold, with no
version key) and an ``empty`` category with no flows.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import httpx2
import pytest
import yaml
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, Implementation, ListToolsResult

from tests.support.mcp_http import async_http_client
from tests.support.servers import BUNDLED_FLOWS, Server, copy_flows, serving

pytestmark = pytest.mark.anyio

EXTRA_CATEGORIES = """
probe:
  title: 検証用
  description: プロトコル試験のための手順
empty:
  title: 空のカテゴリ
  description: 手順がひとつもない
"""

PROBE_FLOW = """\
id: probe_unfoldable
title: 三択の確認（試験用）
category: probe
entry: n_pick
max_branch_fanout: 2
on_unknown: broaden
on_stuck: 試験用の引き継ぎメモ
nodes:
  - id: n_pick
    kind: ask
    say: 三つのうちどれに当てはまるかを聞く
    accepts:
      a: 一つ目
      b: 二つ目
      c: 三つ目
    next:
      a: n_done
      b: n_done
      c: n_done
  - id: n_done
    kind: end
    outcome: done
    say: 締める
"""

TOOL_ARGUMENTS: dict[str, tuple[set[str], set[str]]] = {
    "guide_flows": ({"category"}, set()),
    "guide_start": ({"flow_id", "values", "ref", "request_id"}, {"flow_id"}),
    "guide_answer": ({"run_id", "choice", "values", "at"}, {"run_id"}),
    "guide_status": ({"run_id"}, {"run_id"}),
    "guide_back": ({"run_id", "to"}, {"run_id"}),
    "guide_close": ({"run_id", "reason"}, {"run_id", "reason"}),
    "guide_draft": ({"yaml"}, {"yaml"}),
}

STEP_KEYS = {"run_id", "status", "next", "node", "tell", "skipped", "ignored", "other"}
STATUS_KEYS = {
    "advanced": (set(), set()),
    "completed": ({"outcome"}, set()),
    "unmatched": ({"attempt", "max_unmatched", "rejected"}, {"candidates", "rejected_slots"}),
    "branched": ({"branches", "common"}, {"outcome"}),
    "stalled": ({"reason", "handoff"}, set()),
}
ERROR_REQUIRED = {"error", "reason", "next", "retryable"}
ERROR_KEYS = ERROR_REQUIRED | {"candidates", "attempt", "repeated", "retry_after"}
# The nulls spec §5 states: common (no common node) and outcome (a fold without
# common). Everything else that does not apply is left out.
STATED_NULLS = {"common", "outcome"}
STATUS_REPORT_KEYS = {
    "run_id",
    "flow",
    "state",
    "node",
    "path",
    "values",
    "outcome",
    "handoff",
    "ref",
    "started_at",
    "updated_at",
    "next",
}

RPC_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The bundled flows plus a ``probe`` category (one unfoldable flow) and an empty one."""
    tmp = tmp_path_factory.mktemp("protocol")
    flows = copy_flows(tmp / "flows")
    categories = flows / "categories.yaml"
    categories.write_text(
        categories.read_text(encoding="utf-8") + EXTRA_CATEGORIES, encoding="utf-8"
    )
    (flows / "probe_unfoldable.yaml").write_text(PROBE_FLOW, encoding="utf-8")
    with serving(tmp, flows_dir=flows) as running:
        yield running


ALLOWED_ORIGIN = "https://console.example"
CONFIGURED_HOST = "guidepost.example"


@pytest.fixture(scope="module")
def configured_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The bundled flows, served with one extra allowed origin and one extra allowed host."""
    tmp = tmp_path_factory.mktemp("configured")
    env = {
        "GUIDEPOST_ALLOWED_ORIGINS": ALLOWED_ORIGIN,
        "GUIDEPOST_ALLOWED_HOSTS": f"127.0.0.1,localhost,{CONFIGURED_HOST}",
    }
    with serving(tmp, env=env) as running:
        yield running


# --- the two clients ----------------------------------------------------------------------


class Mcp:
    """One connected client: ``await mcp(tool, args)`` is a tools/call."""

    def __init__(
        self,
        kind: str,
        protocol: str,
        call_tool: Callable[[str, dict[str, Any]], Awaitable[Any]],
        list_tools: Callable[[], Awaitable[ListToolsResult]],
    ) -> None:
        self.kind = kind
        self.protocol = protocol
        self._call_tool = call_tool
        self.list_tools = list_tools

    async def __call__(self, tool: str, args: dict[str, Any]) -> CallToolResult:
        result = await self._call_tool(tool, args)
        assert isinstance(result, CallToolResult), result
        return result

    async def ok(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return success(await self(tool, args))

    async def fail(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return failure(await self(tool, args))


@asynccontextmanager
async def connect(kind: str, url: str) -> AsyncIterator[Mcp]:
    if kind == "client":
        # A name of its own, so that failures counted per client start from zero.
        info = Implementation(name=f"protocol-tests-{uuid.uuid4().hex[:8]}", version="1")
        async with Client(url, client_info=info) as client:
            yield Mcp(kind, str(client.protocol_version), client.call_tool, client.list_tools)
        return
    async with (
        async_http_client() as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        init = await session.initialize()
        yield Mcp(kind, str(init.protocol_version), session.call_tool, session.list_tools)


@pytest.fixture(params=["client", "session"])
async def mcp(request: pytest.FixtureRequest, server: Server) -> AsyncIterator[Mcp]:
    async with connect(request.param, server.url) as connected:
        yield connected


# --- result checks ------------------------------------------------------------------------


def decoded(result: CallToolResult) -> dict[str, Any]:
    """The one text block as JSON, checked compact with literal UTF-8 characters."""
    assert len(result.content) == 1, result.content
    block = result.content[0]
    assert block.type == "text"
    text = block.text
    payload = json.loads(text)
    assert isinstance(payload, dict)
    assert text == json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    assert "\\u" not in text
    return payload


def nulls(value: object, path: str = "") -> list[str]:
    """Paths of null values, except under the nulls the spec states."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if item is None and key in STATED_NULLS:
                continue
            found += nulls(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += nulls(item, f"{path}[{i}]")
    elif value is None:
        found.append(path or "<root>")
    return found


def success(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    payload = decoded(result)
    assert result.structured_content == payload
    assert nulls(payload) == []
    return payload


def failure(result: CallToolResult) -> dict[str, Any]:
    """A spec §7 error: one compact JSON object, never a protocol error."""
    assert result.is_error, result.content
    error = decoded(result)
    # "About 100 tokens": a generous bound in characters, so an error never bloats a context.
    assert len(result.content[0].text) <= 600, result.content[0].text
    assert ERROR_REQUIRED <= error.keys() <= ERROR_KEYS, error
    for key in ("error", "reason", "next"):
        assert isinstance(error[key], str) and error[key], error
    assert isinstance(error["retryable"], bool)
    assert isinstance(error["attempt"], int) and error["attempt"] >= 1
    if "repeated" in error:
        assert error["repeated"] is True
    if "candidates" in error:
        assert 1 <= len(error["candidates"]) <= 5
        assert all(isinstance(c, str) for c in error["candidates"])
    return error


def refused(
    error: dict[str, Any],
    code: str,
    *,
    retryable: bool,
    attempt: int,
    candidates: list[str] | None = None,
    repeated: bool = False,
) -> None:
    """An error object with exactly this ``error`` code, ``retryable`` and ``attempt``, and
    exactly the keys that apply: ``candidates`` only when expected (and then equal to
    them), ``repeated`` only when expected."""
    keys = ERROR_REQUIRED | {"attempt"}
    if candidates is not None:
        keys.add("candidates")
        assert error.get("candidates") == candidates, error
    if repeated:
        keys.add("repeated")
    assert set(error) == keys, error
    assert (error["error"], error["retryable"], error["attempt"]) == (code, retryable, attempt), (
        error
    )


def step(payload: dict[str, Any], status: str, *, extra: frozenset[str] = frozenset()) -> None:
    """A step result of ``status``: its required keys present, nothing foreign, and a
    ``next`` that points the agent the right way (not its wording: what it names)."""
    required, optional = STATUS_KEYS[status]
    assert payload["status"] == status, payload
    assert isinstance(payload["run_id"], str) and payload["run_id"]
    assert isinstance(payload["next"], str) and payload["next"]
    assert required <= payload.keys(), payload
    assert payload.keys() <= STEP_KEYS | required | optional | extra, payload
    directive = payload["next"]
    if payload.get("tell"):
        assert "`tell`" in directive, directive  # deliver the tells first
    waits = payload.get("node", {}).get("kind") in ("ask", "collect")
    if status == "advanced" or (status == "branched" and waits):
        assert "guide_answer" in directive, directive
    if status == "unmatched":
        assert payload["rejected"] in directive, directive
    if status == "completed":
        assert f"outcome: {payload['outcome']}" in directive, directive
    if status == "stalled":
        assert "human" in directive, directive


# --- flows, as their authors wrote them ---------------------------------------------------


def flow_file(flow_id: str) -> dict[str, Any]:
    data = yaml.safe_load((BUNDLED_FLOWS / f"{flow_id}.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def node_of(flow_id: str, node_id: str) -> dict[str, Any]:
    return next(n for n in flow_file(flow_id)["nodes"] if n["id"] == node_id)


def say(flow_id: str, node_id: str) -> str:
    return str(node_of(flow_id, node_id)["say"]).strip()


def bundled_flow_ids() -> list[str]:
    return sorted(p.stem for p in BUNDLED_FLOWS.glob("*.yaml") if p.stem != "categories")


# --- small walks --------------------------------------------------------------------------


async def start(mcp: Mcp, flow_id: str, **args: Any) -> dict[str, Any]:
    return await mcp.ok("guide_start", {"flow_id": flow_id, **args})


async def answer(mcp: Mcp, run_id: str, **args: Any) -> dict[str, Any]:
    return await mcp.ok("guide_answer", {"run_id": run_id, **args})


async def status_of(mcp: Mcp, run_id: str) -> dict[str, Any]:
    return await mcp.ok("guide_status", {"run_id": run_id})


async def new_streak(mcp: Mcp) -> None:
    """End this client's streak of failures with an accepted call that names no run, so
    that its next failure without a run is attempt 1 whatever ran before (the session
    client's calls carry no client name: all of them count as one client)."""
    await start(mcp, "payment_failed")


async def at_retry(mcp: Mcp) -> str:
    """A payment_failed run waiting at n_retry: E01 given in advance, the card age answered."""
    started = await start(mcp, "payment_failed", values={"n_error_code": "E01"})
    assert started["node"]["id"] == "n_card_age"
    moved = await answer(mcp, started["run_id"], choice="expired", at="n_card_age")
    assert moved["node"]["id"] == "n_retry"
    return str(started["run_id"])


# --- tools/list and the protocols ---------------------------------------------------------


async def test_clients_speak_both_protocol_eras(mcp: Mcp) -> None:
    expected = {"client": "2026-07-28", "session": "2025-11-25"}
    assert mcp.protocol == expected[mcp.kind]


async def test_tools_list_names_exactly_the_seven_tools_with_descriptions(mcp: Mcp) -> None:
    tools = (await mcp.list_tools()).tools
    assert sorted(t.name for t in tools) == sorted(TOOL_ARGUMENTS)
    for tool in tools:
        assert tool.description and len(tool.description) > 20, tool.name


async def test_tools_list_input_schemas_give_types_limits_and_required(mcp: Mcp) -> None:
    tools = {t.name: t.input_schema for t in (await mcp.list_tools()).tools}
    for name, (properties, required) in TOOL_ARGUMENTS.items():
        schema = tools[name]
        assert schema["type"] == "object", name
        assert schema.get("additionalProperties") is False, name
        assert set(schema["properties"]) == properties, name
        assert set(schema.get("required", [])) == required, name
        for prop, spec in schema["properties"].items():
            assert spec.get("description"), (name, prop)
            if prop == "values":
                assert spec["type"] == "object"
                assert spec["maxProperties"] == 200
                # A typed slot takes a JSON number or boolean too (ADR 0116).
                assert spec["additionalProperties"] == {
                    "anyOf": [
                        {"type": "string", "maxLength": 1000},
                        {"type": "number"},
                        {"type": "boolean"},
                    ]
                }
            else:
                assert spec["type"] == "string", (name, prop)
                assert isinstance(spec["maxLength"], int), (name, prop)
    assert tools["guide_answer"]["properties"]["run_id"]["maxLength"] == 64
    assert tools["guide_answer"]["properties"]["choice"]["maxLength"] == 64
    assert tools["guide_draft"]["properties"]["yaml"]["maxLength"] == 256 * 1024


# --- guide_flows --------------------------------------------------------------------------


async def test_flows_without_category_lists_categories_with_counts(mcp: Mcp) -> None:
    result = await mcp.ok("guide_flows", {})
    assert {"categories"} <= result.keys() <= {"categories", "next"}
    counts = {c["id"]: c["count"] for c in result["categories"]}
    assert counts == {
        "payments": 2,
        "account": 1,
        "it": 1,
        "operations": 2,
        "probe": 1,
        "empty": 0,
    }
    payments = result["categories"][0]
    assert payments == {
        "id": "payments",
        "title": "決済",
        "description": "支払い・請求・返金に関する問い合わせ",
        "count": 2,
    }


async def test_flows_with_category_lists_its_flows(mcp: Mcp) -> None:
    result = await mcp.ok("guide_flows", {"category": "payments"})
    assert {"category", "flows"} <= result.keys() <= {"category", "flows", "next"}
    assert result["category"] == "payments"
    by_id = {f["id"]: f for f in result["flows"]}
    assert set(by_id) == {"payment_failed", "refund_request"}
    assert by_id["payment_failed"] == {
        "id": "payment_failed",
        "title": "支払いが失敗した",
        "summary": "決済エラーで支払いが完了しない",
        "version": "3",  # text, as the other flow's "2024.3": one type for every flow
    }
    assert by_id["refund_request"]["version"] == "2024.3"


async def test_flows_lists_a_flow_without_version_key_and_with_title_as_summary(
    mcp: Mcp,
) -> None:
    result = await mcp.ok("guide_flows", {"category": "probe"})
    assert result["flows"] == [
        {
            "id": "probe_unfoldable",
            "title": "三択の確認（試験用）",
            "summary": "三択の確認（試験用）",
        }
    ]


async def test_flows_category_without_flows_is_an_empty_success(mcp: Mcp) -> None:
    result = await mcp.ok("guide_flows", {"category": "empty"})
    assert result["category"] == "empty"
    assert result["flows"] == []


@pytest.mark.parametrize(
    ("args", "names", "never"),
    [
        ({}, ["guide_flows", "category"], "guide_start"),
        ({"category": "payments"}, ["guide_start", "flow_id", "values"], "guide_flows"),
        ({"category": "empty"}, ["do not invent"], "guide_start"),
    ],
    ids=["categories", "category", "empty-category"],
)
async def test_flows_results_carry_a_next_directive_naming_the_next_call(
    mcp: Mcp, args: dict[str, str], names: list[str], never: str
) -> None:
    result = await mcp.ok("guide_flows", args)
    assert isinstance(result.get("next"), str), result
    for name in names:
        assert name in result["next"], result["next"]
    assert never not in result["next"], result["next"]


async def test_flows_unknown_category_is_an_error_with_candidates(mcp: Mcp) -> None:
    await new_streak(mcp)
    error = await mcp.fail("guide_flows", {"category": "payment"})
    refused(error, "category not found", retryable=True, attempt=1, candidates=["payments"])
    assert "guide_flows" in error["next"]


# --- guide_start --------------------------------------------------------------------------


async def test_start_returns_flow_first_node_and_index(mcp: Mcp) -> None:
    result = await start(mcp, "payment_failed")
    step(result, "advanced", extra=frozenset({"flow", "index"}))
    assert set(result) == {"run_id", "flow", "status", "next", "node", "index"}
    assert result["flow"] == {"id": "payment_failed", "title": "支払いが失敗した", "version": "3"}
    assert result["node"] == {
        "id": "n_error_code",
        "kind": "ask",
        "say": say("payment_failed", "n_error_code"),
        "accepts": {"E01": "カードが拒否された", "E02": "残高不足・限度額超過"},
        "other": True,  # its __other__ route takes a code it does not list
    }


@pytest.mark.parametrize("flow_id", bundled_flow_ids())
async def test_start_index_keys_are_exactly_the_flows_asks_and_slots(
    mcp: Mcp, flow_id: str
) -> None:
    data = flow_file(flow_id)
    expected = set()
    for node in data["nodes"]:
        if node["kind"] == "ask":
            expected.add(node["id"])
        elif node["kind"] == "collect":
            expected |= {str(slot) for slot in node["slots"]}
    result = await start(mcp, flow_id)
    assert set(result["index"]) == expected
    assert all(isinstance(line, str) and line for line in result["index"].values())
    assert result["flow"] == {
        "id": flow_id,
        "title": data["title"],
        "version": str(data["version"]),
    }


async def test_start_stores_ref_for_guide_status(mcp: Mcp) -> None:
    result = await start(mcp, "payment_failed", ref="チケット-0042")
    assert "ref" not in result
    assert (await status_of(mcp, result["run_id"]))["ref"] == "チケット-0042"


async def test_start_with_values_skips_answered_nodes_and_delivers_tells(mcp: Mcp) -> None:
    values = {"n_error_code": "E01", "n_card_age": "expired"}
    result = await start(mcp, "payment_failed", values=values)
    step(result, "advanced", extra=frozenset({"flow", "index"}))
    assert result["skipped"] == ["n_error_code", "n_card_age"]
    assert result["tell"] == [
        {"id": "n_update_card", "say": say("payment_failed", "n_update_card")}
    ]
    assert result["node"]["id"] == "n_retry"
    assert "ignored" not in result


async def test_start_reports_unknown_value_keys_as_ignored_with_candidates(mcp: Mcp) -> None:
    result = await start(mcp, "payment_failed", values={"n_eror_code": "E01"})
    assert result["node"]["id"] == "n_error_code"
    assert "skipped" not in result
    [ignored] = result["ignored"]
    assert ignored["key"] == "n_eror_code"
    assert ignored["candidates"] == ["n_error_code"]
    assert isinstance(ignored["reason"], str) and ignored["reason"]


async def test_start_unknown_flow_is_an_error_with_candidates(mcp: Mcp) -> None:
    await new_streak(mcp)
    error = await mcp.fail("guide_start", {"flow_id": "payment_faild"})
    refused(error, "flow not found", retryable=True, attempt=1, candidates=["payment_failed"])
    assert "guide_flows" in error["next"]


async def test_results_are_compact_json_with_literal_utf8(mcp: Mcp) -> None:
    result = await mcp("guide_start", {"flow_id": "payment_failed"})
    payload = success(result)  # compact, no \u escapes, equal to the structured content
    assert "支払いが失敗した" in result.content[0].text
    assert payload["flow"]["title"] == "支払いが失敗した"


# --- guide_answer: the five statuses ------------------------------------------------------


async def test_answer_advances_to_the_next_node(mcp: Mcp) -> None:
    run_id = (await start(mcp, "payment_failed"))["run_id"]
    result = await answer(mcp, run_id, choice="E02", at="n_error_code")
    step(result, "advanced")
    assert set(result) == {"run_id", "status", "next", "node"}
    assert result["node"]["id"] == "n_balance"
    assert result["node"]["accepts"] == node_of("payment_failed", "n_balance")["accepts"]


async def test_answer_reaching_an_end_completes_with_outcome(mcp: Mcp) -> None:
    run_id = await at_retry(mcp)
    result = await answer(mcp, run_id, choice="success", at="n_retry")
    step(result, "completed")
    assert result["outcome"] == "resolved"
    assert result["node"] == {
        "id": "n_resolved",
        "kind": "end",
        "say": say("payment_failed", "n_resolved"),
        "outcome": "resolved",
    }
    assert "tell" not in result and "skipped" not in result


async def test_answer_with_a_label_not_accepted_is_unmatched(mcp: Mcp) -> None:
    run_id = await at_retry(mcp)
    first = await answer(mcp, run_id, choice="maybe", at="n_retry")
    step(first, "unmatched")
    assert (first["attempt"], first["max_unmatched"], first["rejected"]) == (1, 3, "maybe")
    assert first["node"]["id"] == "n_retry"
    second = await answer(mcp, run_id, choice="perhaps", at="n_retry")
    assert (second["attempt"], second["rejected"]) == (2, "perhaps")


async def test_answer_at_max_unmatched_treats_the_node_as_unknown(mcp: Mcp) -> None:
    run_id = (await start(mcp, "payment_failed", values={"n_error_code": "E01"}))["run_id"]
    for attempt in (1, 2):
        result = await answer(mcp, run_id, choice=f"guess{attempt}")
        assert (result["status"], result["attempt"]) == ("unmatched", attempt)
    third = await answer(mcp, run_id, choice="guess3")
    step(third, "branched")
    assert third["node"]["id"] == "n_retry"


async def test_collect_value_failing_its_pattern_is_unmatched(mcp: Mcp) -> None:
    started = await start(mcp, "identity_check")
    assert started["tell"] == [{"id": "n_intro", "say": say("identity_check", "n_intro")}]
    values = {"member_id": "123", "birth_date": "1985-04-01", "postal_code": "150-0041"}
    result = await answer(mcp, started["run_id"], values=values, at="n_basic")
    step(result, "unmatched")
    assert (result["attempt"], result["max_unmatched"], result["rejected"]) == (1, 2, "123")
    assert "member_id" in result["node"]["slots"]
    assert "birth_date" not in result["node"]["slots"]


async def test_answer_unknown_folds_into_branches_and_waits_at_common(mcp: Mcp) -> None:
    run_id = (await start(mcp, "payment_failed", values={"n_error_code": "E01"}))["run_id"]
    result = await answer(mcp, run_id, choice="__unknown__", at="n_card_age")
    step(result, "branched")
    assert "outcome" not in result
    accepts = node_of("payment_failed", "n_card_age")["accepts"]
    targets = {"expired": "n_update_card", "new": "n_activate_card", "valid": "n_card_issuer"}
    assert result["branches"] == [
        {
            "label": label,
            "when": accepts[label],
            "steps": [{"id": target, "kind": "tell", "say": say("payment_failed", target)}],
        }
        for label, target in targets.items()
    ]
    assert result["common"] == {
        "id": "n_retry",
        "kind": "ask",
        "say": say("payment_failed", "n_retry"),
    }
    assert result["node"]["id"] == "n_retry"
    path = (await status_of(mcp, run_id))["path"]
    assert path[-1] == {"id": "n_card_age", "kind": "ask", "via": "folded", "value": "__unknown__"}


async def test_fold_without_common_completes_with_null_outcome(mcp: Mcp) -> None:
    values = {"n_impact": "outage", "incident_id": "INC-20417", "n_recent_change": "deploy"}
    started = await start(mcp, "incident_triage", values=values)
    assert [t["id"] for t in started["tell"]] == ["n_declare_sev1", "n_rollback"]
    assert started["skipped"] == ["n_impact", "n_record", "n_recent_change"]
    run_id = started["run_id"]
    result = await answer(mcp, run_id, choice="__unknown__", at="n_mitigation_result")
    step(result, "branched")
    assert result["common"] is None
    assert "outcome" in result and result["outcome"] is None
    assert "node" not in result
    [recovered, not_recovered] = result["branches"]
    assert recovered["steps"] == [
        {
            "id": "n_monitoring",
            "kind": "end",
            "say": say("incident_triage", "n_monitoring"),
            "outcome": "mitigated",
        }
    ]
    assert [s["id"] for s in not_recovered["steps"]] == ["n_escalate_ic", "n_handed_over"]
    status = await status_of(mcp, run_id)
    assert status["state"] == "completed"
    assert "outcome" in status and status["outcome"] is None


async def test_fold_whose_common_is_an_end_completes_with_its_outcome(mcp: Mcp) -> None:
    values = {"rma_no": "R20240117", "sku": "KTC-0412", "n_seal": "opened", "n_damage": "clean"}
    started = await start(mcp, "returns_inspection", values=values)
    assert started["skipped"] == ["n_rma", "n_seal", "n_damage"]
    result = await answer(mcp, started["run_id"], choice="__unknown__", at="n_accessories")
    step(result, "branched")
    assert result["outcome"] == "restocked"
    assert result["common"] == {
        "id": "n_restocked",
        "kind": "end",
        "say": say("returns_inspection", "n_restocked"),
    }
    assert result["node"]["id"] == "n_restocked"
    assert result["node"]["outcome"] == "restocked"
    assert [b["label"] for b in result["branches"]] == ["complete", "missing"]
    assert (await status_of(mcp, started["run_id"]))["state"] == "completed"


async def test_unknown_at_an_escalating_node_stalls_with_its_handoff(mcp: Mcp) -> None:
    run_id = await at_retry(mcp)
    result = await answer(mcp, run_id, choice="__unknown__", at="n_retry")
    step(result, "stalled")
    assert result["reason"] == "escalate"
    assert result["handoff"] == node_of("payment_failed", "n_retry")["on_stuck"]
    assert result["node"]["id"] == "n_retry"
    status = await status_of(mcp, run_id)
    assert (status["state"], status["handoff"]) == ("stalled", result["handoff"])


async def test_unknown_at_a_collect_marks_required_slots_unknown_and_stalls(mcp: Mcp) -> None:
    run_id = await at_retry(mcp)
    await answer(mcp, run_id, choice="failed", at="n_retry")
    result = await answer(mcp, run_id, choice="__unknown__", at="n_identity")
    step(result, "stalled")
    assert result["reason"] == "escalate"
    assert result["handoff"] == flow_file("payment_failed")["on_stuck"]
    assert result["node"]["id"] == "n_identity"


async def test_unknown_at_an_unfoldable_node_stalls_with_the_flows_handoff(mcp: Mcp) -> None:
    started = await start(mcp, "probe_unfoldable")
    assert started["flow"] == {"id": "probe_unfoldable", "title": "三択の確認（試験用）"}
    result = await answer(mcp, started["run_id"], choice="__unknown__", at="n_pick")
    step(result, "stalled")
    assert result["reason"] == "unfoldable"
    assert result["handoff"] == "試験用の引き継ぎメモ"


async def test_answer_delivers_tells_in_order(mcp: Mcp) -> None:
    run_id = (await start(mcp, "vpn_cannot_connect"))["run_id"]
    result = await answer(mcp, run_id, choice="cert", at="n_error_message")
    step(result, "advanced")
    assert result["tell"] == [
        {"id": tell, "say": say("vpn_cannot_connect", tell)}
        for tell in ("n_client_update", "n_reconnect_steps")
    ]
    assert result["node"]["id"] == "n_reconnect"


async def test_answer_other_label_follows_other_and_records_it(mcp: Mcp) -> None:
    run_id = (await start(mcp, "payment_failed"))["run_id"]
    result = await answer(mcp, run_id, choice="E07", at="n_error_code")
    step(result, "advanced")
    assert result["node"]["id"] == "n_symptom"
    assert result["other"] is True and "outside the labels" in result["next"]
    status = await status_of(mcp, run_id)
    assert status["values"] == {"n_error_code": "E07"}
    assert status["path"] == [{"id": "n_error_code", "kind": "ask", "via": "asked", "value": "E07"}]


async def test_answer_unknown_follows_the_unknown_route(mcp: Mcp) -> None:
    run_id = (await start(mcp, "payment_failed"))["run_id"]
    result = await answer(mcp, run_id, choice="__unknown__", at="n_error_code")
    step(result, "advanced")
    assert result["tell"] == [{"id": "n_generic", "say": say("payment_failed", "n_generic")}]
    assert result["node"]["id"] == "n_retry"


async def test_answer_choice_and_values_disagreeing_is_an_error(mcp: Mcp) -> None:
    run_id = (await start(mcp, "payment_failed"))["run_id"]
    error = await mcp.fail(
        "guide_answer", {"run_id": run_id, "choice": "E01", "values": {"n_error_code": "E02"}}
    )
    refused(error, "choice and values disagree", retryable=True, attempt=1)
    assert (await status_of(mcp, run_id))["node"]["id"] == "n_error_code"


# --- guide_answer: `at` -------------------------------------------------------------------


async def test_answer_retry_with_at_returns_stored_result_once(mcp: Mcp) -> None:
    run_id = (await start(mcp, "payment_failed", values={"n_error_code": "E01"}))["run_id"]
    first = await answer(mcp, run_id, choice="expired", at="n_card_age")
    before = await status_of(mcp, run_id)
    retried = await answer(mcp, run_id, choice="expired", at="n_card_age")
    assert retried == {**first, "repeated": True}
    assert await status_of(mcp, run_id) == before
    again = await answer(mcp, run_id, choice="expired", at="n_card_age")
    assert again == retried
    assert [e["id"] for e in (await status_of(mcp, run_id))["path"]] == [
        "n_error_code",
        "n_card_age",
        "n_update_card",
    ]


async def test_answer_with_stale_at_and_other_input_is_a_conflict(mcp: Mcp) -> None:
    run_id = await at_retry(mcp)
    before = await status_of(mcp, run_id)
    error = await mcp.fail("guide_answer", {"run_id": run_id, "choice": "new", "at": "n_card_age"})
    refused(error, "run has moved", retryable=True, attempt=1)
    assert "n_retry" in error["reason"]
    assert "n_retry" in error["next"]
    assert await status_of(mcp, run_id) == before


async def test_answer_with_at_naming_no_node_is_an_error_with_candidates(mcp: Mcp) -> None:
    run_id = (await start(mcp, "payment_failed"))["run_id"]
    before = await status_of(mcp, run_id)
    error = await mcp.fail("guide_answer", {"run_id": run_id, "choice": "E01", "at": "n_eror_code"})
    refused(
        error,
        "node not found",
        retryable=True,
        attempt=1,
        # Only close spellings (one cutoff for every candidate list, ADR 0016).
        candidates=["n_error_code"],
    )
    assert await status_of(mcp, run_id) == before


# --- guide_status -------------------------------------------------------------------------


async def test_status_reports_state_node_path_values_and_times(mcp: Mcp) -> None:
    run_id = await at_retry(mcp)
    status = await status_of(mcp, run_id)
    assert set(status) == STATUS_REPORT_KEYS - {"outcome", "handoff", "ref"}
    assert status["run_id"] == run_id
    assert status["flow"] == {"id": "payment_failed", "title": "支払いが失敗した", "version": "3"}
    assert status["state"] == "active"
    assert status["node"]["id"] == "n_retry"
    assert status["path"] == [
        {"id": "n_error_code", "kind": "ask", "via": "skipped", "value": "E01"},
        {"id": "n_card_age", "kind": "ask", "via": "asked", "value": "expired"},
        {"id": "n_update_card", "kind": "tell", "via": "told"},
    ]
    assert status["values"] == {"n_error_code": "E01", "n_card_age": "expired"}
    started = datetime.fromisoformat(status["started_at"])
    assert datetime.fromisoformat(status["updated_at"]) >= started
    assert "guide_answer" in status["next"]


async def test_status_of_a_completed_run_has_outcome(mcp: Mcp) -> None:
    run_id = await at_retry(mcp)
    await answer(mcp, run_id, choice="success", at="n_retry")
    status = await status_of(mcp, run_id)
    assert (status["state"], status["outcome"]) == ("completed", "resolved")
    assert "handoff" not in status


async def test_status_of_unknown_run_is_an_error(mcp: Mcp) -> None:
    await new_streak(mcp)
    error = await mcp.fail("guide_status", {"run_id": "r_no_such_run_here"})
    refused(error, "run not found", retryable=False, attempt=1)
    assert "guide_start" in error["next"]


# --- guide_back ---------------------------------------------------------------------------


async def test_back_without_to_reopens_the_last_node_the_run_waited_at(mcp: Mcp) -> None:
    run_id = await at_retry(mcp)
    result = await mcp.ok("guide_back", {"run_id": run_id})
    step(result, "advanced")
    assert set(result) == {"run_id", "status", "next", "node"}
    assert result["node"]["id"] == "n_card_age"
    status = await status_of(mcp, run_id)
    assert status["values"] == {"n_error_code": "E01"}
    assert status["path"][-1] == {"id": "n_card_age", "kind": "ask", "via": "back"}


async def test_back_to_an_earlier_node_discards_everything_after_it(mcp: Mcp) -> None:
    run_id = await at_retry(mcp)
    result = await mcp.ok("guide_back", {"run_id": run_id, "to": "n_error_code"})
    step(result, "advanced")
    assert result["node"]["id"] == "n_error_code"
    assert (await status_of(mcp, run_id))["values"] == {}
    again = await answer(mcp, run_id, choice="E02", at="n_error_code")
    assert again["node"]["id"] == "n_balance"


async def test_back_reopens_a_stalled_run(mcp: Mcp) -> None:
    run_id = await at_retry(mcp)
    await answer(mcp, run_id, choice="__unknown__", at="n_retry")
    result = await mcp.ok("guide_back", {"run_id": run_id, "to": "n_retry"})
    assert result["node"]["id"] == "n_retry"
    assert (await status_of(mcp, run_id))["state"] == "active"


async def test_back_to_a_node_not_on_the_path_is_an_error_with_path_candidates(mcp: Mcp) -> None:
    run_id = await at_retry(mcp)
    error = await mcp.fail("guide_back", {"run_id": run_id, "to": "n_verify"})
    assert set(error["candidates"]) == {"n_error_code", "n_card_age"}
    refused(
        error, "node not on the path", retryable=True, attempt=1, candidates=error["candidates"]
    )


# --- guide_close --------------------------------------------------------------------------


async def test_close_then_close_again_is_repeated(mcp: Mcp) -> None:
    run_id = (await start(mcp, "payment_failed"))["run_id"]
    closed = await mcp.ok("guide_close", {"run_id": run_id, "reason": "お客様が離脱した"})
    assert set(closed) == {"run_id", "state", "reason", "next"}
    assert (closed["run_id"], closed["state"], closed["reason"]) == (
        run_id,
        "closed",
        "お客様が離脱した",
    )
    again = await mcp.ok("guide_close", {"run_id": run_id, "reason": "お客様が離脱した"})
    assert again == {**closed, "repeated": True}
    assert (await status_of(mcp, run_id))["state"] == "closed"


async def test_a_closed_run_refuses_answers_and_back(mcp: Mcp) -> None:
    run_id = (await start(mcp, "payment_failed"))["run_id"]
    await mcp.ok("guide_close", {"run_id": run_id, "reason": "left"})
    answered = await mcp.fail("guide_answer", {"run_id": run_id, "choice": "E01"})
    refused(answered, "run is closed", retryable=False, attempt=1)
    back = await mcp.fail("guide_back", {"run_id": run_id})
    # The same words, another reason (it cannot be reopened): another mistake.
    refused(back, "run is closed", retryable=False, attempt=1)
    assert "guide_start" in back["next"]


# --- guide_draft --------------------------------------------------------------------------


def draft_flow(flow_id: str, *, target: str = "n_done") -> str:
    return f"""\
id: {flow_id}
title: 下書きの手順
category: payments
entry: n_ask
nodes:
  - id: n_ask
    kind: ask
    say: 確認する
    accepts:
      ok: 問題ない
    next:
      ok: {target}
  - id: n_done
    kind: end
    outcome: resolved
    say: 締める
"""


async def test_draft_of_a_clean_flow_is_ok_and_stays_out_of_flows(mcp: Mcp) -> None:
    flow_id = f"draft_{uuid.uuid4().hex[:8]}"
    result = await mcp.ok("guide_draft", {"yaml": draft_flow(flow_id)})
    assert set(result) == {"draft_id", "flow_id", "ok", "findings", "next"}
    assert (result["flow_id"], result["ok"]) == (flow_id, True)
    assert all(f["level"] == "warning" for f in result["findings"])
    listed = await mcp.ok("guide_flows", {"category": "payments"})
    assert flow_id not in {f["id"] for f in listed["flows"]}
    error = await mcp.fail("guide_start", {"flow_id": flow_id})
    refused(error, "flow not found", retryable=True, attempt=1)


async def test_draft_with_lint_errors_is_stored_with_its_findings(mcp: Mcp) -> None:
    flow_id = f"draft_{uuid.uuid4().hex[:8]}"
    result = await mcp.ok("guide_draft", {"yaml": draft_flow(flow_id, target="n_nowhere")})
    assert result["ok"] is False
    assert isinstance(result["draft_id"], str) and result["draft_id"]
    errors = [f for f in result["findings"] if f["level"] == "error"]
    assert "bad_target" in {f["code"] for f in errors}
    for finding in result["findings"]:
        assert {"level", "code", "where", "message"} <= finding.keys()


async def test_a_draft_named_like_the_catalogs_own_file_is_stored_with_a_schema_error(
    mcp: Mcp,
) -> None:
    text = draft_flow("categories").replace("下書きの手順", f"手順 {uuid.uuid4().hex[:8]}")
    result = await mcp.ok("guide_draft", {"yaml": text})
    assert (result["flow_id"], result["ok"]) == ("categories", False)
    assert [f for f in result["findings"] if f["level"] == "error"] == [
        {
            "level": "error",
            "code": "schema",
            "where": "categories",
            "message": "flow id 'categories' cannot be used: categories.yaml is the catalog's "
            "own file of categories; choose another id",
            "line": 1,
        }
    ]


async def test_the_same_draft_again_returns_the_pending_one_marked_repeated(mcp: Mcp) -> None:
    text = draft_flow(f"draft_{uuid.uuid4().hex[:8]}")
    first = await mcp.ok("guide_draft", {"yaml": text})
    again = await mcp.ok("guide_draft", {"yaml": text})
    assert again["draft_id"] == first["draft_id"]
    assert again["repeated"] is True and "repeated" not in first
    assert {k: v for k, v in again.items() if k not in ("next", "repeated")} == {
        k: v for k, v in first.items() if k != "next"
    }


async def test_a_changed_draft_of_the_same_flow_replaces_the_pending_one(mcp: Mcp) -> None:
    flow_id = f"draft_{uuid.uuid4().hex[:8]}"
    first = await mcp.ok("guide_draft", {"yaml": draft_flow(flow_id)})
    second = await mcp.ok("guide_draft", {"yaml": draft_flow(flow_id).replace("締める", "閉じる")})
    assert second["draft_id"] != first["draft_id"]
    assert first["draft_id"] in second["next"]


def alias_bomb() -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 7):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


# (text, the error): over 256 Ki characters the input schema refuses the argument
# itself; every other text is refused by the loader's safety checks.
REFUSED_DRAFTS = {
    "over-256-KiB-characters": ("title: " + "x" * (256 * 1024), "invalid arguments"),
    "over-256-KiB-bytes": ("title: " + "手" * 90_000, "draft refused"),
    "python-tag": (
        'id: evil\ntitle: !!python/object/apply:os.system ["echo pwned"]\n',
        "draft refused",
    ),
    "alias-bomb": (alias_bomb(), "draft refused"),
    "not-a-mapping": ("- id: a\n- id: b\n", "draft refused"),
    "mapping-without-id": ("title: 名前のない手順\n", "draft refused"),
    "id-that-is-not-a-flow-id": ("id: Refund Request\ntitle: x\n", "draft refused"),
    "does-not-parse": ("id: x\ntitle: [unclosed\n", "draft refused"),
    "nesting-deeper-than-32": (
        "id: deep\nnodes: " + "[" * 40 + "]" * 40 + "\n",
        "draft refused",
    ),
}


@pytest.mark.parametrize(("text", "code"), REFUSED_DRAFTS.values(), ids=REFUSED_DRAFTS.keys())
async def test_draft_refuses_unsafe_oversized_or_unnamed_yaml(
    mcp: Mcp, text: str, code: str
) -> None:
    await new_streak(mcp)
    error = await mcp.fail("guide_draft", {"yaml": text})
    refused(error, code, retryable=True, attempt=1)


# --- errors (spec §7) ---------------------------------------------------------------------

# (tool, arguments, the error, candidates): the input schema refuses what it describes
# (types, names, lengths, key counts); the engine refuses the values inside `values`.
RUN_ARGUMENT_ERRORS: dict[str, tuple[str, dict[str, Any], str, list[str] | None]] = {
    "wrong-type": ("guide_answer", {"choice": 5}, "invalid arguments", None),
    "unknown-argument": ("guide_answer", {"chioce": "E01"}, "invalid arguments", ["choice"]),
    "too-long": ("guide_answer", {"choice": "E" * 65}, "invalid arguments", None),
    "missing-required": ("guide_close", {}, "invalid arguments", None),
    "values-not-an-object": ("guide_answer", {"values": ["E01"]}, "invalid arguments", None),
    "value-not-a-string": (
        "guide_answer",
        {"values": {"n_error_code": 1}},
        "value is not a string",
        None,
    ),
    "label-too-long": (
        "guide_answer",
        {"values": {"n_error_code": "E" * 65}},
        "value too long",
        None,
    ),
    "slot-value-too-long": (
        "guide_answer",
        {"values": {"order_id": "A" * 1001}},
        "value too long",
        None,
    ),
    "too-many-keys": (
        "guide_answer",
        {"values": {f"k{i}": "x" for i in range(201)}},
        "invalid arguments",
        None,
    ),
}


@pytest.mark.parametrize(
    ("tool", "args", "code", "candidates"),
    RUN_ARGUMENT_ERRORS.values(),
    ids=RUN_ARGUMENT_ERRORS.keys(),
)
async def test_argument_errors_on_a_run_are_fixable_tool_errors(
    mcp: Mcp, tool: str, args: dict[str, Any], code: str, candidates: list[str] | None
) -> None:
    run_id = (await start(mcp, "payment_failed"))["run_id"]
    before = await status_of(mcp, run_id)
    error = await mcp.fail(tool, {"run_id": run_id, **args})
    refused(error, code, retryable=True, attempt=1, candidates=candidates)
    if code == "invalid arguments":
        assert tool in error["next"], error["next"]  # call the same tool again, fixed
    assert await status_of(mcp, run_id) == before


async def test_unknown_argument_error_names_the_close_argument(mcp: Mcp) -> None:
    run_id = (await start(mcp, "payment_failed"))["run_id"]
    error = await mcp.fail("guide_answer", {"run_id": run_id, "chioce": "E01"})
    assert error["candidates"] == ["choice"]


NO_RUN_ARGUMENT_ERRORS: dict[str, tuple[str, dict[str, Any], list[str] | None]] = {
    "wrong-type": ("guide_flows", {"category": 5}, None),
    "missing-required": ("guide_start", {}, None),
    "unknown-argument": ("guide_start", {"flow_id": "payment_failed", "flow": "x"}, ["flow_id"]),
    "too-long": ("guide_start", {"flow_id": "f" * 65}, None),
    "yaml-not-a-string": ("guide_draft", {"yaml": {"id": "x"}}, None),
}


@pytest.mark.parametrize(
    ("tool", "args", "candidates"),
    NO_RUN_ARGUMENT_ERRORS.values(),
    ids=NO_RUN_ARGUMENT_ERRORS.keys(),
)
async def test_argument_errors_without_a_run_are_tool_errors(
    mcp: Mcp, tool: str, args: dict[str, Any], candidates: list[str] | None
) -> None:
    await new_streak(mcp)
    error = await mcp.fail(tool, args)
    refused(error, "invalid arguments", retryable=True, attempt=1, candidates=candidates)
    assert tool in error["next"], error["next"]


UNKNOWN_TOOL_CANDIDATES = [
    "guide_flows",
    "guide_close",
    "guide_draft",
    "guide_answer",
    "guide_back",
]


async def test_unknown_tool_is_a_tool_error_with_candidates(mcp: Mcp) -> None:
    await new_streak(mcp)
    error = await mcp.fail("guide_flow", {})
    refused(error, "unknown tool", retryable=False, attempt=1, candidates=UNKNOWN_TOOL_CANDIDATES)


async def test_same_failing_call_twice_is_marked_repeated(mcp: Mcp) -> None:
    run_id = await at_retry(mcp)
    first = await mcp.fail("guide_back", {"run_id": run_id, "to": "n_nowhere"})
    second = await mcp.fail("guide_back", {"run_id": run_id, "to": "n_nowhere"})
    candidates = first.get("candidates")
    refused(first, "node not on the path", retryable=True, attempt=1, candidates=candidates)
    refused(
        second,
        "node not on the path",
        retryable=True,
        attempt=2,
        candidates=candidates,
        repeated=True,
    )
    third = await mcp.fail("guide_back", {"run_id": run_id, "to": "n_nowhere"})
    refused(
        third,
        "node not on the path",
        retryable=False,
        attempt=3,
        candidates=candidates,
        repeated=True,
    )
    other = await mcp.fail("guide_back", {"run_id": run_id, "to": "n_elsewhere"})
    # Another node named: another mistake, which starts at 1.
    refused(
        other, "node not on the path", retryable=True, attempt=1, candidates=other.get("candidates")
    )


async def test_third_failure_on_a_run_is_not_retryable(mcp: Mcp) -> None:
    run_id = await at_retry(mcp)
    errors = [await mcp.fail("guide_back", {"run_id": run_id, "to": "n_nowhere"}) for _ in "abcd"]
    assert [e["attempt"] for e in errors] == [1, 2, 3, 4]
    assert [e["retryable"] for e in errors] == [True, True, False, False]
    assert {e["error"] for e in errors} == {"node not on the path"}
    # From the third failure: the fix stays, and the advice to hand over follows it.
    assert errors[2]["next"] != errors[1]["next"]
    assert errors[2]["next"].startswith(errors[1]["next"])
    assert "guide_close" in errors[2]["next"]


async def test_failures_without_a_run_count_per_client_including_unknown_tools(
    mcp: Mcp,
) -> None:
    # attempt counts the failures with the same error: the same unknown tool twice; another
    # unknown tool is another mistake.
    await new_streak(mcp)
    first = await mcp.fail("guide_flow", {})
    second = await mcp.fail("guide_flow", {})
    other = await mcp.fail("guide_no_such_tool", {})
    refused(first, "unknown tool", retryable=False, attempt=1, candidates=UNKNOWN_TOOL_CANDIDATES)
    refused(
        second,
        "unknown tool",
        retryable=False,
        attempt=2,
        candidates=UNKNOWN_TOOL_CANDIDATES,
        repeated=True,
    )
    refused(other, "unknown tool", retryable=False, attempt=1)


# --- plain HTTP ---------------------------------------------------------------------------


async def test_post_from_a_foreign_origin_is_refused(server: Server) -> None:
    async with async_http_client() as http:
        response = await http.post(
            server.url,
            json=TOOLS_LIST,
            headers={**RPC_HEADERS, "Origin": "http://evil.example"},
        )
    assert response.status_code == 403


async def post_tools_list(server: Server, headers: dict[str, str]) -> httpx2.Response:
    async with async_http_client() as http:
        return await http.post(server.url, json=TOOLS_LIST, headers={**RPC_HEADERS, **headers})


def lists_the_tools(response: httpx2.Response) -> bool:
    tools = response.json()["result"]["tools"]
    return sorted(t["name"] for t in tools) == sorted(TOOL_ARGUMENTS)


async def test_a_post_from_an_origin_in_guidepost_allowed_origins_is_served(
    configured_server: Server,
) -> None:
    response = await post_tools_list(configured_server, {"Origin": ALLOWED_ORIGIN})
    assert response.status_code == 200, response.text
    assert lists_the_tools(response)


@pytest.mark.parametrize(
    "origin", ["http://evil.example", "http://console.example", "https://console.example:8443"]
)
async def test_a_post_from_an_origin_not_listed_is_refused_even_when_others_are(
    configured_server: Server, origin: str
) -> None:
    response = await post_tools_list(configured_server, {"Origin": origin})
    assert response.status_code == 403


@pytest.mark.parametrize("host", [CONFIGURED_HOST, f"{CONFIGURED_HOST}:8127"])
async def test_a_host_in_guidepost_allowed_hosts_is_served(
    configured_server: Server, host: str
) -> None:
    response = await post_tools_list(configured_server, {"Host": host})
    assert response.status_code == 200, response.text
    assert lists_the_tools(response)


@pytest.mark.parametrize("which", ["default", "configured"])
async def test_a_host_not_allowed_is_refused_with_421(
    server: Server, configured_server: Server, which: str
) -> None:
    """DNS rebinding: a request whose Host names another site never reaches a tool."""
    target = server if which == "default" else configured_server
    response = await post_tools_list(target, {"Host": "evil.example"})
    assert response.status_code == 421


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
async def test_mcp_endpoint_answers_with_and_without_trailing_slash(
    server: Server, path: str
) -> None:
    async with async_http_client() as http:
        response = await http.post(server.base + path, json=TOOLS_LIST, headers=RPC_HEADERS)
    assert response.status_code == 200
    tools = response.json()["result"]["tools"]
    assert sorted(t["name"] for t in tools) == sorted(TOOL_ARGUMENTS)
