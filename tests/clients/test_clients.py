"""Every MCP client library docs/clients.md covers, proven against a real server.

Each client runs in an environment of its own, with its versions pinned: the
official Python SDK 2.x in this project's environment, every other Python client
through ``uv run --isolated --with`` (resolved as of ``EXCLUDE_NEWER``, so a run
is repeatable), and the TypeScript SDKs 1.x and 2.x through ``npm ci`` from the
committed ``ts/package-lock.json``; and the MCP Inspector's command line, from
``inspector/package-lock.json`` with the Node 22 it needs. Each probe (``probes/``,
``ts/probe.mjs``) lists the tools, starts a run with values, answers, reads an error
result, lists the resources and templates and reads one, with an agent key on every
request, and prints a JSON report these tests judge. The probes talk to the server
through a recorder (``recorder.py``) that measures every request and response body; the
sizes land in ``var/clients/payloads.md`` (``scripts/dev.py clients`` prints it).

A probe whose environment cannot be built fails its tests: CI reaches PyPI and npm.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.clients.recorder import Exchange, Recorder, recording
from tests.support.paths import find_uv
from tests.support.servers import REPO, Server, guidepost_command

pytestmark = [pytest.mark.slow, pytest.mark.clients]

HERE = Path(__file__).parent
PROBES = HERE / "probes"
TS = HERE / "ts"
INSPECTOR = HERE / "inspector"
OUT = REPO / "var" / "clients"
# Every Python client's dependencies are resolved as the package index stood then.
EXCLUDE_NEWER = "2026-12-05T00:00:00Z"
PROBE_TIMEOUT = 600
TOOLS = [
    "guide_answer",
    "guide_back",
    "guide_close",
    "guide_draft",
    "guide_flows",
    "guide_start",
    "guide_status",
]
ERROR_KEYS = {"error", "reason", "next", "retryable", "attempt"}
RESOURCE = "guidepost://flows/refund_request"
TEMPLATE = "guidepost://flows/{flow_id}"


@dataclass(frozen=True)
class Client:
    """One client library as a probe drives it."""

    title: str
    runner: str  # "project" (this environment), "uv" or "node"
    script: str
    args: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()  # uv: the pinned requirements
    versions: tuple[tuple[str, str], ...] = ()  # what the report must show installed
    surfaced: str = "isError"  # how the library hands a failed call to its user


CLIENTS = {
    "mcp2": Client("MCP Python SDK 2.x", "project", "probe_mcp2.py", versions=(("mcp", "2.3.0"),)),
    "mcp2-legacy": Client(
        "MCP Python SDK 2.x, legacy handshake",
        "project",
        "probe_mcp2.py",
        args=("legacy",),
        versions=(("mcp", "2.3.0"),),
    ),
    "mcp1": Client(
        "MCP Python SDK 1.x",
        "uv",
        "probe_mcp1.py",
        packages=("mcp==1.30.0",),
        versions=(("mcp", "1.30.0"),),
    ),
    "fastmcp": Client(
        "fastmcp",
        "uv",
        "probe_fastmcp.py",
        packages=("fastmcp==4.2.3",),
        versions=(("fastmcp", "4.2.3"), ("mcp", "2.3.0")),
        surfaced="ToolError",
    ),
    "langchain": Client(
        "langchain-mcp-adapters",
        "uv",
        "probe_langchain.py",
        packages=("langchain-mcp-adapters==0.3.2", "mcp==1.30.0"),
        versions=(("langchain-mcp-adapters", "0.3.2"), ("mcp", "1.30.0")),
        surfaced="ToolMessage status=error",
    ),
    "langchain-session": Client(
        "langchain-mcp-adapters, one session",
        "uv",
        "probe_langchain.py",
        args=("session",),
        packages=("langchain-mcp-adapters==0.3.2", "mcp==1.30.0"),
        versions=(("langchain-mcp-adapters", "0.3.2"), ("mcp", "1.30.0")),
        surfaced="ToolMessage status=error",
    ),
    "pydantic-ai": Client(
        "pydantic-ai",
        "uv",
        "probe_pydantic_ai.py",
        packages=("pydantic-ai-slim[mcp]==2.78.0",),
        versions=(("pydantic-ai-slim", "2.78.0"), ("fastmcp-slim", "4.2.3"), ("mcp", "2.3.0")),
        surfaced="ModelRetry",
    ),
    "openai-agents": Client(
        "openai-agents",
        "uv",
        "probe_openai_agents.py",
        packages=("openai-agents==0.24.0",),
        versions=(("openai-agents", "0.24.0"), ("mcp", "2.3.0")),
    ),
    "ts-sdk1": Client(
        "TypeScript SDK 1.x",
        "node",
        "probe.mjs",
        args=("sdk1",),
        versions=(("@modelcontextprotocol/sdk", "1.32.2"),),
    ),
    "ts-sdk2": Client(
        "TypeScript SDK 2.x",
        "node",
        "probe.mjs",
        args=("sdk2",),
        versions=(("@modelcontextprotocol/client", "2.4.0"),),
    ),
}


def npm_installed(source: Path, files: tuple[str, ...]) -> Path:
    """var/clients/<source's name>: ``files`` of ``source`` with their node_modules,
    installed by ``npm ci`` from the committed lock file whenever that file changes."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if not npm or not node:
        pytest.fail(
            "node and npm are needed for the TypeScript clients: apt-get install nodejs npm"
        )
    target = OUT / source.name
    target.mkdir(parents=True, exist_ok=True)
    lock = hashlib.sha256((source / "package-lock.json").read_bytes()).hexdigest()
    stamp = target / "installed.sha256"
    # The SQLite and PostgreSQL passes run at once (scripts/dev.py test): one installs,
    # the other waits for it and finds the stamp.
    with (OUT / f"{source.name}.lock").open("a") as installing:
        fcntl.flock(installing, fcntl.LOCK_EX)
        for name in ("package.json", "package-lock.json", *files):
            shutil.copyfile(source / name, target / name)
        if not stamp.exists() or stamp.read_text() != lock:
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=target,
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT,
            )
            assert done.returncode == 0, f"npm ci failed in {target}:\n{done.stdout}\n{done.stderr}"
            stamp.write_text(lock)
    return target


