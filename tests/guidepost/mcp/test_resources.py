"""Resources and the prompt over the real protocol, against a real server (spec §5, §5.7,
§5.8): an agent reads the live flow it may change, drafts, and reads what became of its
draft; ``guide_draft`` says what the draft breaks and what a person said of the same text.

The keyed server serves the bundled flows plus GENERATED small flows, more than a page of
``resources/list``, and has two agent keys. Tests of keyless callers use the conftest's
server (no keys), where a caller is its address and client name.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from mcp import Client, ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation, TextResourceContents

from flowcore.common.limits import RESOURCES_PER_PAGE
from tests.support.drafting import (
    BROKEN_GUARANTEE,
    BROKEN_SCENARIO,
    REFUND,
    REFUND_CHANGE,
    REFUND_CHANGE_WITHOUT_HANDOVER,
    REFUND_REWORDED,
    REFUND_TEXT,
    edited,
)
from tests.support.mcp_http import async_http_client
from tests.support.servers import (
    BUNDLED_FLOWS,
    Server,
    copy_flows,
    django_eval,
    guidepost_command,
    serving,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

GENERATED = 2 * RESOURCES_PER_PAGE + 7
INVALID_PARAMS = -32602
NEW_FLOW = """\
id: resource_probe
title: A flow no tests cover
category: operations
entry: n_ask
nodes:
  - id: n_ask
    kind: ask
    say: Ask whether it is done
    accepts:
      yes: It is done
      no: It is not
    next:
      yes: n_done
      no: n_done
  - id: n_done
    kind: end
    outcome: done
    say: Close
"""


def generated_flow(number: int) -> str:
    return edited(NEW_FLOW, {"resource_probe": f"gen_{number:03d}"})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path, str, str]]:
    """A server with GENERATED flows beside the bundled ones, and two agent keys."""
    tmp = tmp_path_factory.mktemp("resources")
    flows = copy_flows(tmp / "flows")
    for number in range(GENERATED):
        (flows / f"gen_{number:03d}.yaml").write_text(generated_flow(number), encoding="utf-8")
    with serving(tmp, flows_dir=flows) as running:
        database_url = running.database_url
        keys = []
        for name in ("alice", "bob"):
            done = guidepost_command(database_url, "createkey", name)
            assert done.returncode == 0, done.stderr
            keys.append(done.stdout.splitlines()[-1])
        yield running, flows, keys[0], keys[1]


@asynccontextmanager
async def agent(url: str, key: str | None = None, name: str = "") -> AsyncIterator[Client]:
    """``mcp.Client`` (the sessionless protocol) with ``key`` on every request."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    info = Implementation(name=name or f"resources-{uuid.uuid4().hex[:8]}", version="1")
    async with (
        async_http_client(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), client_info=info) as client,
    ):
        yield client


@pytest.fixture
async def alice(keyed: tuple[Server, Path, str, str]) -> AsyncIterator[Client]:
    async with agent(keyed[0].url, keyed[2]) as client:
        yield client


@pytest.fixture
async def bob(keyed: tuple[Server, Path, str, str]) -> AsyncIterator[Client]:
    async with agent(keyed[0].url, keyed[3]) as client:
        yield client


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def draft(client: Client, text: str) -> dict[str, Any]:
    result = await call(client, "guide_draft", {"yaml": text})
    tools = {t.name: t for t in (await client.list_tools()).tools}
    schema = tools["guide_draft"].output_schema
    assert schema is not None
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(result)]
    assert not errors, (result, errors)
    return result


async def read(client: Client, uri: str) -> TextResourceContents:
    contents = (await client.read_resource(uri)).contents
    assert len(contents) == 1, contents
    content = contents[0]
    assert isinstance(content, TextResourceContents)
    assert str(content.uri) == uri
    return content


async def read_draft(client: Client, draft_id: str) -> dict[str, Any]:
    content = await read(client, f"guidepost://drafts/{draft_id}")
    assert content.mime_type == "application/json"
    report = json.loads(content.text)
    assert content.text == json.dumps(report, ensure_ascii=False, separators=(",", ":"))
    return dict(report)


async def refused(client: Client, uri: str) -> dict[str, Any]:
    """A refused read: a JSON-RPC error whose ``data`` is the error object (spec §7)."""
    with pytest.raises(MCPError) as raised:
        await client.read_resource(uri)
    error = raised.value
    assert error.code == INVALID_PARAMS, error
    data = error.data
    assert isinstance(data, dict)
    assert {"error", "reason", "next", "retryable", "attempt"} <= data.keys(), data
    assert error.message == f"{data['error']}: {data['reason']}. {data['next']}"
    return data


