"""What an agent meets first, over the real protocol against a real server (issue 8).

Ended runs refuse calls saying how they ended; failure streaks are counted per
caller and end with any accepted call; every tool declares an ``outputSchema``
that its results conform to; error texts point at candidates only when there are
some. Tests that do not depend on who is calling run with both SDK clients
(``mcp.Client``, sessionless, and ``ClientSession`` after ``initialize()``);
tests of per-caller counting use ``mcp.Client`` with a client name of their own,
because the name is part of an anonymous caller's key.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import jsonschema
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, Implementation, Tool

from tests.support.mcp_http import async_http_client
from tests.support.servers import Server

pytestmark = pytest.mark.anyio

CLEAN_DRAFT = """\
id: first_contact_draft
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
      ok: n_done
  - id: n_done
    kind: end
    outcome: resolved
    say: 締める
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Agent:
    """One connected client: ``ok`` expects a result, ``fail`` an error object."""

    def __init__(self, session: Any) -> None:
        self.session = session

    async def call(self, tool: str, args: dict[str, Any]) -> CallToolResult:
        result = await self.session.call_tool(tool, args)
        assert isinstance(result, CallToolResult), result
        return result

    async def ok(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await self.call(tool, args)
        payload = json.loads(result.content[0].text)
        assert not result.is_error, payload
        assert result.structured_content == payload
        return dict(payload)

    async def fail(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await self.call(tool, args)
        assert result.is_error, result.content
        assert result.structured_content is None, "an error carries no structured content"
        return dict(json.loads(result.content[0].text))

    async def tools(self) -> dict[str, Tool]:
        return {t.name: t for t in (await self.session.list_tools()).tools}


@asynccontextmanager
async def connect(kind: str, url: str, *, name: str | None = None) -> AsyncIterator[Agent]:
    if kind == "client":
        info = Implementation(name=name or f"first-contact-{uuid.uuid4().hex[:8]}", version="1")
        async with Client(url, client_info=info) as client:
            yield Agent(client)
        return
    async with (
        async_http_client() as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield Agent(session)


@pytest.fixture(params=["client", "session"])
async def agent(request: pytest.FixtureRequest, server: Server) -> AsyncIterator[Agent]:
    async with connect(request.param, server.url) as connected:
        yield connected


async def stalled_identity_run(agent: Agent) -> str:
    started = await agent.ok("guide_start", {"flow_id": "identity_check"})
    stalled = await agent.ok(
        "guide_answer", {"run_id": started["run_id"], "choice": "__unknown__", "at": "n_basic"}
    )
    assert stalled["status"] == "stalled"
    return str(started["run_id"])


# --- ended runs -----------------------------------------------------------------------------


async def test_answer_with_at_on_a_stalled_run_says_it_stalled_and_to_hand_over(
    agent: Agent,
) -> None:
    run_id = await stalled_identity_run(agent)
    values = {"member_id": "M00012345", "birth_date": "1985-04-01", "postal_code": "150-0041"}
    error = await agent.fail("guide_answer", {"run_id": run_id, "values": values, "at": "n_basic"})
    assert error["error"] == "run is stalled"
    assert error["retryable"] is False
    assert "stalled at n_basic" in error["reason"]
    assert "human" in error["next"] and "guide_back" in error["next"]


@pytest.mark.hostile
async def test_status_of_a_run_stalled_at_a_collect_lists_the_required_slots_a_person_must_give(
    server: Server,
) -> None:
    """The slots stalled as unknown are what a person must give (resolve refuses an
    answer without them), so guide_status lists them beside the optional ones."""
    async with connect("client", server.url) as agent:
        run_id = await stalled_identity_run(agent)
        status = await agent.ok("guide_status", {"run_id": run_id})
    slots = status["node"]["slots"]
    assert list(slots) == ["member_id", "birth_date", "postal_code", "kana_name", "phone_last4"]
    assert [s["required"] for s in slots.values()] == [True, True, True, False, False]


async def test_answer_with_at_on_a_closed_run_says_it_was_closed_and_to_start_a_new_run(
    agent: Agent,
) -> None:
    run_id = (await agent.ok("guide_start", {"flow_id": "payment_failed"}))["run_id"]
    await agent.ok("guide_answer", {"run_id": run_id, "choice": "E01", "at": "n_error_code"})
    await agent.ok("guide_close", {"run_id": run_id, "reason": "お客様が離脱した"})
    error = await agent.fail(
        "guide_answer", {"run_id": run_id, "choice": "expired", "at": "n_card_age"}
    )
    assert error["error"] == "run is closed"
    assert error["retryable"] is False
    assert "closed" in error["reason"] and "n_card_age" not in error["reason"]
    assert "guide_start" in error["next"]


async def test_answer_with_at_on_a_completed_run_says_it_completed_with_its_outcome(
    agent: Agent,
) -> None:
    values = {"n_error_code": "E02", "n_balance": "short"}
    run_id = (await agent.ok("guide_start", {"flow_id": "payment_failed", "values": values}))[
        "run_id"
    ]
    done = await agent.ok("guide_answer", {"run_id": run_id, "choice": "success", "at": "n_retry"})
    assert done["status"] == "completed"
    error = await agent.fail(
        "guide_answer", {"run_id": run_id, "choice": "failed", "at": "n_retry"}
    )
    assert (error["error"], error["retryable"]) == ("run is completed", False)
    assert "outcome: resolved" in error["reason"]
    assert "guide_start" in error["next"]


# --- failure streaks (per caller) -----------------------------------------------------------


async def test_a_new_clients_first_typo_is_attempt_1_after_an_earlier_client_of_the_same_name(
    server: Server,
) -> None:
    # Two processes of one program share a caller key until keys exist: what the first
    # one did must not leak into the second's count once the first made a good call.
    name = f"first-contact-{uuid.uuid4().hex[:8]}"
    async with connect("client", server.url, name=name) as earlier:
        assert (await earlier.fail("guide_flows", {"category": 5}))["attempt"] == 1
        assert (await earlier.fail("guide_flows", {"category": 6}))["attempt"] == 2
        await earlier.ok("guide_flows", {})
    async with connect("client", server.url, name=name) as newcomer:
        error = await newcomer.fail("guide_start", {"flow_id": "payment_faild"})
    assert (error["attempt"], error["retryable"]) == (1, True)
    assert "repeated" not in error


async def test_any_accepted_call_ends_a_failure_streak_on_a_run(server: Server) -> None:
    async with connect("client", server.url) as agent:
        run_id = (await agent.ok("guide_start", {"flow_id": "payment_failed"}))["run_id"]
        first = await agent.fail("guide_back", {"run_id": run_id, "to": "n_nowhere"})
        await agent.ok("guide_status", {"run_id": run_id})
        again = await agent.fail("guide_back", {"run_id": run_id, "to": "n_nowhere"})
    assert first["attempt"] == again["attempt"] == 1
    assert "repeated" not in again


async def test_failures_on_one_run_are_counted_per_caller(server: Server) -> None:
    async with (
        connect("client", server.url) as owner,
        connect("client", server.url) as other,
    ):
        run_id = (await owner.ok("guide_start", {"flow_id": "payment_failed"}))["run_id"]
        mine = await owner.fail("guide_answer", {"run_id": run_id})
        theirs = await other.fail("guide_answer", {"run_id": run_id})
    assert mine["attempt"] == theirs["attempt"] == 1


async def test_distinct_honest_mistakes_on_a_run_each_count_from_one(server: Server) -> None:
    async with connect("client", server.url) as agent:
        run_id = (await agent.ok("guide_start", {"flow_id": "identity_check"}))["run_id"]
        mistakes = [
            {"choice": "M00012345"},  # a choice sent to a collect
            {"values": {"member_id": 12345678}},  # a value that is not a string
            {"values": {"member_id": "M" * 1001}},  # a value over the limit
        ]
        errors = [
            await agent.fail("guide_answer", {"run_id": run_id, "at": "n_basic", **mistake})
            for mistake in mistakes
        ]
        fixed = await agent.ok(
            "guide_answer",
            {"run_id": run_id, "at": "n_basic", "values": {"member_id": "M00012345"}},
        )
    assert [e["error"] for e in errors] == [
        "choice at a collect node",
        "value is not a string",
        "value too long",
    ]
    assert [(e["attempt"], e["retryable"]) for e in errors] == [(1, True)] * 3
    assert fixed["status"] == "advanced"


async def test_repeating_a_mistake_gives_up_at_the_third_time_even_with_others_between(
    server: Server,
) -> None:
    async with connect("client", server.url) as agent:
        run_id = (await agent.ok("guide_start", {"flow_id": "payment_failed"}))["run_id"]
        calls = [
            {"run_id": run_id, "choice": "E01", "at": "n_errorcode"},  # node not found
            {"run_id": run_id},  # nothing to answer
            {"run_id": run_id, "choice": "E1", "at": "n_errorcode"},  # the same error
            {"run_id": run_id, "choice": "E1", "at": "n_errorcode"},  # the same call again
        ]
        errors = [await agent.fail("guide_answer", args) for args in calls]
    assert [e["attempt"] for e in errors] == [1, 1, 2, 3]
    assert [e["retryable"] for e in errors] == [True, True, True, False]
    assert [e.get("repeated", False) for e in errors] == [False, False, False, True]
    assert "stop retrying" in errors[3]["next"] and "guide_close" in errors[3]["next"]


@pytest.mark.hostile
async def test_one_conversations_failures_do_not_count_against_another_on_the_same_key(
    server: Server,
) -> None:
    """Two conversations of one bot (the same client name on the same address: one
    caller), each on its own connection: the second's first mistake is its attempt 1."""
    async with connect("client", server.url, name="many-conversations") as first:
        errors = [await first.fail("guide_start", {"flow_id": "refund_requst"}) for _ in "ab"]
        async with connect("client", server.url, name="many-conversations") as second:
            other = await second.fail("guide_start", {"flow_id": "refund_requst"})
    assert [e["attempt"] for e in errors] == [1, 2]
    assert (other["attempt"], other["retryable"]) == (1, True)
    assert "stop retrying" not in other["next"]


@pytest.mark.hostile
async def test_giving_up_keeps_the_fix_and_only_the_same_error_counts(server: Server) -> None:
    """From the third failure, `next` still says how to fix the call, the loop breaker
    added to it; three different refusals of a draft are three first attempts."""
    async with connect("client", server.url) as agent:
        drafts = [
            await agent.fail("guide_draft", {"yaml": text})
            for text in ("title: no id\n", "id: [unclosed\n", "id: Not-An-Id\n")
        ]
        same = [await agent.fail("guide_flows", {"category": 7}) for _ in "abc"]
    assert [d["error"] for d in drafts] == ["draft refused"] * 3
    assert [d["attempt"] for d in drafts] == [1, 1, 1]
    assert [e["attempt"] for e in same] == [1, 2, 3]
    assert same[2]["retryable"] is False
    assert same[2]["next"].startswith(same[0]["next"]), same[2]["next"]
    assert "Call guide_flows again with arguments" in same[2]["next"]
    assert "stop retrying" in same[2]["next"]


# --- tool metadata --------------------------------------------------------------------------


async def test_every_tool_declares_a_valid_output_schema(agent: Agent) -> None:
    tools = await agent.tools()
    assert len(tools) == 7
    for name, tool in tools.items():
        assert tool.output_schema is not None, name
        assert tool.output_schema["type"] == "object", name
        jsonschema.Draft202012Validator.check_schema(tool.output_schema)


def type_lists(schema: Any, where: str = "") -> list[str]:
    """Where ``schema`` gives ``type`` as a list.

    >>> type_lists({"properties": {"a": {"type": ["string", "null"]}, "b": {"anyOf": []}}})
    ['/properties/a']
    """
    if isinstance(schema, list):
        return [w for i, item in enumerate(schema) for w in type_lists(item, f"{where}/{i}")]
    if not isinstance(schema, dict):
        return []
    found = [where] if isinstance(schema.get("type"), list) else []
    return found + [w for k, v in schema.items() for w in type_lists(v, f"{where}/{k}")]


async def test_no_schema_gives_a_list_of_types_where_anyof_is_portable(agent: Agent) -> None:
    tools = await agent.tools()
    for name, tool in tools.items():
        assert type_lists(tool.input_schema) == [], name
        assert type_lists(tool.output_schema) == [], name


async def test_close_and_back_are_destructive_and_reading_tools_read_only(agent: Agent) -> None:
    tools = await agent.tools()
    hints = {
        name: (t.annotations.destructive_hint, t.annotations.read_only_hint)
        for name, t in tools.items()
        if t.annotations is not None
    }
    assert hints == {
        "guide_flows": (False, True),
        "guide_start": (False, False),
        "guide_answer": (False, False),
        "guide_status": (False, True),
        "guide_back": (True, False),
        "guide_close": (True, False),
        "guide_draft": (False, False),
    }


async def test_draft_description_states_the_yaml_format(agent: Agent) -> None:
    description = (await agent.tools())["guide_draft"].description or ""
    for word in (
        "id",
        "title",
        "category",
        "entry",
        "nodes",
        "kind",
        "say",
        "ask",
        "tell",
        "collect",
        "end",
        "accepts",
        "next",
        "slots",
        "outcome",
        "__other__",
        "__unknown__",
    ):
        assert word in description, word
    assert len(description) < 1000, "sent on every tools/list: keep it short"


async def results_of_every_kind(agent: Agent) -> list[tuple[str, dict[str, Any]]]:
    """At least one result of each tool and each status, and the optional keys."""
    seen: list[tuple[str, dict[str, Any]]] = []

    async def ok(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await agent.ok(tool, args)
        seen.append((tool, result))
        return result

    await ok("guide_flows", {})
    await ok("guide_flows", {"category": "payments"})
    # payment_failed: ignored keys, unmatched with candidates, a fold with common, a
    # stall, back, a retry answered from the record, a completed run, status.
    pay = await ok(
        "guide_start",
        {"flow_id": "payment_failed", "values": {"n_eror_code": "E01"}, "ref": "ticket-9"},
    )
    run = pay["run_id"]
    await ok("guide_answer", {"run_id": run, "choice": "e01", "at": "n_error_code"})
    await ok("guide_answer", {"run_id": run, "choice": "e01", "at": "n_error_code"})
    await ok("guide_answer", {"run_id": run, "choice": "__unknown__", "at": "n_card_age"})
    await ok("guide_answer", {"run_id": run, "choice": "sucess", "at": "n_retry"})
    await ok("guide_answer", {"run_id": run, "choice": "__unknown__", "at": "n_retry"})
    await ok("guide_status", {"run_id": run})
    await ok("guide_back", {"run_id": run})
    await ok("guide_answer", {"run_id": run, "choice": "success", "at": "n_retry"})
    await ok("guide_status", {"run_id": run})
    # identity_check: tells, a collect with several values rejected at once.
    ident = await ok("guide_start", {"flow_id": "identity_check"})
    values = {"member_id": "1", "birth_date": "2", "postal_code": "150-0041"}
    await ok("guide_answer", {"run_id": ident["run_id"], "values": values, "at": "n_basic"})
    await ok("guide_close", {"run_id": ident["run_id"], "reason": "test"})
    await ok("guide_close", {"run_id": ident["run_id"], "reason": "test"})
    # incident_triage: a fold without a common node (outcome null).
    values = {"n_impact": "outage", "incident_id": "INC-20417", "n_recent_change": "deploy"}
    incident = await ok("guide_start", {"flow_id": "incident_triage", "values": values})
    await ok(
        "guide_answer",
        {"run_id": incident["run_id"], "choice": "__unknown__", "at": "n_mitigation_result"},
    )
    await ok("guide_status", {"run_id": incident["run_id"]})
    await ok("guide_draft", {"yaml": CLEAN_DRAFT})
    await ok("guide_draft", {"yaml": CLEAN_DRAFT.replace("ok: n_done", "ok: n_nowhere")})
    return seen


async def test_every_result_conforms_to_its_tools_output_schema(agent: Agent) -> None:
    tools = await agent.tools()
    seen = await results_of_every_kind(agent)
    statuses = set()
    for tool, result in seen:
        schema = tools[tool].output_schema
        assert schema is not None
        errors = list(jsonschema.Draft202012Validator(schema).iter_errors(result))
        assert not errors, (tool, result, [e.message for e in errors])
        statuses.add(result.get("status"))
    assert {"advanced", "completed", "unmatched", "branched", "stalled"} <= statuses
    seen_keys = {key for _, result in seen for key in result}
    assert {"candidates", "rejected_slots", "repeated", "ignored", "tell", "skipped"} <= seen_keys


async def test_output_schemas_are_closed_so_an_undeclared_key_fails(agent: Agent) -> None:
    tools = await agent.tools()
    started = await agent.ok("guide_start", {"flow_id": "payment_failed"})
    schema = tools["guide_start"].output_schema
    assert schema is not None
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid(started)
    assert not validator.is_valid({**started, "surprise": 1})
    assert not validator.is_valid({**started, "status": "unmatched"})  # without attempt etc.


# --- error texts ----------------------------------------------------------------------------


async def test_not_found_errors_mention_candidates_only_when_there_are_some(
    agent: Agent,
) -> None:
    far = [
        await agent.fail("guide_flows", {"category": "zzzzzzzz"}),
        await agent.fail("guide_start", {"flow_id": "zzzzzzzz"}),
    ]
    near = [
        await agent.fail("guide_flows", {"category": "paymnts"}),
        await agent.fail("guide_start", {"flow_id": "payment_faild"}),
    ]
    for error in far:
        assert "candidates" not in error and "candidates" not in error["next"], error
    for error in near:
        assert error["candidates"] and "candidates" in error["next"], error


async def test_candidates_for_at_name_only_nodes_a_run_waits_at(agent: Agent) -> None:
    run_id = (await agent.ok("guide_start", {"flow_id": "payment_failed"}))["run_id"]
    near_a_tell = await agent.fail(
        "guide_answer", {"run_id": run_id, "choice": "E01", "at": "n_generc"}
    )
    assert "n_generic" not in near_a_tell.get("candidates", [])
    near_an_ask = await agent.fail(
        "guide_answer", {"run_id": run_id, "choice": "E01", "at": "n_retyr"}
    )
    assert near_an_ask["candidates"] == ["n_retry"]
    at_a_tell = await agent.fail(
        "guide_answer", {"run_id": run_id, "choice": "E01", "at": "n_generic"}
    )
    assert at_a_tell["error"] == "node not found"
    assert "tell node" in at_a_tell["reason"]