def command(client: Client, url: str) -> tuple[list[str], Path]:
    """The probe's command line and working directory."""
    if client.runner == "project":
        return [sys.executable, str(PROBES / client.script), url, *client.args], REPO
    if client.runner == "node":
        where = npm_installed(TS, ("probe.mjs",))
        return [shutil.which("node") or "node", client.script, url, *client.args], where
    isolated = [find_uv(), "run", "--isolated", "--no-project", "--exclude-newer", EXCLUDE_NEWER]
    packages = [arg for package in client.packages for arg in ("--with", package)]
    return [*isolated, *packages, "python", str(PROBES / client.script), url, *client.args], REPO


@dataclass
class Report:
    name: str
    data: dict[str, Any]
    exchanges: list[Exchange]
    refused: list[Exchange]  # the probe's last step, with a key the server never issued


@pytest.fixture(scope="module")
def key(server: Server) -> str:
    """An agent key: once one exists, the server refuses every request without one."""
    done = guidepost_command(server.database_url, "createkey", "client-probes")
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1]


@pytest.fixture(scope="module")
def recorder(server: Server, key: str) -> Iterator[tuple[str, Recorder]]:
    with recording(server.base) as (base, recorder):
        yield base + "/mcp/", recorder


@pytest.fixture(scope="module")
def payloads() -> Iterator[dict[str, list[Exchange]]]:
    """Every client's exchanges, written to var/clients/ once the module is done."""
    measured: dict[str, list[Exchange]] = {}
    yield measured
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "payloads.json").write_text(
        json.dumps({name: [e.__dict__ for e in ex] for name, ex in measured.items()}, indent=1)
    )
    (OUT / "payloads.md").write_text(payload_table(measured))