def decide(server: Server, *args: str) -> None:
    """A reviewer's command on the server's database and its flows directory (never the
    checkout's flows/, which the other tests copy while this one runs)."""
    flows = server.log.parent / "flows"
    assert flows.is_dir(), flows
    done = guidepost_command(server.database_url, *args, env={"GUIDEPOST_FLOWS_DIR": str(flows)})
    assert done.returncode == 0, done.stdout + done.stderr


def counts_in_tests_file(flow_id: str) -> tuple[int, int]:
    tests = yaml.safe_load((BUNDLED_FLOWS / "tests" / f"{flow_id}.yaml").read_text())
    return len(tests.get("scenarios") or []), len(tests.get("guarantees") or [])


# --- what the server offers -------------------------------------------------------------------


async def test_initialize_advertises_resources_and_prompts_and_the_instructions_name_them(
    keyed: tuple[Server, Path, str, str],
) -> None:
    server, _, key, _ = keyed
    async with (
        async_http_client(headers={"Authorization": f"Bearer {key}"}) as http,
        streamable_http_client(server.url, http_client=http) as (read_stream, write_stream),
        ClientSession(read_stream, write_stream) as session,
    ):
        init = await session.initialize()
        assert init.capabilities.resources is not None
        assert init.capabilities.prompts is not None
        assert init.instructions is not None
        assert "guidepost://flows/{flow_id}" in init.instructions
        assert "guidepost://drafts/{draft_id}" in init.instructions
        # The handshake protocol reads resources too.
        content = (await session.read_resource(f"guidepost://flows/{REFUND}")).contents[0]
        assert isinstance(content, TextResourceContents)
        assert content.text == REFUND_TEXT


async def test_resources_list_pages_through_every_live_flow_once_by_id(alice: Client) -> None:
    await draft(alice, generated_flow(GENERATED))  # a draft is never listed
    pages, cursor = [], None
    while True:
        listed = await alice.list_resources(cursor=cursor)
        pages.append(listed.resources)
        cursor = listed.next_cursor
        if cursor is None:
            break
    assert [len(page) for page in pages] == [RESOURCES_PER_PAGE, RESOURCES_PER_PAGE, 13]
    uris = [str(r.uri) for page in pages for r in page]
    bundled = sorted(p.stem for p in BUNDLED_FLOWS.glob("*.yaml") if p.stem != "categories")
    ids = sorted([*bundled, *(f"gen_{n:03d}" for n in range(GENERATED))])
    assert uris == [f"guidepost://flows/{flow_id}" for flow_id in ids]
    refund = next(r for page in pages for r in page if r.name == REFUND)
    assert (refund.title, refund.mime_type, refund.size) == (
        "Customer asks for a refund",
        "application/yaml",
        len(REFUND_TEXT.encode()),
    )
    assert refund.description and refund.description.startswith("A customer wants their money")


async def test_every_listed_flow_reads_as_its_files_text(
    alice: Client, keyed: tuple[Server, Path, str, str]
) -> None:
    flows = keyed[1]
    cursor = None
    read_count = 0
    while True:
        listed = await alice.list_resources(cursor=cursor)
        for resource in listed.resources:
            content = await read(alice, str(resource.uri))
            assert content.mime_type == "application/yaml"
            path = flows / f"{resource.name}.yaml"
            assert content.text == path.read_text(encoding="utf-8"), resource.name
            read_count += 1
        cursor = listed.next_cursor
        if cursor is None:
            break
    assert read_count == GENERATED + 6


async def test_resource_templates_give_the_flow_and_the_draft_uri(alice: Client) -> None:
    templates = (await alice.list_resource_templates()).resource_templates
    assert [(t.uri_template, t.mime_type) for t in templates] == [
        ("guidepost://flows/{flow_id}", "application/yaml"),
        ("guidepost://drafts/{draft_id}", "application/json"),
    ]


async def test_a_cursor_resources_list_never_gave_is_invalid_params(alice: Client) -> None:
    with pytest.raises(MCPError) as raised:
        await alice.list_resources(cursor="not a cursor")
    assert raised.value.code == INVALID_PARAMS
    assert raised.value.data["error"] == "invalid cursor"


async def test_an_unknown_flow_is_not_found_with_close_flow_ids(alice: Client) -> None:
    error = await refused(alice, "guidepost://flows/refund_requst")
    assert (error["error"], error["retryable"], error["candidates"]) == (
        "flow not found",
        True,
        [REFUND],
    )


async def test_a_uri_guidepost_does_not_serve_is_resource_not_found(alice: Client) -> None:
    error = await refused(alice, "guidepost://runs/r_AAAAAAAAAAAAAAAAAAAAAA")
    assert error["error"] == "resource not found"
    assert "guidepost://flows/<flow_id>" in error["next"]