@pytest.fixture(scope="module")
def probed(
    recorder: tuple[str, Recorder], key: str, payloads: dict[str, list[Exchange]]
) -> Callable[[str], Report]:
    """``probed(name)``: that client's report, its probe run once per module (a probe
    that failed fails every test that asks for it, with the same message)."""
    url, record = recorder
    done: dict[str, Report] = {}
    failed: dict[str, str] = {}

    def probe(name: str) -> Report:
        if name not in done and name not in failed:
            try:
                done[name] = run_probe(name, url, record, key)
            except (AssertionError, pytest.fail.Exception) as exc:
                failed[name] = str(exc)
            else:
                payloads[name] = done[name].exchanges
        if name in failed:
            pytest.fail(failed[name], pytrace=False)
        return done[name]

    return probe


def run_probe(name: str, url: str, record: Recorder, key: str) -> Report:
    client = CLIENTS[name]
    argv, cwd = command(client, url)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT")}
    env["GUIDEPOST_KEY"] = key
    record.take()
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=PROBE_TIMEOUT
    )
    exchanges = record.take()
    assert done.returncode == 0, (
        f"the {client.title} probe exited {done.returncode}: its environment could not be "
        f"built, or the client failed to connect.\n$ {' '.join(argv)}\n{done.stdout}\n"
        f"{done.stderr[-4000:]}"
    )
    # The refused key is the probe's last step: its requests are the first 401 and after.
    cut = next((i for i, e in enumerate(exchanges) if e.status == 401), len(exchanges))
    data = json.loads(done.stdout.strip().splitlines()[-1])
    return Report(name, data, exchanges[:cut], exchanges[cut:])


@pytest.fixture(params=list(CLIENTS))
def report(request: pytest.FixtureRequest, probed: Callable[[str], Report]) -> Report:
    return probed(request.param)


def succeeded(report: Report, step: str) -> Any:
    result = report.data[step]
    assert not (isinstance(result, dict) and "failed" in result), (
        f"{CLIENTS[report.name].title}: step {step!r} failed: {result}"
    )
    return result


# --- the steps every client takes -----------------------------------------------------------


def test_the_client_runs_in_its_pinned_environment(report: Report) -> None:
    installed = report.data["versions"]
    for package, pinned in CLIENTS[report.name].versions:
        assert installed.get(package) == pinned, (package, installed)


def test_the_client_lists_the_seven_tools(report: Report) -> None:
    assert succeeded(report, "tools") == TOOLS


def test_the_client_starts_a_run_with_values_and_gets_the_first_question(report: Report) -> None:
    started = succeeded(report, "start")
    assert started["is_error"] is False
    payload = started["payload"]
    assert payload["status"] == "advanced"
    assert payload["skipped"] == ["n_order"]
    assert payload["node"]["id"] == "n_reason"
    assert payload["flow"] == {
        "id": "refund_request",
        "title": "Customer asks for a refund",
        "version": "2024.3",
    }


def test_the_client_answers_and_the_run_moves_on(report: Report) -> None:
    answered = succeeded(report, "answer")
    assert answered["is_error"] is False
    assert (answered["payload"]["status"], answered["payload"]["node"]["id"]) == (
        "advanced",
        "n_photos",
    )


@pytest.mark.parametrize(
    "report",
    [name for name in CLIENTS if name != "pydantic-ai"],  # it hands over one form only
    indirect=True,
)
def test_the_client_hands_over_the_structured_content_equal_to_the_text(report: Report) -> None:
    assert succeeded(report, "start")["structured"] is True
    assert succeeded(report, "answer")["structured"] is True


def test_the_client_surfaces_an_error_result_with_the_error_object(report: Report) -> None:
    error = succeeded(report, "error")
    assert (error["is_error"], error["surfaced"]) == (True, CLIENTS[report.name].surfaced)
    payload = error["payload"]
    assert isinstance(payload, dict), payload
    assert set(payload) == ERROR_KEYS, payload
    assert (payload["error"], payload["retryable"], payload["attempt"]) == (
        "run not found",
        False,
        1,
    )


def test_the_client_lists_the_flow_resources_and_the_template(report: Report) -> None:
    assert RESOURCE in succeeded(report, "resources")
    assert TEMPLATE in succeeded(report, "templates")


def test_the_client_reads_a_flow_resource(report: Report) -> None:
    text = succeeded(report, "read")
    assert text.startswith("id: refund_request\n"), text[:200]


def test_every_request_of_the_client_carried_the_key(report: Report) -> None:
    assert report.exchanges
    assert all(exchange.authorized for exchange in report.exchanges), report.exchanges
    assert not [e for e in report.exchanges if e.status == 401], report.exchanges


# What each library hands its user when the server refuses the key (docs/clients.md): the
# exception's type and the start of its words. Only the TypeScript SDKs pass on the error
# object (`invalid key`, with how to get one); the Python ones say "an error response" or
# the HTTP status.
SDK_ERROR = ("MCPError", "Server returned an error response")
HTTP_401 = ("HTTPStatusError", "Client error '401 Unauthorized' for url 'http://127.0.0.1:")
REFUSED = {
    "mcp2": SDK_ERROR,
    "mcp2-legacy": SDK_ERROR,
    "mcp1": HTTP_401,
    "fastmcp": SDK_ERROR,
    "langchain": HTTP_401,
    "langchain-session": HTTP_401,
    "pydantic-ai": SDK_ERROR,
    "openai-agents": SDK_ERROR,
    "ts-sdk1": (
        "Error",
        'Streamable HTTP error: Error POSTing to endpoint: {"error":"invalid key"',
    ),
    "ts-sdk2": ("SdkHttpError", 'Error POSTing to endpoint: {"error":"invalid key"'),
}


def test_a_refused_key_reaches_the_user_as_the_library_raises_it(report: Report) -> None:
    refused = report.data["refused_key"]
    assert report.refused and all(e.status == 401 for e in report.refused), report.refused
    raised, says = REFUSED[report.name]
    assert refused.get("raised") == raised, refused
    assert refused["says"].startswith(says), refused


# --- what a client does on its side ---------------------------------------------------------


def test_langchain_opens_a_session_and_lists_the_tools_again_for_every_call(
    probed: Callable[[str], Report],
) -> None:
    """MultiServerMCPClient.get_tools() tools open a new session per call; after the call,
    the mcp 1.x session fetches tools/list to validate the result: ~19 KB each time."""
    methods = [e.method for e in probed("langchain").exchanges if e.method]
    start = methods.index("tools/call")
    assert methods[start - 2 : start + 2] == [
        "initialize",
        "notifications/initialized",
        "tools/call",
        "tools/list",
    ]
    assert methods.count("initialize") == methods.count("tools/call") + 4  # + list + resources


def test_langchain_on_one_session_lists_the_tools_once(probed: Callable[[str], Report]) -> None:
    methods = [e.method for e in probed("langchain-session").exchanges if e.method]
    assert (methods.count("initialize"), methods.count("tools/list")) == (1, 1)


def test_openai_agents_strict_mode_falls_back_for_the_tools_with_values(
    probed: Callable[[str], Report],
) -> None:
    data = probed("openai-agents").data
    assert data["strict"] == {name: name not in ("guide_answer", "guide_start") for name in TOOLS}
    # Strict conversion makes every property required, optional ones included.
    assert data["strict_required"]["guide_flows"] == ["category"]
    assert data["strict_required"]["guide_back"] == ["run_id", "to"]


def test_openai_agents_gives_the_model_the_error_object_as_text(
    probed: Callable[[str], Report],
) -> None:
    seen = probed("openai-agents").data["model_sees_error"]
    assert seen["type"] == "text"
    assert json.loads(seen["text"])["error"] == "run not found"