async def test_refused_reads_count_like_tool_calls_and_give_up_at_the_third(
    alice: Client,
) -> None:
    uri = f"guidepost://drafts/d_{uuid.uuid4().hex[:16]}"
    attempts = [await refused(alice, uri) for _ in range(3)]
    assert [(e["attempt"], e["retryable"]) for e in attempts] == [
        (1, False),
        (2, False),
        (3, False),
    ]
    assert attempts[1]["repeated"] is True
    assert "stop retrying" in attempts[2]["next"]
    await read(alice, f"guidepost://flows/{REFUND}")  # an accepted read ends the streak
    assert (await refused(alice, uri))["attempt"] == 1


async def test_resource_reads_are_audited_as_calls_once_each(
    keyed: tuple[Server, Path, str, str],
) -> None:
    server = keyed[0]
    done = guidepost_command(server.database_url, "createkey", "auditor")
    assert done.returncode == 0, done.stderr
    async with agent(server.url, done.stdout.splitlines()[-1]) as client:
        await read(client, f"guidepost://flows/{REFUND}")
        await refused(client, "guidepost://flows/nowhere")
    rows = django_eval(
        server.database_url,
        "from access_app.models import AuditRecord\n"
        "result = list(AuditRecord.objects.filter(key_name='auditor')"
        ".order_by('id').values_list('tool', 'outcome'))",
    )
    # One record each, the refusal's too (answered 400 on this protocol, never recorded
    # a second time as an HTTP refusal).
    assert rows == [["resources/read", "ok"], ["resources/read", "flow not found"]]


# --- guide_draft: the tests and what a person said before -------------------------------------


async def test_guide_draft_names_the_scenarios_and_guarantees_a_change_breaks(
    alice: Client,
) -> None:
    result = await draft(alice, REFUND_CHANGE_WITHOUT_HANDOVER)
    scenarios, guarantees = counts_in_tests_file(REFUND)
    assert result["ok"] is True
    assert result["tests"] == {
        "scenarios": scenarios,
        "failed": 1,
        "guarantees": guarantees,
        "broken": 1,
        "names": [BROKEN_SCENARIO, BROKEN_GUARANTEE],
    }
    assert f"it fails 1 of {scenarios} scenarios" in result["next"]
    assert "The reviewer sees this and must confirm it" in result["next"]


async def test_guide_draft_of_a_change_the_tests_accept_says_the_reviewer_sees_the_same(
    alice: Client,
) -> None:
    result = await draft(alice, REFUND_REWORDED)
    scenarios, guarantees = counts_in_tests_file(REFUND)
    assert result["tests"] == {
        "scenarios": scenarios,
        "failed": 0,
        "guarantees": guarantees,
        "broken": 0,
        "names": [],
    }
    assert "the reviewer sees the same check" in result["next"]


async def test_guide_draft_without_tests_to_run_has_no_tests_key(alice: Client) -> None:
    assert "tests" not in await draft(alice, NEW_FLOW)  # no tests file for a new flow
    broken = edited(REFUND_TEXT, {"entry: n_order": "entry: n_nowhere"})
    result = await draft(alice, broken)  # lint errors: nothing to run the tests on
    assert (result["ok"], "tests" in result) == (False, False)


async def test_resubmitting_a_discarded_text_stores_it_again_and_says_what_was_said(
    alice: Client, keyed: tuple[Server, Path, str, str]
) -> None:
    text = edited(NEW_FLOW, {"resource_probe": "resubmitted_probe"})
    first = await draft(alice, text)
    assert "previously" not in first
    decide(keyed[0], "discard", first["draft_id"], "--reason", "Ask for the ticket number first")
    again = await draft(alice, text)
    assert again["draft_id"] != first["draft_id"]
    assert "repeated" not in again
    assert again["previously"] == {
        "draft_id": first["draft_id"],
        "state": "discarded",
        "reason": "Ask for the ticket number first",
    }
    assert f"discarded this exact text before ({first['draft_id']})" in again["next"]
    # Still the same text, now pending: repeated, and the discard still said.
    repeated = await draft(alice, text)
    assert (repeated["draft_id"], repeated["repeated"]) == (again["draft_id"], True)
    assert repeated["previously"] == again["previously"]
    assert (await read_draft(alice, again["draft_id"]))["state"] == "pending"


# --- a draft's resource ---------------------------------------------------------------------


async def test_a_pending_draft_reads_to_its_submitter_with_the_live_tests_and_no_decision(
    alice: Client,
) -> None:
    drafted = await draft(alice, REFUND_CHANGE)
    report = await read_draft(alice, drafted["draft_id"])
    assert set(report) == {"draft_id", "flow_id", "state", "submitted_at", "tests", "next"}
    assert (report["draft_id"], report["flow_id"], report["state"]) == (
        drafted["draft_id"],
        REFUND,
        "pending",
    )
    assert report["submitted_at"].endswith("Z")
    assert report["tests"]["failed"] == 1
    assert report["tests"]["names"] == [BROKEN_SCENARIO]
    assert "read this resource again later" in report["next"]