def test_openai_agents_escapes_non_ascii_only_with_use_structured_content(
    probed: Callable[[str], Report],
) -> None:
    seen = probed("openai-agents").data["model_sees_flows"]
    text, structured = seen["text"], seen["structured"]
    assert json.loads(text) == json.loads(structured), "the same object either way"
    assert "決済" in text and "決済" not in structured and "\\u6c7a\\u6e08" in structured
    growth = len(structured.encode()) / len(text.encode())
    assert growth > 1, growth  # docs/clients.md gives the factor for the bundled flows


def test_pydantic_ai_ends_an_agent_run_whose_tool_fails_past_its_retries(
    probed: Callable[[str], Report],
) -> None:
    data = probed("pydantic-ai").data
    assert data["agent_retry"] == {"raised": "UnexpectedModelBehavior"}
    assert data["agent_failed"]["output"]["error"] == "run not found"


def test_fastmcp_data_turns_absent_keys_into_none(probed: Callable[[str], Report]) -> None:
    """``result.data`` is built through the output schema: a key we leave out comes back
    as None there (an ask node gets ``slots=None``); ``structured_content`` is exact."""
    data = probed("fastmcp").data["data"]["guide_start"]
    assert data["type"] == "Root"
    assert "slots" in data["node_none"], data


# --- the MCP Inspector's command line -------------------------------------------------------


def inspector(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    """``mcp-inspector --cli`` on the server's MCP endpoint, with Node 22 from npm."""
    where = npm_installed(INSPECTOR, ())
    launcher = where / "node_modules/@modelcontextprotocol/inspector/clients/launcher/build"
    argv = [str(where / "node_modules/.bin/node"), str(launcher / "index.js"), "--cli"]
    argv += [server.url, "--transport", "http", "--method", "tools/list", *args]
    # Its state (~/.mcp-inspector) beside it, not in the user's home.
    return subprocess.run(
        argv,
        cwd=where,
        env={**os.environ, "HOME": str(where)},
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


def test_the_inspectors_strict_check_finds_no_portability_problem(server: Server, key: str) -> None:
    done = inspector(server, "--strict", "--header", f"Authorization: Bearer {key}")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert sorted(tool["name"] for tool in json.loads(done.stdout)["tools"]) == TOOLS


def test_the_inspector_shows_a_refused_key_as_our_error_only_without_oauth(
    server: Server, key: str
) -> None:
    wrong = "Authorization: Bearer gpk_not_a_key_this_server_issued"
    assumed_oauth = inspector(server, "--header", wrong)
    assert assumed_oauth.returncode == 3
    assert "Interactive OAuth requires a TTY" in assumed_oauth.stderr, assumed_oauth.stderr
    refused = json.loads(inspector(server, "--stored-auth-only", "--header", wrong).stderr)
    assert refused["error"]["code"] == "auth_required"
    assert '"error":"invalid key"' in refused["error"]["message"], refused


# --- the payload table ----------------------------------------------------------------------

STEPS = [
    ("tools/list", ""),
    ("tools/call", "guide_start"),
    ("tools/call", "guide_answer"),
    ("tools/call", "guide_status"),
    ("resources/list", ""),
    ("resources/templates/list", ""),
    ("resources/read", RESOURCE),
]


def payload_table(measured: dict[str, list[Exchange]]) -> str:
    """Markdown: per client, the requests it made and their bytes (sent / received)
    before its first tools/list (connecting), then for each step's first request."""
    heads = ["connect", "tools/list", "guide_start", "guide_answer", "error"]
    heads += ["resources/list", "templates/list", "resources/read"]
    lines = ["| client | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for name, exchanges in measured.items():
        listed = next((i for i, e in enumerate(exchanges) if e.method == "tools/list"), 0)
        connect = exchanges[:listed]
        sent, received = sum(e.sent for e in connect), sum(e.received for e in connect)
        cells = [f"{len(connect)}: {sent} / {received}"]
        for method, called in STEPS:
            first = next((e for e in exchanges if (e.method, e.name) == (method, called)), None)
            cells.append(f"{first.sent} / {first.received}" if first else "–")
        lines.append(f"| {CLIENTS[name].title} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