async def test_another_keys_draft_reads_exactly_like_a_draft_never_issued(
    alice: Client, bob: Client
) -> None:
    drafted = await draft(alice, edited(NEW_FLOW, {"resource_probe": "alices_probe"}))
    own = await draft(bob, edited(NEW_FLOW, {"resource_probe": "bobs_probe"}))
    foreign = await refused(bob, f"guidepost://drafts/{drafted['draft_id']}")
    never = await refused(bob, "guidepost://drafts/d_0000000000000000")
    assert foreign["error"] == never["error"] == "draft not found"
    assert foreign["reason"].replace(drafted["draft_id"], "ID") == never["reason"].replace(
        "d_0000000000000000", "ID"
    )
    differ = ("reason", "candidates", "attempt", "repeated")  # the second counts on
    assert {k: v for k, v in foreign.items() if k not in differ} == {
        k: v for k, v in never.items() if k not in differ
    }
    # Candidates come from bob's own drafts only.
    assert drafted["draft_id"] not in foreign.get("candidates", [])
    assert (await read_draft(bob, own["draft_id"]))["flow_id"] == "bobs_probe"


async def test_an_approved_draft_says_who_approved_it_when_and_the_tests_at_approval(
    alice: Client, keyed: tuple[Server, Path, str, str]
) -> None:
    server = keyed[0]
    drafted = await draft(alice, REFUND_CHANGE)
    decide(server, "approve", drafted["draft_id"], "--break-tests", "--as", "maria")
    try:
        report = await read_draft(alice, drafted["draft_id"])
        assert report["state"] == "approved"
        assert report["decided_by"] == "maria"
        assert report["decided_at"] >= report["submitted_at"]
        assert report["tests"]["names"] == [BROKEN_SCENARIO]
        assert "reason" not in report
        assert "guide_start runs it" in report["next"]
    finally:  # the live refund flow as it was, for the other tests
        restored = await draft(alice, REFUND_TEXT)
        decide(server, "approve", restored["draft_id"], "--as", "maria")


async def test_a_discarded_draft_gives_the_reason_and_who_discarded_it(
    alice: Client, keyed: tuple[Server, Path, str, str]
) -> None:
    drafted = await draft(alice, edited(NEW_FLOW, {"resource_probe": "discarded_probe"}))
    decide(keyed[0], "discard", drafted["draft_id"], "--reason", "Duplicate", "--as", "lee")
    report = await read_draft(alice, drafted["draft_id"])
    assert (report["state"], report["decided_by"], report["reason"]) == (
        "discarded",
        "lee",
        "Duplicate",
    )
    assert "tests" not in report
    assert "decided_at" in report


async def test_a_superseded_draft_points_at_the_draft_that_replaced_it(alice: Client) -> None:
    first = await draft(alice, edited(NEW_FLOW, {"resource_probe": "superseded_probe"}))
    second = await draft(
        alice,
        edited(NEW_FLOW, {"resource_probe": "superseded_probe", "Close": "Close politely"}),
    )
    report = await read_draft(alice, first["draft_id"])
    assert report["state"] == "superseded"
    assert report["reason"] == f"superseded by {second['draft_id']}"
    assert f"guidepost://drafts/{second['draft_id']}" in report["next"]


async def test_a_keyless_caller_reads_its_own_draft_and_not_another_clients(
    server: Server,
) -> None:
    async with agent(server.url, name="keyless-author") as author:
        drafted = await draft(author, edited(NEW_FLOW, {"resource_probe": "keyless_probe"}))
        assert (await read_draft(author, drafted["draft_id"]))["state"] == "pending"
    async with agent(server.url, name="keyless-author") as same_caller:
        assert (await read_draft(same_caller, drafted["draft_id"]))["state"] == "pending"
    async with agent(server.url, name="keyless-other") as other:
        error = await refused(other, f"guidepost://drafts/{drafted['draft_id']}")
        assert error["error"] == "draft not found"
        assert "candidates" not in error


# --- the prompt -----------------------------------------------------------------------------


async def test_the_one_prompt_is_the_servers_instructions(alice: Client) -> None:
    prompts = (await alice.list_prompts()).prompts
    assert [p.name for p in prompts] == ["walk_flows"]
    got = await alice.get_prompt("walk_flows")
    assert len(got.messages) == 1
    message = got.messages[0]
    assert message.role == "user"
    assert message.content.type == "text"
    assert alice.instructions
    assert message.content.text == alice.instructions


async def test_an_unknown_prompt_is_invalid_params_with_the_error_object(alice: Client) -> None:
    with pytest.raises(MCPError) as raised:
        await alice.get_prompt("walk_flow")
    assert raised.value.code == INVALID_PARAMS
    assert raised.value.data["error"] == "prompt not found"
    assert raised.value.data["candidates"] == ["walk_flows"]
